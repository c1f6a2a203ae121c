"""The messages that tell a volunteer what their GPU lacks for the project's GPU plan classes
(sched_send.cpp send_gpu_messages, send_gpu_property_messages; sched_customize.h
GPU_REQUIREMENTS; plan_class_spec.cpp PLAN_CLASS_SPEC::check notes them)."""

import pytest

from backend.daemons.plan_class import GpuRequirements, plan_class_proc_type, read_plan_class_spec
from backend.daemons.sched_types import SchedulerConfig
from backend.daemons.scheduler import GpuRequest, handle_request
from backend.models import GpuType
from protocol.models import AppVersionFile
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, demo_project

MB = 2**20
SPEC = """<plan_classes>
  <plan_class>
    <name>cuda</name>
    <gpu_type>nvidia</gpu_type>
    <cuda/>
    <min_nvidia_compcap>300</min_nvidia_compcap>
    <min_driver_version>40000</min_driver_version>
    <min_gpu_ram_mb>1024</min_gpu_ram_mb>
  </plan_class>
  <plan_class>
    <name>cuda_big</name>
    <gpu_type>nvidia</gpu_type>
    <min_gpu_ram_mb>2048</min_gpu_ram_mb>
  </plan_class>
  <plan_class>
    <name>cuda_new</name>
    <gpu_type>nvidia</gpu_type>
    <min_driver_version>50000</min_driver_version>
  </plan_class>
</plan_classes>
"""
UPGRADE = "NVIDIA GPU: Upgrade to the latest driver to process tasks using your computer's GPU"
UPGRADE_SOME = "NVIDIA GPU: Upgrade to the latest driver to use all of this project's GPU applications"


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "plan_class_spec.xml"
    path.write_text(SPEC)
    return path


def config(spec_file):
    return SchedulerConfig(plan_class_spec=str(spec_file), version_select_random_factor=0.0)


def specs():
    return read_plan_class_spec(SPEC)


def test_a_class_asking_for_ram_and_a_driver_leaves_the_lowest_ram_at_zero():
    # BOINC notes the RAM with driver 0, then the driver with RAM 0: each 0 is a figure
    found = GpuRequirements()
    found.note(specs()["cuda"])
    assert (found.min_ram, found.opt_ram, found.min_driver_version, found.opt_driver_version) == (
        0,
        1024 * MB,
        40000,
        40000,
    )
    found.note(specs()["cuda"])  # checked again: the same
    assert (found.min_ram, found.min_driver_version) == (0, 40000)


def test_the_order_of_the_checks_decides_which_minimum_stays():
    ram_first = GpuRequirements()
    ram_first.note(specs()["cuda_big"])
    ram_first.note(specs()["cuda_new"])
    driver_first = GpuRequirements()
    driver_first.note(specs()["cuda_new"])
    driver_first.note(specs()["cuda_big"])
    assert (ram_first.min_ram, ram_first.min_driver_version) == (0, 50000)
    assert (driver_first.min_ram, driver_first.min_driver_version) == (2048 * MB, 0)


@pytest.mark.parametrize(
    "ram_mb, driver, client, expected",
    [
        # the lowest RAM is 0 (cuda asks for a driver too): no RAM message, the driver's
        (512, 35000, 80002, [(f'NVIDIA GPU: _("{UPGRADE[12:]}")', "notice")]),
        (4096, 35000, 80002, [(f'NVIDIA GPU: _("{UPGRADE[12:]}")', "notice")]),
        (4096, 35000, 61100, [(UPGRADE, "notice")]),  # clients before 6.12: unmarked
        (4096, 45000, 80002, [(f'NVIDIA GPU: _("{UPGRADE_SOME[12:]}")', "low")]),
        (4096, 55000, 80002, []),
        (4096, 0, 80002, []),  # no driver version known
    ],
)
def test_property_messages_follow_boincs_conditions(ram_mb, driver, client, expected):
    found = GpuRequirements()
    found.note(specs()["cuda"])
    found.note(specs()["cuda_new"])
    assert found.messages("NVIDIA GPU", ram_mb * MB, driver, client) == expected


def test_too_little_video_ram_is_told_before_the_driver():
    found = GpuRequirements()
    found.note(specs()["cuda_big"])
    assert found.messages("NVIDIA GPU", 512 * MB, 10000, 80002) == [
        (
            "A minimum of 2048 MB (preferably 2048 MB) of video RAM is needed to process tasks "
            "using your computer's NVIDIA GPU",
            "low",
        )
    ]


def test_boinc_reads_the_gpu_type_off_the_plan_class_name():
    assert [plan_class_proc_type(n) for n in ("cuda_fermi", "opencl_nvidia", "ati14", "sse3", "opencl_intel_gpu")] == [
        "NVIDIA",
        "NVIDIA",
        "ATI",
        "cpu",
        "intel_gpu",
    ]


def nvidia(driver, ram_mb=4096, req_secs=0.0):
    return GpuRequest(
        "NVIDIA",
        count=1,
        peak_flops=1e12,
        gpu_ram=ram_mb * MB,
        driver_version=driver,
        compute_capability=500,
        cuda_version=9000,
        req_secs=req_secs,
    )


def add_versions(project):
    # beside the project's CPU version
    AppVersionFactory(app=project.app, version_num=100, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=1)


def messages(reply):
    return [(m.text, m.priority) for m in reply.messages]


def test_a_host_whose_driver_is_too_old_is_told_while_it_gets_cpu_work(project, spec_file):
    add_versions(project)
    project.result(project.workunit())
    host = project.host(p_ncpus=1, p_fpops=1e9)
    request = work_request(host, gpu_requests=[nvidia(35000)])
    reply = handle_request(request, project=demo_project(), now=NOW, config=config(spec_file))
    assert [job.resource for job in reply.results] == ["cpu"]
    assert (UPGRADE, "notice") in messages(reply)


def test_a_real_client_gets_the_message_marked_for_translation(project, spec_file):
    add_versions(project)
    from backend.models import AppVersion

    for version in AppVersion.objects.all():
        AppVersionFile.objects.create(
            project=demo_project(), app_version=version, name=f"exe{version.pk}", nbytes=1, md5_cksum="0" * 32
        )
    project.result(project.workunit())
    host = project.host(p_ncpus=1, p_fpops=1e9)
    request = work_request(host, core_client_version="8.0.2", gpu_requests=[nvidia(35000, req_secs=600)])
    reply = handle_request(request, project=demo_project(), now=NOW, config=config(spec_file))
    assert (f'NVIDIA GPU: _("{UPGRADE[12:]}")', "notice") in messages(reply)


def test_no_message_without_jobs_to_check_a_class_for_or_with_a_good_driver(project, spec_file):
    add_versions(project)
    host = project.host(p_ncpus=1, p_fpops=1e9)
    reply = handle_request(
        work_request(host, gpu_requests=[nvidia(35000)]), project=demo_project(), now=NOW, config=config(spec_file)
    )
    assert not any("driver" in text for text, _ in messages(reply))  # no job: no class checked
    project.result(project.workunit())
    reply = handle_request(
        work_request(host, gpu_requests=[nvidia(45000)]), project=demo_project(), now=NOW, config=config(spec_file)
    )
    assert not any("driver" in text for text, _ in messages(reply))
