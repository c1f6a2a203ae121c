"""Job limits (reference/server.md §3.4 "Limits", §3.5), each expectation read off BOINC's
sched/sched_limit.cpp (RSC_JOB_LIMIT, JOB_LIMIT, JOB_LIMITS: parse, reset, exceeded,
register_job), sched_config.cpp (max_wus_in_progress, max_wus_in_progress_gpu and
config_aux.xml), sched_send.cpp (send_work_setup counting other_results, work_needed,
get_job_limits), sched_score.cpp (the per-app check while sending), handle_request.cpp
(min_sendwork_interval), sched_types.cpp (the reply's least request_delay) and
sched_result.cpp (report_max)."""

import pytest

from backend.daemons.sched_limit import (
    InProgress,
    JobLimit,
    JobLimits,
    JobLimitsError,
    RscLimit,
    min_request_delay,
    project_job_limits,
    read_job_limits,
    too_soon,
    truncate_reports,
)
from backend.daemons.scheduler import ReportedResult, SchedulerConfig, handle_request
from backend.models import Host, Result, ServerState
from backend.server_config import project_config, read_config_xml
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, HostAppVersionFactory, demo_project

AUX = """<config>
  <max_jobs_in_progress>
    <project><total_limit><jobs>5</jobs></total_limit>
             <cpu_limit><jobs>2</jobs><per_proc/></cpu_limit></project>
    <app><app_name>uppercase</app_name><gpu_limit><jobs>1</jobs></gpu_limit></app>
    <app><gpu_limit><jobs>9</jobs></gpu_limit></app>
  </max_jobs_in_progress>
</config>"""


# --- reading the limits ---------------------------------------------------------------------


def test_the_job_limits_file_is_read_as_boinc_does():
    limits = read_job_limits(AUX)
    assert limits.project == JobLimit(total=RscLimit(5), cpu=RscLimit(2, True))
    # an <app> without a name is left out
    assert limits.apps == (("uppercase", JobLimit(gpu=RscLimit(1))),)


def test_a_file_without_limits_has_none_and_a_bad_one_is_refused():
    assert read_job_limits("<config><report_max>3</report_max></config>") == JobLimits()
    with pytest.raises(JobLimitsError, match="jobs"):
        read_job_limits(
            "<max_jobs_in_progress><project><total_limit><jobs>x</jobs></total_limit></project></max_jobs_in_progress>"
        )
    with pytest.raises(JobLimitsError, match="well-formed"):
        read_job_limits("<config>")


@pytest.mark.parametrize(
    "config, cpu, gpu",
    [
        (SchedulerConfig(), RscLimit(), RscLimit()),
        (SchedulerConfig(max_wus_in_progress=3), RscLimit(3, True), RscLimit()),
        (SchedulerConfig(max_wus_in_progress_gpu=2), RscLimit(), RscLimit(2, True)),
        # config_aux.xml, read after config.xml, replaces the CPU limit it names
        (
            SchedulerConfig(max_wus_in_progress=3, max_wus_in_progress_gpu=2, job_limits=read_job_limits(AUX)),
            RscLimit(2, True),
            RscLimit(2, True),
        ),
    ],
)
def test_max_wus_in_progress_are_project_limits_per_processor(config, cpu, gpu):
    project = project_job_limits(config).project
    assert (project.cpu, project.gpu) == (cpu, gpu)


def test_config_xml_sets_the_limits_and_config_aux_xml_beside_it_the_job_limits(tmp_path, settings):
    (tmp_path / "config.xml").write_text(
        "<boinc><config><max_wus_in_progress>2</max_wus_in_progress>"
        "<max_wus_in_progress_gpu>1</max_wus_in_progress_gpu>"
        "<min_sendwork_interval>600</min_sendwork_interval><report_max>10</report_max>"
        "</config></boinc>"
    )
    (tmp_path / "config_aux.xml").write_text(AUX)
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    config = project_config()
    assert (
        config.max_wus_in_progress,
        config.max_wus_in_progress_gpu,
        config.min_sendwork_interval,
        config.report_max,
    ) == (2, 1, 600, 10)
    assert config.job_limits == read_job_limits(AUX)
    reliable = read_config_xml(
        "<config><reliable_on_priority>2</reliable_on_priority><reliable_reduced_delay_bound>"
        "0.4</reliable_reduced_delay_bound><reliable_priority_on_over>3"
        "</reliable_priority_on_over></config>"
    )
    assert (
        reliable.reliable_on_priority,
        reliable.reliable_reduced_delay_bound,
        reliable.reliable_priority_on_over,
    ) == (2, 0.4, 3)
    # a <job_limits> tag in config.xml is not an option
    assert read_config_xml("<config><job_limits>3</job_limits></config>").job_limits is None


# --- counting -------------------------------------------------------------------------------


def test_a_per_proc_limit_scales_with_the_processors_and_a_total_does_not():
    limits = JobLimits(JobLimit(total=RscLimit(5, True), cpu=RscLimit(2, True)))
    counter = InProgress(limits, {"cpu": 2})
    for _ in range(3):
        counter.register(None, "cpu")
    assert not counter.project_exceeded("cpu")  # 3 < 2 x 2
    counter.register(None, "cpu")
    assert counter.project_exceeded("cpu")  # 4 >= 4
    counter = InProgress(limits, {"cpu": 8})
    for _ in range(5):
        counter.register(None, "cpu")
    assert counter.project_exceeded("cpu")  # the total is not scaled: 5 >= 5


def test_a_per_proc_limit_on_processors_the_host_lacks_is_no_limit():
    limits = JobLimits(JobLimit(gpu=RscLimit(1, True)))
    counter = InProgress(limits, {"cpu": 2})
    counter.register(None, "NVIDIA")
    assert not counter.project_exceeded("NVIDIA")
    assert InProgress(limits, {"cpu": 2, "NVIDIA": 1}).project_exceeded("NVIDIA") is False
    counter = InProgress(limits, {"cpu": 2, "NVIDIA": 1})
    counter.register(None, "NVIDIA")
    assert counter.project_exceeded("NVIDIA")


def test_an_apps_limit_counts_only_that_apps_jobs():
    limits = JobLimits(apps=(("uppercase", JobLimit(cpu=RscLimit(1))),))
    counter = InProgress(limits, {"cpu": 4})
    counter.register(None, "cpu")  # a job in progress: app not known
    assert not counter.app_exceeded("uppercase", "cpu")
    counter.register("other", "cpu")
    assert not counter.app_exceeded("uppercase", "cpu")
    counter.register("uppercase", "cpu")
    assert counter.app_exceeded("uppercase", "cpu")
    assert not counter.project_exceeded("cpu")


# --- the scheduler --------------------------------------------------------------------------

pytestmark = pytest.mark.django_db


def unsent_jobs(project, n):
    for _ in range(n):
        project.result(project.workunit())


def in_progress(project, host, n):
    names = []
    for _ in range(n):
        result = project.result(
            project.workunit(),
            server_state=ServerState.IN_PROGRESS,
            host=host,
            user_id=host.owner_id,
            sent_time=NOW - 100,
            report_deadline=NOW + 86400,
        )
        names.append(result.name)
    return names


@pytest.mark.parametrize(
    "ncpus, listed, limit, sent",
    [
        (1, 0, 0, 6),  # no limit: max_wus_to_send 6
        (1, 0, 2, 2),
        (2, 0, 2, 4),  # per CPU
        (1, 1, 2, 1),  # one listed in progress
        (1, 2, 2, 0),
    ],
)
def test_max_wus_in_progress_caps_the_jobs_a_host_holds(project, ncpus, listed, limit, sent):
    host = project.host(p_ncpus=ncpus)
    names = in_progress(project, host, listed)
    unsent_jobs(project, 8)
    request = work_request(host, cpu_req_secs=100 * 86400.0, other_results=names)
    request.host_info.p_ncpus = ncpus
    config = SchedulerConfig(max_wus_to_send=6 // ncpus, max_wus_in_progress=limit)
    reply = handle_request(request, project=demo_project(), now=NOW, config=config)
    assert len(reply.results) == sent


def test_a_host_at_its_limit_is_told_so(project):
    host = project.host()
    names = in_progress(project, host, 1)
    unsent_jobs(project, 1)
    reply = handle_request(
        work_request(host, other_results=names),
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(max_wus_in_progress=1),
    )
    assert reply.results == []
    assert "This computer has reached a limit on tasks in progress" in [m.text for m in reply.messages]


def test_jobs_in_progress_the_client_does_not_list_do_not_count(project):
    host = project.host()
    in_progress(project, host, 3)
    unsent_jobs(project, 2)
    reply = handle_request(
        work_request(host), project=demo_project(), now=NOW, config=SchedulerConfig(max_wus_in_progress=1)
    )
    assert len(reply.results) == 1


def test_an_apps_cpu_limit_from_the_job_limits_file(project):
    host = project.host(p_ncpus=4)
    unsent_jobs(project, 6)
    limits = read_job_limits(
        "<max_jobs_in_progress><app><app_name>uppercase</app_name>"
        "<cpu_limit><jobs>1</jobs><per_proc/></cpu_limit></app>"
        "</max_jobs_in_progress>"
    )
    request = work_request(host, cpu_req_secs=100 * 86400.0)
    request.host_info.p_ncpus = 4
    reply = handle_request(request, project=demo_project(), now=NOW, config=SchedulerConfig(job_limits=limits))
    assert len(reply.results) == 4  # one per CPU


# --- min_sendwork_interval -------------------------------------------------------------------


@pytest.mark.parametrize(
    "last, interval, wait",
    [
        # 500 whole seconds left; BOINC's clock is a fraction past now, so it says 499
        (NOW - 100, 600, 499),
        (NOW - 599, 600, 0),  # the last second: too soon still, "wait 0 seconds"
        (NOW - 600, 600, None),  # the interval is over
        (NOW - 100, 0, None),  # no interval
        (0, 600, None),
    ],
)
def test_too_soon(last, interval, wait):
    assert too_soon(last, NOW, SchedulerConfig(min_sendwork_interval=interval)) == wait


@pytest.mark.parametrize("interval, delay", [(0, 0.0), (50, 51.0), (100, 101.0), (3600, 3636.0)])
def test_every_reply_asks_the_client_to_wait_the_interval(interval, delay):
    assert min_request_delay(SchedulerConfig(min_sendwork_interval=interval)) == delay


def test_a_host_that_asks_again_too_soon_gets_no_work(project):
    host = project.host()
    Host.objects.filter(pk=host.pk).update(rpc_time=NOW - 100)
    unsent_jobs(project, 1)
    config = SchedulerConfig(min_sendwork_interval=600)
    reply = handle_request(work_request(host), project=demo_project(), now=NOW, config=config)
    assert reply.results == []
    assert reply.request_delay == pytest.approx(606.0)
    assert any("Please wait 499 seconds" in m.text for m in reply.messages)
    later = handle_request(work_request(host), project=demo_project(), now=NOW + 700, config=config)
    assert len(later.results) == 1


# --- report_max -------------------------------------------------------------------------------


def test_only_report_max_results_are_handled_and_acked(project):
    host = project.host()
    names = in_progress(project, host, 3)
    request = work_request(host, cpu_req_secs=0.0, results=[ReportedResult(name) for name in names])
    reply = handle_request(request, project=demo_project(), now=NOW, config=SchedulerConfig(report_max=2))
    assert sorted(reply.result_acks) == names[:2]
    states = dict(Result.objects.values_list("name", "server_state"))
    assert [states[n] for n in names] == [ServerState.OVER, ServerState.OVER, ServerState.IN_PROGRESS]


def test_only_max_results_accepted_makes_lost_results_wait_report_max_does_not():
    # BOINC's results_truncated comes from max_results_accepted, as the request is read
    # (sched_types.cpp); report_max shortens the list handled and stops nothing
    # (sched_result.cpp). Seed 9404's scheduler case 293 resent after a report_max cut.
    from backend.daemons.sched_types import SchedulerRequest

    request = SchedulerRequest(results=[ReportedResult("a"), ReportedResult("b"), ReportedResult("c")])
    cut, truncated = truncate_reports(request, SchedulerConfig(report_max=1))
    assert [r.name for r in cut.results] == ["a"] and truncated is False
    cut, truncated = truncate_reports(request, SchedulerConfig(max_results_accepted=2))
    assert [r.name for r in cut.results] == ["a", "b"] and truncated is True
    cut, truncated = truncate_reports(request, SchedulerConfig(max_results_accepted=2, report_max=1))
    assert [r.name for r in cut.results] == ["a"] and truncated is True
    assert truncate_reports(request, SchedulerConfig(max_results_accepted=3, report_max=3)) == (request, False)
    assert truncate_reports(request, SchedulerConfig()) == (request, False)


# --- reliable hosts (sched_send.cpp get_reliability_version, sched_check.cpp
# get_delay_bound_range, sched_score.cpp JOB::get_score, transitioner.cpp) ---------------------

from types import SimpleNamespace  # noqa: E402

from backend.daemons import sched_reliable, transitioner  # noqa: E402
from backend.models import Outcome  # noqa: E402


def hav(**fields):
    values = dict(turnaround_n=0, turnaround_avg=0.0, consecutive_valid=10, max_jobs_per_day=5)
    values.update(fields)
    return SimpleNamespace(**values)


@pytest.mark.parametrize(
    "record, config, multiplier, reliable",
    [
        (hav(), SchedulerConfig(daily_result_quota=5), 1.0, True),
        (None, SchedulerConfig(), 1.0, False),  # no record
        (hav(consecutive_valid=9), SchedulerConfig(daily_result_quota=5), 1.0, False),
        (hav(max_jobs_per_day=4), SchedulerConfig(daily_result_quota=5), 1.0, False),
        (hav(max_jobs_per_day=4), SchedulerConfig(daily_result_quota=0), 1.0, True),
        # the turnaround counts after more than 10 samples, times 1.8 off the common OSes
        (
            hav(turnaround_n=11, turnaround_avg=4000),
            SchedulerConfig(daily_result_quota=5, reliable_max_avg_turnaround=3600),
            1.0,
            False,
        ),
        (
            hav(turnaround_n=10, turnaround_avg=4000),
            SchedulerConfig(daily_result_quota=5, reliable_max_avg_turnaround=3600),
            1.0,
            True,
        ),
        (
            hav(turnaround_n=11, turnaround_avg=4000),
            SchedulerConfig(daily_result_quota=5, reliable_max_avg_turnaround=3600),
            1.8,
            True,
        ),
    ],
)
def test_a_host_app_version_is_reliable(record, config, multiplier, reliable):
    assert sched_reliable.is_reliable(record, config, multiplier) is reliable


@pytest.mark.parametrize(
    "os_name, vendor, multiplier",
    [
        ("Linux", "GenuineIntel", 1.0),
        ("Microsoft Windows 10", "AuthenticAMD", 1.0),
        ("Darwin", "GenuineIntel", 1.0),
        ("Darwin", "Power Macintosh", 1.8),
        ("FreeBSD", "GenuineIntel", 1.8),
    ],
)
def test_uncommon_platforms_get_a_longer_turnaround(os_name, vendor, multiplier):
    assert sched_reliable.turnaround_multiplier(os_name, vendor) == multiplier


@pytest.mark.parametrize(
    "priority, fraction, duration, bounds",
    [
        (0, 0.5, 100, (86400,)),  # not a job that needs a reliable host
        (1, 0.0, 100, (86400,)),  # no reduced bound
        (1, 0.5, 100, (43200, 86400)),
        (1, 0.5, 30000, (60000, 86400)),  # twice the duration, above the reduced bound
        (1, 0.5, 50000, (43200, 86400)),  # twice the duration is past the delay bound
    ],
)
def test_the_delay_bounds_a_job_that_needs_a_reliable_host_tries(priority, fraction, duration, bounds):
    config = SchedulerConfig(reliable_on_priority=1, reliable_reduced_delay_bound=fraction)
    wu = SimpleNamespace(delay_bound=86400)
    assert sched_reliable.delay_bounds(wu, priority, duration, config) == bounds


@pytest.mark.parametrize(
    "nover, nerrors, on_over, except_error, boost",
    [(0, 0, 2, 1, 0), (1, 1, 2, 1, 2), (1, 0, 0, 1, 1), (1, 1, 0, 1, 0), (2, 0, 3, 1, 3)],
)
def test_retries_gain_priority(nover, nerrors, on_over, except_error, boost):
    config = SchedulerConfig(reliable_priority_on_over=on_over, reliable_priority_on_over_except_error=except_error)
    assert sched_reliable.retry_priority_boost(nover, nerrors, config) == boost


def test_a_job_that_needs_a_reliable_host_goes_only_to_one_with_a_shortened_deadline(project):
    config = SchedulerConfig(reliable_on_priority=1, reliable_reduced_delay_bound=0.5, daily_result_quota=5)
    wu = project.workunit(priority=1, delay_bound=86400)
    project.result(wu, priority=1)
    unproven = project.host()
    assert handle_request(work_request(unproven), project=demo_project(), now=NOW, config=config).results == []
    proven = project.host()
    HostAppVersionFactory(
        host=proven, app_version=project.version, consecutive_valid=10, max_jobs_per_day=5, jobs_day=NOW // 86400
    )
    reply = handle_request(work_request(proven), project=demo_project(), now=NOW, config=config)
    assert [job.report_deadline for job in reply.results] == [NOW + 43200]
    assert Result.objects.get().report_deadline == NOW + 43200


def test_the_transitioner_raises_the_priority_of_retries(project):
    wu = project.workunit(priority=1, transition_time=NOW - 1, max_error_results=3, max_total_results=6)
    project.result(wu, server_state=ServerState.OVER, outcome=Outcome.NO_REPLY)
    transitioner.run_once(project=demo_project(), now=NOW, batch_size=10, reliable_priority_on_over=3)
    assert Result.objects.get(name=f"{wu.name}_1").priority == 4


# --- the version choice under an app's limit (sched_version.cpp get_app_version) ------------


def gpu_and_cpu_request(host, cpus=2):
    from backend.daemons.scheduler import GpuRequest

    request = work_request(
        host,
        cpu_req_secs=100 * 86400.0,
        gpu_requests=[GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=100 * 86400.0)],
    )
    request.host_info.p_ncpus = cpus
    return request


@pytest.fixture
def gpu_project(project):
    from backend.models import GpuType

    AppVersionFactory(
        app=project.app, version_num=100, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=1.0, flops=1e12
    )
    return project


@pytest.mark.parametrize(
    "app_limit, gpu_jobs, cpu_jobs",
    [
        # the GPU pass comes first; at the app's GPU limit its GPU version is skipped, and the
        # CPU pass takes its CPU version, up to the CPU limit or the 2 x 2 CPUs jobs per RPC
        ("<gpu_limit><jobs>1</jobs></gpu_limit>", 1, 3),
        ("<gpu_limit><jobs>2</jobs></gpu_limit><cpu_limit><jobs>1</jobs></cpu_limit>", 2, 1),
        # a total limit counts both: the CPU pass finds the app at it and has no version
        ("<total_limit><jobs>3</jobs></total_limit>", 3, 0),
        ("<total_limit><jobs>3</jobs></total_limit><gpu_limit><jobs>1</jobs></gpu_limit>", 1, 2),
    ],
)
def test_an_app_at_its_limit_on_one_processor_is_sent_with_its_version_for_another(
    gpu_project, app_limit, gpu_jobs, cpu_jobs
):
    host = gpu_project.host(p_ncpus=2)
    unsent_jobs(gpu_project, 8)
    limits = read_job_limits(
        f"<max_jobs_in_progress><app><app_name>uppercase</app_name>{app_limit}</app></max_jobs_in_progress>"
    )
    reply = handle_request(
        gpu_and_cpu_request(host),
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(job_limits=limits, max_wus_to_send=2),
    )
    resources = [job.resource for job in reply.results]
    assert (resources.count("NVIDIA"), resources.count("cpu")) == (gpu_jobs, cpu_jobs)
