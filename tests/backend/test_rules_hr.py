"""Homogeneous redundancy and homogeneous app version (reference/server.md §3.11), each
expectation read off BOINC's sched/hr.cpp (hr_class, hr_unknown_class), sched_hr.h
(app_hr_type), sched_check.cpp (wu_is_infeasible_fast), sched_send.cpp (update_wu_on_send,
send_work's hr_unknown_platform), sched_version.cpp (check_homogeneous_app_version),
sched_score.cpp with the feeder's infeasible_count, and transitioner.cpp (the un-commit)."""

import dataclasses

import pytest

from backend.daemons import sched_hr, transitioner
from backend.daemons.sched_types import HostInfo
from backend.daemons.scheduler import SchedulerConfig, handle_request
from backend.models import LifecycleEvent, Outcome, ServerState, Workunit
from backend.server_config import ConfigError, read_config_xml
from tests.backend.conftest import work_request
from tests.factories import (
    NOW,
    AppVersionFactory,
    HostAppVersionFactory,
    ResultFactory,
    WorkunitFactory,
    demo_project,
)

pytestmark = pytest.mark.django_db

XEON = ("GenuineIntel", "Intel(R) Xeon(R) CPU E5-2670")
CORE = ("GenuineIntel", "Intel(R) Core(TM) i7-8700")
RYZEN = ("AuthenticAMD", "AMD Ryzen 7 5800X")


# --- hr.cpp: the classes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "os_name, cpu, hr_type, expected",
    [
        ("Linux", XEON, 1, 256 + 11),
        ("Linux", CORE, 1, 256 + 21),
        ("Microsoft Windows 10", CORE, 1, 384 + 21),
        ("Darwin", ("GenuineIntel", "Intel(R) Core(TM) i5"), 1, 512 + 21),
        ("Linux", RYZEN, 1, 256 + 3),  # an AMD of no named family
        ("Linux", ("AuthenticAMD", "AMD Athlon(tm) 64 X2"), 1, 256 + 9),
        ("Linux", ("AuthenticAMD", "AMD Athlon(tm) XP"), 1, 256 + 10),
        ("Linux", ("AuthenticAMD", "AMD Opteron Athlon"), 1, 256 + 8),  # Opteron before Athlon
        ("Linux", ("GenuineIntel", "Intel Pentium III"), 1, 256 + 15),  # III before II
        ("Linux", ("GenuineIntel", "Intel Celeron M 410"), 1, 256 + 18),
        ("Linux", ("GenuineIntel", "x86 Family 6 Model 10"), 1, 256 + 11),
        ("Linux", ("GenuineIntel", "x86 Family 6 Model 1"), 1, 256 + 13),
        ("FreeBSD", ("ARM", "Cortex-A72"), 1, 640 + 22),
        ("Linux", XEON, 2, 256 + 2),
        ("Linux", RYZEN, 2, 256 + 2),  # coarse: AMD counts as Intel
        ("Android", ("", "ARMv8 Processor"), 2, 768 + 22),  # ARM by the model
        ("Haiku", XEON, 2, 128 + 2),
        ("Linux", XEON, 0, 0),
    ],
)
def test_a_host_is_classed_by_its_os_and_cpu(os_name, cpu, hr_type, expected):
    assert sched_hr.hr_class(os_name, *cpu, hr_type) == expected


@pytest.mark.parametrize(
    "os_name, cpu, hr_type, unknown",
    [
        ("Linux", XEON, 1, False),
        ("Haiku", XEON, 1, True),  # unknown OS
        ("Linux", ("Zhaoxin", "KX-6000"), 1, True),  # unknown CPU
        ("FreeBSD", ("ARM", "Cortex"), 1, False),
        ("Linux", ("Zhaoxin", "KX-6000"), 2, False),  # coarse: Linux is enough
        ("Microsoft Windows 11", ("", ""), 2, False),
        ("Darwin", XEON, 2, False),
        ("Darwin", ("Power Macintosh", "PowerPC G5"), 2, False),
        ("Darwin", ("ARM", "Apple M1"), 2, True),  # Darwin only on Intel or PPC
        ("FreeBSD", XEON, 2, True),
        ("Haiku", XEON, 0, False),  # no HR: every host is known
    ],
)
def test_a_host_of_unknown_class(os_name, cpu, hr_type, unknown):
    assert sched_hr.hr_unknown_class(os_name, *cpu, hr_type) is unknown


@pytest.mark.parametrize("app_hr, project_hr, used", [(0, 0, 0), (0, 2, 2), (1, 0, 1), (1, 2, 1)])
def test_the_apps_hr_type_overrides_the_projects(project, app_hr, project_hr, used):
    project.app.homogeneous_redundancy = app_hr
    config = SchedulerConfig(homogeneous_redundancy=project_hr)
    assert sched_hr.app_hr_type(project.app, config) == used


def test_config_xml_sets_homogeneous_redundancy_and_hr_class_static():
    config = read_config_xml(
        "<boinc><config><homogeneous_redundancy>2</homogeneous_redundancy><hr_class_static/></config></boinc>"
    )
    assert (config.homogeneous_redundancy, config.hr_class_static) == (2, True)
    assert (SchedulerConfig().homogeneous_redundancy, SchedulerConfig().hr_class_static) == (0, False)
    with pytest.raises(ConfigError, match="homogeneous_redundancy"):
        read_config_xml("<config><homogeneous_redundancy>3</homogeneous_redundancy></config>")


# --- the scheduler: sending ------------------------------------------------------------------


def hr_request(host, os_name="Linux", cpu=XEON, **fields):
    request = work_request(host, **fields)
    request.host_info = dataclasses.replace(request.host_info, os_name=os_name, p_vendor=cpu[0], p_model=cpu[1])
    return request


def sent_names(reply):
    return sorted(job.name for job in reply.results)


@pytest.fixture
def hr_project(project):
    project.app.homogeneous_redundancy = 1
    project.app.save()
    return project


def test_the_first_send_commits_the_workunit_to_the_hosts_class(hr_project):
    wu = hr_project.workunit()
    hr_project.result(wu)
    reply = handle_request(hr_request(hr_project.host()), project=demo_project(), now=NOW)
    assert sent_names(reply) == [f"{wu.name}_0"]
    wu.refresh_from_db()
    assert wu.hr_class == 256 + 11
    event = LifecycleEvent.objects.get(workunit=wu, field="hr_class")
    assert (event.old, event.new) == (None, 256 + 11)


@pytest.mark.parametrize(
    "os_name, cpu, sent",
    [
        ("Linux", XEON, True),  # the same class
        ("Linux", ("GenuineIntel", "Intel Xeon Gold"), True),
        ("Linux", CORE, False),  # another CPU family
        ("Microsoft Windows 10", XEON, False),  # another OS
    ],
)
def test_later_replicas_go_only_to_hosts_of_the_committed_class(hr_project, os_name, cpu, sent):
    wu = hr_project.workunit(hr_class=256 + 11)
    hr_project.result(wu)
    reply = handle_request(hr_request(hr_project.host(), os_name, cpu), project=demo_project(), now=NOW)
    assert bool(reply.results) is sent
    wu.refresh_from_db()
    assert wu.hr_class == 256 + 11


def test_a_host_of_unknown_class_gets_no_hr_work_and_no_message(hr_project):
    hr_project.result(hr_project.workunit())
    reply = handle_request(hr_request(hr_project.host(), "Haiku"), project=demo_project(), now=NOW)
    # every app uses HR: send_work returns before it explains (hr_reject_perm is never sent)
    assert reply.results == [] and reply.messages == []
    assert Workunit.objects.get().hr_class == 0


def test_an_unknown_host_still_gets_work_of_apps_without_hr(hr_project):
    other = AppVersionFactory(app__name="plain", version_num=1).app
    hr_project.result(hr_project.workunit())
    wu = WorkunitFactory(app=other, name="plain_wu", transition_time=NOW + 10**6)
    ResultFactory(workunit=wu, server_state=ServerState.UNSENT)
    reply = handle_request(hr_request(hr_project.host(), "Haiku"), project=demo_project(), now=NOW)
    assert sent_names(reply) == ["plain_wu_0"]


def test_the_projects_hr_applies_to_apps_without_their_own(project):
    wu = project.workunit(hr_class=384 + 2)
    project.result(wu)
    config = SchedulerConfig(homogeneous_redundancy=2)
    assert handle_request(hr_request(project.host()), project=demo_project(), now=NOW, config=config).results == []
    reply = handle_request(
        hr_request(project.host(), "Microsoft Windows 10", RYZEN), project=demo_project(), now=NOW, config=config
    )
    assert sent_names(reply) == [f"{wu.name}_0"]


def test_a_committed_workunit_goes_before_uncommitted_ones_of_equal_priority(hr_project):
    first = hr_project.workunit()
    hr_project.result(first)
    committed = hr_project.workunit(hr_class=256 + 11)
    hr_project.result(committed)
    more = hr_project.workunit(priority=2)
    hr_project.result(more, priority=2)
    reply = handle_request(
        hr_request(hr_project.host(), cpu_req_secs=10 * 86400.0),
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(max_wus_to_send=2),
    )
    # priority 2 first, then the committed one (score 0 + 1) before the first workunit
    assert sent_names(reply) == sorted([f"{more.name}_0", f"{committed.name}_0"])


def test_a_commit_that_another_scheduler_made_meanwhile_stops_the_send(hr_project):
    wu = hr_project.workunit()
    result = hr_project.result(wu)
    host = hr_project.host()
    result.workunit.hr_class = 0
    # another scheduler commits the workunit to Windows between the choice and the commit
    Workunit.objects.filter(pk=wu.pk).update(hr_class=384 + 11)
    chosen = [(result, None, 1.0)]
    kept = sched_hr.commit(
        chosen,
        sched_hr.HostClass(host, hr_request(host)),
        SchedulerConfig(),
        {hr_project.app.pk: hr_project.app},
        now=NOW,
    )
    assert kept == []
    assert Workunit.objects.get().hr_class == 384 + 11


# --- homogeneous app version ------------------------------------------------------------------


@pytest.fixture
def hav_project(project):
    project.app.homogeneous_app_version = True
    project.app.save()
    project.old = AppVersionFactory(app=project.app, version_num=90, flops=1e9)
    project.windows = AppVersionFactory(app=project.app, version_num=100, platform="windows_x86_64", flops=1e9)
    return project


def test_the_first_send_commits_the_app_version(hav_project):
    wu = hav_project.workunit()
    hav_project.result(wu)
    handle_request(hr_request(hav_project.host()), project=demo_project(), now=NOW)
    wu.refresh_from_db()
    assert wu.app_version == hav_project.version


def test_a_replica_is_sent_with_the_committed_version_not_the_newest(hav_project):
    wu = hav_project.workunit(app_version=hav_project.old)
    result = hav_project.result(wu)
    reply = handle_request(hr_request(hav_project.host()), project=demo_project(), now=NOW)
    assert [job.app_version.version_num for job in reply.results] == [90]
    result.refresh_from_db()
    assert result.app_version == hav_project.old


@pytest.mark.parametrize("over_quota", ["newest", "committed"])
def test_a_committed_workunit_goes_with_its_version_whatever_the_newest_versions_daily_quota(hav_project, over_quota):
    # get_app_version takes a committed workunit's version (check_homogeneous_app_version)
    # before it looks at the app's best version and its daily quota; send_work_score_type
    # then checks the committed version's own quota, which names the limit and ends the
    # pass (the differential's seed 9505 scheduler case 294)
    host = hav_project.host()
    over = hav_project.version if over_quota == "newest" else hav_project.old
    HostAppVersionFactory(host=host, app_version=over, max_jobs_per_day=1, n_jobs_today=50, jobs_day=NOW // 86400)
    wu = hav_project.workunit(app_version=hav_project.old)
    hav_project.result(wu)
    reply = handle_request(
        hr_request(host), project=demo_project(), now=NOW, config=SchedulerConfig(daily_result_quota=5)
    )
    if over_quota == "newest":
        assert [job.app_version.version_num for job in reply.results] == [90]
    else:
        assert reply.results == []
        texts = [(m.priority, m.text) for m in reply.messages]
        limit = [t for p, t in texts if t.startswith("Daily job limit")]
        assert len(limit) == 1 and ("low", "This computer has finished a daily quota of 1 tasks") in texts


def test_a_committed_version_wins_over_the_version_number_the_workunit_is_pinned_to(hav_project):
    # get_app_version checks the committed version before the pinned number: no version is
    # numbered 555, yet the replica goes with the version its workunit is committed to
    wu = hav_project.workunit(app_version=hav_project.old, app_version_num=555)
    hav_project.result(wu)
    reply = handle_request(hr_request(hav_project.host()), project=demo_project(), now=NOW)
    assert [job.app_version.version_num for job in reply.results] == [90]


def test_a_committed_job_too_big_for_the_host_is_named_whatever_its_pinned_number(hav_project):
    wu = hav_project.workunit(app_version=hav_project.version, app_version_num=555, rsc_memory_bound=2e9)
    hav_project.result(wu)
    request = hr_request(hav_project.host())
    request.host_info = dataclasses.replace(request.host_info, m_nbytes=1e9)
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert reply.results == []
    assert any("needs 1907.35 MB RAM" in m.text for m in reply.messages)


def test_a_version_for_another_platform_keeps_the_replica_from_the_host(hav_project):
    wu = hav_project.workunit(app_version=hav_project.windows)
    hav_project.result(wu)
    assert handle_request(hr_request(hav_project.host()), project=demo_project(), now=NOW).results == []


def test_an_anonymous_platform_client_gets_no_homogeneous_app_version_work(hav_project):
    from backend.daemons.sched_types import ClientAppVersion

    hav_project.result(hav_project.workunit())
    request = hr_request(
        hav_project.host(), platform_name="anonymous", app_versions=[ClientAppVersion("uppercase", 100, flops=1e9)]
    )
    assert handle_request(request, project=demo_project(), now=NOW).results == []


# --- the transitioner: un-commit when only errors remain --------------------------------------


def run_transitioner(**options):
    return transitioner.run_once(project=demo_project(), now=NOW, batch_size=100, **options)


@pytest.mark.parametrize(
    "others, reset",
    [
        ([], True),  # only the error
        ([dict(server_state=ServerState.UNSENT)], True),  # an unsent one does not count
        ([dict(server_state=ServerState.IN_PROGRESS, report_deadline=NOW + 100)], False),
        ([dict(server_state=ServerState.OVER, outcome=Outcome.SUCCESS)], False),
        ([dict(server_state=ServerState.OVER, outcome=Outcome.NO_REPLY)], False),
    ],
)
def test_the_transitioner_uncommits_a_workunit_when_only_errors_remain(hr_project, others, reset):
    wu = hr_project.workunit(
        hr_class=256 + 11,
        app_version=hr_project.version,
        transition_time=NOW - 1,
        max_error_results=3,
        max_total_results=6,
    )
    hr_project.result(wu, server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR)
    for fields in others:
        hr_project.result(wu, **fields)
    run_transitioner()
    wu.refresh_from_db()
    if reset:
        assert (wu.hr_class, wu.app_version) == (0, None)
        assert LifecycleEvent.objects.filter(workunit=wu, field="hr_class", new=0).exists()
    else:
        assert (wu.hr_class, wu.app_version) == (256 + 11, hr_project.version)


def test_hr_class_static_keeps_the_commit(hr_project):
    wu = hr_project.workunit(hr_class=256 + 11, transition_time=NOW - 1, max_error_results=3, max_total_results=6)
    hr_project.result(wu, server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR)
    run_transitioner(hr_class_static=True)
    wu.refresh_from_db()
    assert wu.hr_class == 256 + 11


def test_a_retry_after_the_uncommit_may_go_to_another_class(hr_project):
    wu = hr_project.workunit(hr_class=384 + 11, transition_time=NOW - 1, max_error_results=3, max_total_results=6)
    hr_project.result(wu, server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR)
    run_transitioner()
    reply = handle_request(hr_request(hr_project.host(), "Linux", CORE), project=demo_project(), now=NOW)
    assert sent_names(reply) == [f"{wu.name}_1"]
    wu.refresh_from_db()
    assert wu.hr_class == 256 + 21


def test_hostinfo_carries_the_cpu_vendor_and_model():
    info = HostInfo(p_vendor="GenuineIntel", p_model="Xeon")
    assert (info.p_vendor, info.p_model) == ("GenuineIntel", "Xeon")


def test_a_committed_job_runs_at_the_capped_benchmark_as_boinc_estimates_it(hav_project):
    wu = hav_project.workunit(app_version=hav_project.version, rsc_fpops_est=3.63e13)
    hav_project.result(wu)
    free = hav_project.workunit(rsc_fpops_est=3.63e13)
    hav_project.result(free)
    request = hr_request(hav_project.host(), cpu_req_secs=10 * 86400.0)
    request.host_info.p_fpops = 1e10
    reply = handle_request(request, project=demo_project(), now=NOW)
    runtimes = {job.wu_name: job.estimated_runtime for job in reply.results}
    # under 10 hosts the cap is 1.1 x 3.3 GFLOPS; an uncommitted job runs at the benchmark
    assert runtimes == {wu.name: pytest.approx(10_000.0), free.name: pytest.approx(3630.0)}


def test_nothing_sent_because_every_job_is_committed_to_another_class_says_so(hr_project):
    # sched_hr.cpp already_sent_to_different_hr_class sets hr_reject_temp (reset on each
    # call) and sched_send.cpp send_user_messages adds "Tasks are committed to other
    # platforms" when nothing is sent (the differential's seed 9101 scheduler cases 19, 37,
    # 42, 120 and 236, among others)
    hr_project.result(hr_project.workunit(hr_class=256 + 21))
    reply = handle_request(hr_request(hr_project.host(), work_req_seconds=86400.0), project=demo_project(), now=NOW)
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [
        ("No tasks sent", "low"),
        ("Tasks are committed to other platforms", "low"),
    ]


def test_the_last_job_checked_decides_whether_tasks_are_committed_elsewhere(hr_project):
    # the flag is the last check's: a job of the host's class checked after one of another
    # class clears it, and a job it lacks memory for is still not sent
    hr_project.result(hr_project.workunit(hr_class=256 + 21), priority=2)
    hr_project.result(hr_project.workunit(hr_class=256 + 11, rsc_memory_bound=64e9), priority=1)
    request = hr_request(hr_project.host(), work_req_seconds=86400.0)
    request.host_info = dataclasses.replace(request.host_info, m_nbytes=4e9)
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert reply.results == []
    assert ("Tasks are committed to other platforms", "low") not in [(m.text, m.priority) for m in reply.messages]


def test_a_job_that_needs_a_reliable_host_is_not_checked_for_its_class_on_an_unproven_one(hr_project):
    # sched_score.cpp JOB::get_score leaves a job that needs a reliable host out of the scan
    # for a host that is not one, so its class is never checked and hr_reject_temp stays
    # clear (the differential's seed 9101 scheduler case 261)
    config = SchedulerConfig(reliable_on_priority=1, daily_result_quota=5)
    wu = hr_project.workunit(hr_class=256 + 21, priority=1)
    hr_project.result(wu, priority=1)
    reply = handle_request(
        hr_request(hr_project.host(), work_req_seconds=86400.0), project=demo_project(), now=NOW, config=config
    )
    assert reply.results == []
    assert [(m.text, m.priority) for m in reply.messages] == [("No tasks sent", "low")]
