"""App versions and plan classes (backend.daemons.plan_class, backend.daemons.sched_version;
sched/plan_class_spec.cpp, sched/sched_version.cpp get_app_version)."""

import pytest

from backend.daemons import host_app_version
from backend.daemons.plan_class import (
    PlanClassError,
    PlanClassSpec,
    coproc_perf,
    read_plan_class_spec,
)
from backend.daemons.sched_types import SchedulerConfig
from backend.daemons.sched_version import core_client_version
from backend.daemons.scheduler import GpuRequest, handle_request
from backend.models import AppVersion, GpuType, HostAppVersion, Result, ServerState
from backend.server_config import read_config_xml
from protocol.models import AppVersionFile
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, HostAppVersionFactory, demo_project

SPEC = """<plan_classes>
  <plan_class>
    <name> mt </name>
    <min_ncpus> 2 </min_ncpus>
    <max_threads> 4 </max_threads>
    <projected_flops_scale> .99 </projected_flops_scale>
  </plan_class>
  <plan_class>
    <name>avx</name>
    <cpu_feature>AVX</cpu_feature>
    <projected_flops_scale>1.5</projected_flops_scale>
  </plan_class>
  <plan_class>
    <name>cuda</name>
    <gpu_type>nvidia</gpu_type>
    <cuda/>
    <min_nvidia_compcap>300</min_nvidia_compcap>
    <min_cuda_version>8000</min_cuda_version>
    <min_driver_version>40000</min_driver_version>
    <min_gpu_ram_mb>1024</min_gpu_ram_mb>
    <gpu_peak_flops_scale>.5</gpu_peak_flops_scale>
    <cpu_frac>.05</cpu_frac>
    <ngpus>.5</ngpus>
  </plan_class>
  <plan_class>
    <name>fast</name>
    <projected_flops_scale>3</projected_flops_scale>
  </plan_class>
  <plan_class>
    <name>newer</name>
    <min_core_client_version>80000</min_core_client_version>
    <projected_flops_scale>2</projected_flops_scale>
  </plan_class>
</plan_classes>
"""
NVIDIA_OK = dict(
    count=1, peak_flops=1e12, gpu_ram=4 * 2**30, driver_version=45000, compute_capability=500, cuda_version=9000
)


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "plan_class_spec.xml"
    path.write_text(SPEC)
    return path


def config(spec_file, **options):
    return SchedulerConfig(plan_class_spec=str(spec_file), version_select_random_factor=0.0, **options)


def test_plan_class_spec_reads_boinc_names_and_defaults():
    specs = read_plan_class_spec(SPEC)
    assert specs["mt"].max_threads == 4 and specs["mt"].min_ncpus == 2
    assert specs["mt"].projected_flops_scale == pytest.approx(0.99)
    assert specs["avx"].cpu_features == ["avx"]
    cuda = specs["cuda"]
    assert (cuda.proc_type, cuda.cuda, cuda.min_nvidia_compcap, cuda.ngpus, cuda.cpu_frac) == (
        "NVIDIA",
        True,
        300,
        0.5,
        0.05,
    )
    # PLAN_CLASS_SPEC's defaults
    default = PlanClassSpec("x")
    assert (
        default.max_threads,
        default.cpu_frac,
        default.ngpus,
        default.gpu_peak_flops_scale,
        default.projected_flops_scale,
    ) == (1, 0.1, 1.0, 1.0, 1.0)
    assert specs["cuda"].describe()["min_gpu_ram_mb"] == 1024


@pytest.mark.parametrize(
    "text, words",
    [
        ("<plan_classes><plan_class><max_threads>4</max_threads></plan_class></plan_classes>", "no <name>"),
        (
            "<plan_classes><plan_class><name>a</name><max_threads>x</max_threads></plan_class></plan_classes>",
            "<max_threads> must be a number",
        ),
        ("<plan_class>", "not well-formed"),
        ("<classes/>", "expected <plan_classes>"),
    ],
)
def test_plan_class_spec_errors_name_the_problem(text, words):
    with pytest.raises(PlanClassError, match=words):
        read_plan_class_spec(text)


def test_config_xml_beside_plan_class_spec_xml_reads_it(spec_file):
    (spec_file.parent / "config.xml").write_text(
        "<boinc><config><version_select_random_factor>0.5</version_select_random_factor>"
        "<prefer_primary_platform/></config></boinc>"
    )
    got = read_config_xml(spec_file.parent / "config.xml")
    assert got.plan_class_spec == str(spec_file)
    assert got.version_select_random_factor == 0.5 and got.prefer_primary_platform


def test_coproc_perf_is_the_speed_of_alternating_devices():
    speed, cpu_use = coproc_perf(1e9, 1e11, 0.1)
    # 10 % of the work at 1 GFLOPS, 90 % at 100 GFLOPS
    assert speed == pytest.approx(1 / (0.1 / 1e9 + 0.9 / 1e11))
    assert 0 < cpu_use < 1


def sent_versions(reply):
    return [(job.resource, job.app_version.plan_class) for job in reply.results]


def add_versions(project, *plan_classes, gpu=()):
    for plan_class in plan_classes:
        AppVersionFactory(app=project.app, version_num=100, plan_class=plan_class)
    for plan_class in gpu:
        AppVersionFactory(
            app=project.app, version_num=100, plan_class=plan_class, gpu_type=GpuType.NVIDIA, gpu_usage=0.5
        )


def test_rule_3_4_mt_version_is_faster_on_a_multicore_host(project, spec_file):
    add_versions(project, "mt")
    project.result(project.workunit())
    project.result(project.workunit())
    quad = project.host(p_ncpus=4, p_fpops=1e9)
    reply = handle_request(
        work_request(quad, cpu_req_secs=1), project=demo_project(), now=NOW, config=config(spec_file)
    )
    assert sent_versions(reply)[0] == ("cpu", "mt")
    assert reply.results[0].app_version.avg_ncpus == 4
    # a job's runtime from estimate_flops without statistics: p_fpops × CPUs
    assert reply.results[0].estimated_runtime == pytest.approx(3600e9 / 4e9)
    single = project.host(p_ncpus=1, p_fpops=1e9)  # below min_ncpus: the plain version
    reply = handle_request(work_request(single), project=demo_project(), now=NOW, config=config(spec_file))
    assert sent_versions(reply) == [("cpu", "")]


@pytest.mark.parametrize("features, expected", [("fpu sse2 avx", "avx"), ("fpu sse2", "")])
def test_rule_3_4_cpu_features_decide(project, spec_file, features, expected):
    add_versions(project, "avx")
    project.result(project.workunit())
    host = project.host(p_ncpus=1, p_fpops=1e9)
    request = work_request(host)
    request.host_info.p_features = features
    reply = handle_request(request, project=demo_project(), now=NOW, config=config(spec_file))
    assert sent_versions(reply) == [("cpu", expected)]


@pytest.mark.parametrize(
    "gpu, expected",
    [
        (NVIDIA_OK, [("NVIDIA", "cuda")]),
        (dict(NVIDIA_OK, compute_capability=210), []),
        (dict(NVIDIA_OK, gpu_ram=512 * 2**20), []),
        (dict(NVIDIA_OK, driver_version=30000), []),
        (dict(NVIDIA_OK, cuda_version=7000), []),
    ],
)
def test_rule_3_4_gpu_plan_class_bounds(project, spec_file, gpu, expected):
    add_versions(project, gpu=["cuda"])
    project.result(project.workunit())
    host = project.host(p_ncpus=1, p_fpops=1e9)
    request = work_request(
        host, cpu_req_secs=0, cpu_req_instances=0, gpu_requests=[GpuRequest("NVIDIA", req_secs=600, **gpu)]
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=config(spec_file))
    assert sent_versions(reply) == expected
    if expected:
        version = reply.results[0].app_version
        assert version.gpu_usage == 0.5 and 0 < version.avg_ncpus < 1


def test_rule_3_4_client_version_bounds_and_beta(project, spec_file):
    AppVersionFactory(app=project.app, version_num=101, plan_class="newer")
    AppVersionFactory(app=project.app, version_num=102, beta=True, plan_class="fast")
    AppVersion.objects.filter(version_num=100).update(min_core_version=70000, max_core_version=79999)
    for version in AppVersion.objects.all():  # a real client is sent only executables
        AppVersionFile.objects.create(
            project=demo_project(),
            app_version=version,
            name=f"exe{version.pk}",
            nbytes=1,
            md5_cksum="0" * 32,
            file_signature="x",
        )
    for _ in range(3):
        project.result(project.workunit())
    host = project.host(p_ncpus=1, p_fpops=1e9)

    def versions(client, beta=False):
        request = work_request(host, core_client_version=client, allow_beta_work=beta)
        request.host_info.p_features = "avx"
        reply = handle_request(request, project=demo_project(), now=NOW, config=config(spec_file, max_wus_to_send=1))
        Result.objects.update(server_state=ServerState.UNSENT, host=None)
        return [job.app_version.version_num for job in reply.results]

    assert core_client_version("8.2.4") == 80204
    assert versions("7.16.3") == [100]  # "newer" wants 8.0+: the old version
    assert versions("8.2.4") == [101]  # the old version's max_core_version excludes it
    assert versions("8.2.4", beta=True) == [102]  # the fastest, for who allows beta work


def test_rule_3_4_pinned_workunit_takes_its_version_number(project, spec_file):
    AppVersionFactory(app=project.app, version_num=101, plan_class="fast")
    project.result(project.workunit(app_version_num=100))
    project.result(project.workunit())
    host = project.host(p_ncpus=1, p_fpops=1e9)
    reply = handle_request(work_request(host), project=demo_project(), now=NOW, config=config(spec_file))
    got = {job.wu_name: job.app_version.version_num for job in reply.results}
    assert got == {"wu0": 100, "wu1": 101}


def test_rule_3_4_64_bit_jobs_take_64_bit_versions(project, spec_file):
    AppVersionFactory(app=project.app, version_num=100, plan_class="fast", platform="i686-pc-linux-gnu")
    project.result(project.workunit(rsc_memory_bound=4 * 2**30))  # above 3 GB (Linux)
    project.result(project.workunit(rsc_memory_bound=1e8))
    host = project.host(p_ncpus=1, p_fpops=1e9, m_nbytes=16e9)
    request = work_request(host, alt_platforms=["i686-pc-linux-gnu"])
    reply = handle_request(request, project=demo_project(), now=NOW, config=config(spec_file))
    got = {job.wu_name: job.app_version.platform for job in reply.results}
    assert got == {"wu0": "x86_64-pc-linux-gnu", "wu1": "i686-pc-linux-gnu"}


def test_et_average_learns_runtimes_and_moves_the_estimate(project, spec_file):
    host = project.host(p_ncpus=1, p_fpops=1e9)
    hav = HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=100)
    # the host really runs at 0.25 GFLOPS: 3600 GFLOP take 14400 s
    for _ in range(11):
        host_app_version.got_good_result(hav, quota=500, turnaround=100, job=(14400.0, 1e9, 3600e9))
    assert hav.et_n == 11 and hav.et_avg == pytest.approx(14400 / 3600e9)
    assert hav.pfc_n == 0  # the PFC average is the validator's (CreditNew)
    hav.save()
    project.result(project.workunit())
    reply = handle_request(work_request(host), project=demo_project(), now=NOW, config=config(spec_file))
    # estimate_flops: more than 10 samples, 1 / et_avg
    assert reply.results[0].estimated_runtime == pytest.approx(14400)


@pytest.mark.parametrize(
    "pfc_n, host_et_n, rte_no_stats, runtime",
    [
        # estimate_flops's second mode: more than 100 version samples, peak FLOPS / pfc_avg =
        # 1e9 / 4: a quarter of the peak, so 3600 GFLOP take 14400 s
        (101, 0, False, 14400.0),
        (100, 0, False, 3600.0),  # 100 samples are not enough: p_fpops × 1 CPU
        (101, 11, False, 1800.0),  # the host's own 11 samples come first: 1 / et_avg
        (101, 10, False, 14400.0),  # 10 host samples are not enough: the version's
        (101, 11, True, 3600.0),  # rte_no_stats: neither
    ],
)
def test_a_new_host_starts_from_the_version_pfc_average(project, spec_file, pfc_n, host_et_n, rte_no_stats, runtime):
    AppVersion.objects.filter(pk=project.version.pk).update(pfc_n=pfc_n, pfc_avg=4.0)
    host = project.host(p_ncpus=1, p_fpops=1e9)
    if host_et_n:
        HostAppVersionFactory(
            host=host,
            app_version=project.version,
            max_jobs_per_day=100,
            et_n=host_et_n,
            et_avg=1800 / 3600e9,
            pfc_n=host_et_n,
            pfc_avg=0.5,
        )
    project.result(project.workunit())
    reply = handle_request(
        work_request(host), project=demo_project(), now=NOW, config=config(spec_file, rte_no_stats=rte_no_stats)
    )
    assert reply.results[0].estimated_runtime == pytest.approx(runtime)


def test_the_version_pfc_average_scales_a_gpu_version_peak(project, spec_file):
    # cuda: the GPU's share 1e12 × .5 GPUs × gpu_peak_flops_scale .5 = 2.5e11 FLOPS, plus
    # the CPUs coproc_perf gives it (cpu_frac × GPU / (cpu_frac × GPU + .95 × CPU)) × 1e9;
    # the version's hosts reach a tenth of their peak: pfc_avg 10
    gpu = 2.5e11
    cpus = 0.05 * gpu / (0.05 * gpu + 0.95 * 1e9)
    peak = gpu + cpus * 1e9
    add_versions(project, gpu=["cuda"])
    cuda = AppVersion.objects.get(plan_class="cuda")
    AppVersion.objects.filter(pk=cuda.pk).update(pfc_n=500, pfc_avg=10.0)
    project.result(project.workunit())
    host = project.host(p_ncpus=1, p_fpops=1e9)
    reply = handle_request(
        work_request(
            host, cpu_req_secs=0, gpu_requests=[GpuRequest(GpuType.NVIDIA, req_secs=1, req_instances=1, **NVIDIA_OK)]
        ),
        project=demo_project(),
        now=NOW,
        config=config(spec_file),
    )
    assert sent_versions(reply) == [("NVIDIA", "cuda")]
    assert reply.results[0].estimated_runtime == pytest.approx(3600e9 / (peak / 10))


def test_a_reported_runtime_enters_the_et_average_whatever_its_claimed_pfc():
    hav = HostAppVersion(et_avg=0, et_n=0, pfc_avg=0, pfc_n=0)
    host_app_version.learn(hav, 1e6, 1e12, 1e9)  # a claimed PFC 1e9 times the estimate
    assert (hav.pfc_n, hav.et_n) == (0, 1)
    assert hav.et_avg == pytest.approx(1e6 / 1e9)


def test_random_factor_spreads_the_choice_until_the_host_has_samples(project, spec_file):
    from backend.daemons import sched_version

    AppVersionFactory(app=project.app, version_num=101, plan_class="avx")
    host = project.host(p_ncpus=1, p_fpops=1e9)
    request = work_request(host, cpu_req_secs=1)
    request.host_info.p_features = "avx"
    factor = SchedulerConfig(plan_class_spec=str(spec_file))  # BOINC's default factor, 1
    sched_version.RNG.seed(5)
    picked = []
    for i in range(40):
        project.result(project.workunit())
        reply = handle_request(request, project=demo_project(), now=NOW + i, config=factor)
        picked.append(reply.results[0].app_version.plan_class)
        Result.objects.update(server_state=ServerState.OVER)
    # avx projects 1.5 × the plain version: mostly chosen, not always (r = 1 + N(0, 1) / n)
    assert 20 < picked.count("avx") < 40 and picked.count("") > 0
    # with 50 samples of each version on this host (runtimes that bear the projection out) the
    # choice follows the measured speeds and the factor's spread is 1/50
    for hav in HostAppVersion.objects.filter(host=host).select_related("app_version"):
        speed = 1.5e9 if hav.app_version.plan_class == "avx" else 1e9
        hav.pfc_n, hav.pfc_avg, hav.et_n, hav.et_avg = 50, 1.0, 50, 1 / speed
        hav.save()
    picked = []
    for i in range(20):
        project.result(project.workunit())
        reply = handle_request(request, project=demo_project(), now=NOW + 100 + i, config=factor)
        picked.append(reply.results[0].app_version.plan_class)
        Result.objects.update(server_state=ServerState.OVER)
    assert picked == ["avx"] * 20


def test_a_workunit_committed_to_a_gpu_plan_class_version_goes_to_the_gpu(project, spec_file):
    # homogeneous app version (check_homogeneous_app_version): the committed version's plan
    # class says which processor it uses, though its row names no GPU type
    project.app.homogeneous_app_version = True
    project.app.save()
    committed = AppVersionFactory(app=project.app, version_num=100, plan_class="cuda")
    AppVersionFactory(app=project.app, version_num=101, plan_class="cuda")
    project.result(project.workunit(app_version=committed))
    host = project.host(p_ncpus=1, p_fpops=1e9)
    request = work_request(
        host, cpu_req_secs=0, cpu_req_instances=0, gpu_requests=[GpuRequest("NVIDIA", req_secs=600, **NVIDIA_OK)]
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=config(spec_file))
    assert [(job.resource, job.app_version.version_num) for job in reply.results] == [("NVIDIA", 100)]
    assert reply.results[0].app_version.gpu_usage == 0.5


def test_the_host_page_series_ends_with_the_learnt_estimate(project):
    from backend.daemons.sched_version import runtime_estimates
    from backend.models import Outcome

    host = project.host(p_ncpus=1, p_fpops=1e9, rpc_time=NOW + 7200)
    wu = project.workunit()
    # sent with 1 GFLOPS: estimated 3600 s; reported 7200 s
    project.result(
        wu,
        server_state=ServerState.OVER,
        outcome=Outcome.SUCCESS,
        host=host,
        app_version=project.version,
        sent_time=NOW,
        flops_estimate=1e9,
        elapsed_time=7200.0,
    )
    hav = HostAppVersionFactory(host=host, app_version=project.version, et_n=10, et_avg=7200 / 3600e9)
    [(label, points, now)] = runtime_estimates(host, havs=[hav])
    assert label == str(project.version) and points == [(NOW, 3600.0, 7200.0)]
    assert now is None  # 10 runtimes are not enough for estimate_flops
    hav.et_n = 11
    [(_, _, now)] = runtime_estimates(host, havs=[hav])
    # the next job of the last one's size, 3600 GFLOP, at the et average
    assert now == (NOW + 7200, pytest.approx(7200.0))
