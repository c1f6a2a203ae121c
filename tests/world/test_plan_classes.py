"""A world with a GPU plan class, a multi-threaded plan class and a plain CPU version: each host
is sent the version that is fastest on it, and the scheduler's runtime estimates for each host
converge on the runtimes it reports (backend.daemons.sched_version; sched_version.cpp
get_app_version, estimate_flops; credit.cpp's host app version et average)."""

import json

import pytest
from bs4 import BeautifulSoup

from backend.daemons.sched_types import SchedulerConfig
from backend.daemons.scheduler import (
    GpuRequest,
    HostInfo,
    ReportedFile,
    ReportedResult,
    SchedulerRequest,
    handle_request,
)
from backend.models import GpuType, HostAppVersion, Result
from tests.factories import NOW, AppVersionFactory, demo_project

SPEC = """<plan_classes>
<plan_class><name>mt</name><min_ncpus>2</min_ncpus><max_threads>4</max_threads></plan_class>
<plan_class><name>cuda</name><gpu_type>nvidia</gpu_type><cuda/>
  <min_nvidia_compcap>300</min_nvidia_compcap><min_gpu_ram_mb>1024</min_gpu_ram_mb>
  <gpu_peak_flops_scale>.2</gpu_peak_flops_scale><cpu_frac>.1</cpu_frac></plan_class>
</plan_classes>
"""
GPU = dict(count=1, peak_flops=2e11, gpu_ram=4 * 2**30, driver_version=45000, cuda_version=9000)
# name: (CPUs, p_fpops, GPU's compute capability or None, true FLOPS per version)
HOSTS = {
    "single": (1, 2e9, None, {"": 1.5e9}),
    "quad": (4, 2e9, None, {"": 1.5e9, "mt": 5e9}),
    "gpu": (1, 2e9, 500, {"": 1.5e9, "cuda": 6e10}),
    "old_gpu": (1, 2e9, 210, {"": 1.5e9}),
}
EXPECTED = {  # the versions each host is sent, by resource
    "single": {("cpu", "")},
    "quad": {("cpu", "mt")},
    "gpu": {("cpu", ""), ("NVIDIA", "cuda")},
    "old_gpu": {("cpu", "")},
}
ROUNDS = 16


def request(host, compcap, reports, now):
    gpus = (
        []
        if compcap is None
        else [GpuRequest(GpuType.NVIDIA, req_secs=1.0, req_instances=1.0, compute_capability=compcap, **GPU)]
    )
    return SchedulerRequest(
        hostid=host.pk,
        userid=host.owner_id,
        cpu_req_secs=1.0,
        cpu_req_instances=1.0,
        host_info=HostInfo(domain_name=host.domain_name, p_ncpus=host.p_ncpus, p_fpops=host.p_fpops),
        gpu_requests=gpus,
        results=reports,
    )


def run_world(project, tmp_path):
    """Rounds of RPCs: each host reports the jobs of the last round, with the elapsed times its
    true speed gives, and asks for one job per resource."""
    (tmp_path / "plan_class_spec.xml").write_text(SPEC)
    config = SchedulerConfig(plan_class_spec=str(tmp_path / "plan_class_spec.xml"), version_select_random_factor=0.0)
    AppVersionFactory(app=project.app, version_num=100, plan_class="mt")
    AppVersionFactory(app=project.app, version_num=100, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=1.0)
    for _ in range(ROUNDS * 6):
        project.result(project.workunit())
    hosts = {name: project.host(p_ncpus=n, p_fpops=fpops) for name, (n, fpops, _, _) in HOSTS.items()}
    sent = {name: [] for name in HOSTS}  # (resource, plan class, estimated, true runtime)
    pending = {name: [] for name in HOSTS}
    now = NOW
    for _ in range(ROUNDS):
        for name, host in hosts.items():
            _, _, compcap, speeds = HOSTS[name]
            reply = handle_request(
                request(host, compcap, pending[name], now), project=demo_project(), now=now, config=config
            )
            pending[name] = []
            for job in reply.results:
                plan_class = job.app_version.plan_class
                true = job.workunit.rsc_fpops_est / speeds[plan_class]
                sent[name].append((job.resource, plan_class, job.estimated_runtime, true))
                pending[name].append(
                    ReportedResult(
                        job.name,
                        final_elapsed_time=true,
                        final_cpu_time=true,
                        output_files=[ReportedFile(job.output_files[0].name, data=b"ok\n")],
                    )
                )
        now += 4 * 3600
    return hosts, sent


def test_each_host_gets_its_fastest_version_and_its_estimates_converge(project, tmp_path):
    hosts, sent = run_world(project, tmp_path)
    for name, jobs in sent.items():
        assert {(resource, plan_class) for resource, plan_class, _, _ in jobs} == EXPECTED[name]
        for version in EXPECTED[name]:
            mine = [(est, true) for resource, plan_class, est, true in jobs if (resource, plan_class) == version]
            assert len(mine) == ROUNDS
            first, last = mine[0], mine[-1]
            # the first estimate comes from the host's p_fpops (estimate_flops, no statistics)
            # and is off; once the host has more than 10 runtimes it is their average
            assert abs(first[0] / first[1] - 1) > 0.2
            assert last[0] == pytest.approx(last[1], rel=1e-6)
    # the record the host page's chart reads
    hav = HostAppVersion.objects.get(host=hosts["gpu"], app_version__plan_class="cuda")
    assert hav.et_n == ROUNDS - 1 and 1 / hav.et_avg == pytest.approx(6e10)
    assert Result.objects.filter(host=hosts["gpu"], app_version__plan_class="cuda").count() == ROUNDS


def test_host_page_charts_its_estimates_and_status_page_lists_plan_classes(project, tmp_path, client, settings):
    hosts, _ = run_world(project, tmp_path)
    page = client.get(f"/project/hosts/{hosts['gpu'].pk}/")
    assert page.status_code == 200
    embedded = BeautifulSoup(page.content, "html.parser").find("script", id="estimates-figure")
    figure = json.loads(embedded.string)
    names = sorted(trace["name"] for trace in figure["data"])
    assert names == sorted(
        f"{label}: {kind}"
        for label in ("uppercase 100 x86_64-pc-linux-gnu", "uppercase 100 x86_64-pc-linux-gnu (cuda)")
        for kind in ("estimated", "estimated now", "reported")
    )
    estimated = next(t for t in figure["data"] if t["name"].endswith("(cuda): estimated"))
    assert len(estimated["y"]) == ROUNDS - 1  # the last round's jobs are not reported yet
    assert ">60</span> GFLOPS" in page.content.decode()  # the cuda version's speed from its et
    (tmp_path / "config.xml").write_text("<boinc><config></config></boinc>")
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    status = client.get("/project/status/").content.decode()
    assert "App versions and plan classes" in status
    assert "min_nvidia_compcap 300" in status and "max_threads 4" in status
