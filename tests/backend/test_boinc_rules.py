"""Rules where the daemons follow BOINC's code (BOINC/boinc c5c6cb79, sched/), each test's
expectation worked out from the BOINC function named in it (docs/server-fidelity.md)."""

import hashlib
import math

import pytest

from backend.daemons import transitioner, validator
from backend.daemons.scheduler import GpuRequest, SchedulerConfig, handle_request
from backend.models import (
    ErrorMask,
    GpuType,
    Host,
    HostAppVersion,
    Outcome,
    Result,
    ServerState,
    UserCredit,
    ValidateState,
    Workunit,
)
from tests.backend.conftest import work_request
from tests.factories import (
    NOW,
    AppVersionFactory,
    FileFactory,
    HostAppVersionFactory,
    TeamFactory,
    UserCreditFactory,
    UserFactory,
    demo_project,
)

DAY = 86400


def sent(reply):
    return [job.name for job in reply.results]


# --- case 1: sched_check.cpp check_deadline, "everyone gets one result" ----------------------


def test_an_idle_slow_host_gets_one_job_it_cannot_finish_in_time_and_nothing_errors_out(project):
    slow = project.host(p_fpops=1e6)  # 3600e9 FLOPs: 3.6e6 s, the bound a day
    jobs = [project.result(project.workunit()) for _ in range(3)]
    reply = handle_request(work_request(slow, estimated_delay=0), project=demo_project(), now=NOW)
    # the first skips the deadline check; once it is queued the others miss their deadline
    assert sent(reply) == [jobs[0].name]
    later = NOW + 8 * DAY
    handle_request(work_request(slow, estimated_delay=1), project=demo_project(), now=later)
    transitioner.run_once(project=demo_project(), now=later, batch_size=100)
    for job in jobs[1:]:
        job.refresh_from_db()
        assert (job.server_state, job.outcome) == (ServerState.UNSENT, Outcome.INIT)
        assert Workunit.objects.get(pk=job.workunit_id).error_mask == 0


# --- case 2: sched_send.cpp get_available_fracs / clamp_frac ---------------------------------


def test_an_availability_under_a_tenth_counts_as_a_tenth(project):
    host = project.host(on_frac=0.02)  # 3600 s / 0.1 = 36000 s < a day
    job = project.result(project.workunit(delay_bound=DAY))
    reply = handle_request(work_request(host, estimated_delay=1), project=demo_project(), now=NOW)
    assert sent(reply) == [job.name]


# --- case 3: sched_version.cpp scaled_max_jobs_per_day -----------------------------------------


def test_a_punished_app_version_gets_one_job_a_day_whatever_the_cpu_count(project):
    host = project.host(p_ncpus=4)
    HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=1, jobs_day=NOW // DAY)
    for _ in range(6):
        project.result(project.workunit(delay_bound=100 * DAY))
    request = work_request(host, cpu_req_secs=1e6, cpu_req_instances=4)
    request.host_info.p_ncpus = 4
    assert len(handle_request(request, project=demo_project(), now=NOW).results) == 1


# --- case 4: sched_send.cpp add_result_to_reply, update_estimated_delay ----------------------


def test_a_job_fills_its_duration_stretched_by_availability_of_the_request(project):
    host = project.host(on_frac=0.5)  # a 3600 s job takes 7200 s of real time
    for _ in range(3):
        project.result(project.workunit(delay_bound=100 * DAY))
    reply = handle_request(work_request(host, cpu_req_secs=7200, cpu_req_instances=0), project=demo_project(), now=NOW)
    assert len(reply.results) == 1


@pytest.mark.parametrize(
    "avg_ncpus, jobs",
    [
        # two 1800 s jobs on 2 CPUs, delay bound 3600 s, 1 s queued: after the first the queue is
        # 1 + 1800 x avg_ncpus / 2; the second needs the queue + 1800 <= 3600
        (2.0, 1),  # 1801 + 1800 > 3600
        (1.0, 2),  # 901 + 1800 fits
    ],
)
def test_the_queue_grows_by_each_jobs_duration_times_the_cpus_it_uses(project, avg_ncpus, jobs):
    project.version.delete()
    AppVersionFactory(app=project.app, version_num=100, avg_ncpus=avg_ncpus, flops=1e9)
    host = project.host(p_ncpus=2)
    # 1800 s of computing on this host's avg_ncpus CPUs
    fpops = 1800 * 1e9 * avg_ncpus
    for _ in range(2):
        project.result(project.workunit(delay_bound=3600, rsc_fpops_est=fpops))
    request = work_request(host, cpu_req_secs=1e6, cpu_req_instances=0, estimated_delay=1)
    request.host_info.p_ncpus = 2
    assert len(handle_request(request, project=demo_project(), now=NOW).results) == jobs


def test_a_gpu_jobs_share_of_the_gpu_counts_in_the_gpu_queue(project):
    AppVersionFactory(
        app=project.app, version_num=100, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=0.5, flops=1e9
    )
    host = project.host()
    # 1000e9 FLOPs on a 1e12 GPU at half of it: 2 s each; the bound 3 s, 1 s queued
    for _ in range(3):
        project.result(project.workunit(delay_bound=3, rsc_fpops_est=1000e9))
    request = work_request(
        host,
        cpu_req_secs=0,
        cpu_req_instances=0,
        gpu_requests=[GpuRequest("NVIDIA", count=1, peak_flops=1e12, req_secs=1e6, estimated_delay=1)],
    )
    # first: 1 + 2 <= 3; then the queue is 1 + 2 x 0.5 = 2, and 2 + 2 > 3
    assert [job.resource for job in handle_request(request, project=demo_project(), now=NOW).results] == ["NVIDIA"]


# --- case 7: sched_resend.cpp resend_lost_work stops once the request is filled ---------------


def test_lost_jobs_are_resent_only_until_the_request_is_filled(project):
    host = project.host()
    lost = []
    for _ in range(5):
        wu = project.workunit(rsc_fpops_est=36000e9, delay_bound=10 * DAY)  # 10 h each
        lost.append(
            project.result(
                wu,
                server_state=ServerState.IN_PROGRESS,
                host=host,
                user_id=host.owner_id,
                app_version=project.version,
                sent_time=NOW - 1000,
                report_deadline=NOW + 9 * DAY,
            )
        )
    reply = handle_request(
        work_request(host, cpu_req_secs=3600, other_results=[]),
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(resend_lost_results=True),
    )
    assert sent(reply) == [lost[0].name]
    for job in lost[1:]:
        job.refresh_from_db()
        assert (job.server_state, job.report_deadline) == (ServerState.IN_PROGRESS, NOW + 9 * DAY)
    transitioner.run_once(project=demo_project(), now=NOW + 1, batch_size=100)
    assert not Result.objects.filter(outcome=Outcome.NO_REPLY).exists()


# --- case 8: sched_check.cpp check_memory -----------------------------------------------------


@pytest.mark.parametrize(
    "m_nbytes, memory_bound, sent_one, usable",
    [
        # the message counts megabytes of 2**20 bytes (lib/util.h MEGA)
        (2e9, 64e9, False, 2e9 / 2**20),
        (2e9, 2e9, True, None),  # exactly the host's memory fits
        (0, 65e6, False, 64e6 / 2**20),  # a client saying 0 has BOINC's 64,000,000 bytes
        (0, 64e6, True, None),
    ],
)
def test_a_job_needing_more_memory_than_the_host_has_is_not_sent(project, m_nbytes, memory_bound, sent_one, usable):
    host = project.host()
    project.result(project.workunit(rsc_memory_bound=memory_bound))
    request = work_request(host)
    request.host_info.m_nbytes = m_nbytes
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert bool(reply.results) is sent_one
    if not sent_one:
        assert [(m.text, m.priority) for m in reply.messages] == [
            ("No tasks sent", "low"),
            (
                f"uppercase needs {memory_bound / 2**20:.2f} MB RAM but only {usable:.2f} MB is available for use.",
                "notice",
            ),
        ]
    assert Host.objects.get(pk=host.pk).m_nbytes == m_nbytes


def test_a_caller_that_does_not_model_memory_gets_no_memory_check(project):
    host = project.host()
    project.result(project.workunit(rsc_memory_bound=1e15))
    assert len(handle_request(work_request(host), project=demo_project(), now=NOW).results) == 1


# --- case 6: credit.cpp grant_credit, validator.cpp is_valid ----------------------------------


def test_validated_credit_reaches_hosts_users_and_teams_with_a_recent_average(project):
    team = TeamFactory(name="crunchers")
    first = UserCreditFactory(user__username="ann", team=team).user
    second = UserFactory(username="bob")
    hosts = [project.host(owner=first), project.host(owner=second)]
    wu = project.workunit(min_quorum=2, target_nresults=2, need_validate=True, rsc_fpops_est=86400e9)  # 200 credits
    sent_times = [NOW - DAY, NOW - 2 * DAY]
    for host, sent_time in zip(hosts, sent_times):
        r = project.result(
            wu,
            server_state=ServerState.OVER,
            outcome=Outcome.SUCCESS,
            host=host,
            user_id=host.owner_id,
            sent_time=sent_time,
            received_time=NOW - 3600,
        )
        FileFactory(result=r, md5_cksum=hashlib.md5(b"same").hexdigest())
    assert validator.run_once(project=demo_project(), now=NOW, batch_size=10) == 1
    # lib/util.cpp update_average, first time: work / days since it was started
    for host, sent_time in zip(hosts, sent_times):
        host.refresh_from_db()
        days = (NOW - sent_time) / DAY
        assert (host.total_credit, host.expavg_time) == (200, NOW)
        assert math.isclose(host.expavg_credit, 200 / days)
        # sched_util.cpp compute_avg_turnaround: the first sample taken whole
        assert host.avg_turnaround == NOW - 3600 - sent_time
    ann, bob = UserCredit.objects.get(user=first), UserCredit.objects.get(user=second)
    assert (ann.total_credit, bob.total_credit) == (200, 200)
    assert math.isclose(ann.expavg_credit, 200)
    team.refresh_from_db()
    assert (team.total_credit, team.expavg_time) == (200, NOW)  # bob has no team
    assert math.isclose(team.expavg_credit, 200)


def test_a_second_credit_decays_the_average_with_a_week_half_life(project):
    host = project.host(total_credit=100, expavg_credit=50, expavg_time=NOW - 7 * DAY, avg_turnaround=1000)
    wu = project.workunit(need_validate=True, rsc_fpops_est=86400e9)
    r = project.result(
        wu,
        server_state=ServerState.OVER,
        outcome=Outcome.SUCCESS,
        host=host,
        sent_time=NOW - DAY,
        received_time=NOW - DAY + 2000,
    )
    FileFactory(result=r, md5_cksum="x")
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    host.refresh_from_db()
    # weight exp(-7 d ln 2 / 7 d) = 1/2: 50 / 2 + (1 - 1/2) x 200 / 7 days
    assert math.isclose(host.expavg_credit, 25 + 0.5 * 200 / 7)
    assert host.total_credit == 300
    assert math.isclose(host.avg_turnaround, 0.7 * 1000 + 0.3 * 2000)


# --- case 9: validator.cpp, no consensus ------------------------------------------------------


def test_too_many_successes_without_consensus_also_raises_target_nresults(project):
    wu = project.workunit(
        min_quorum=2, target_nresults=2, max_success_results=2, max_total_results=6, need_validate=True
    )
    for data in (b"1", b"2", b"3"):
        r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=project.host())
        FileFactory(result=r, md5_cksum=hashlib.md5(data).hexdigest())
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert (wu.error_mask, wu.target_nresults, wu.transition_time) == (ErrorMask.TOO_MANY_SUCCESS_RESULTS, 4, NOW)
    assert set(wu.results.values_list("validate_state", flat=True)) == {ValidateState.INCONCLUSIVE}


# --- rules the differential harness (bench/server_differential.py) found ----------------------


def test_a_timeout_creates_the_missing_host_app_version_and_lowers_it(project):
    # credit.cpp hav_lookup inserts a cleared record; result_timed_out takes 0 as the quota
    host = project.host()
    wu = project.workunit(transition_time=NOW - 1)
    project.result(
        wu,
        server_state=ServerState.IN_PROGRESS,
        host=host,
        app_version=project.version,
        sent_time=NOW - DAY,
        report_deadline=NOW - 1,
    )
    transitioner.run_once(project=demo_project(), now=NOW, batch_size=10, daily_result_quota=100)
    hav = HostAppVersion.objects.get(host=host, app_version=project.version)
    assert (hav.max_jobs_per_day, hav.consecutive_valid) == (99, 0)


def test_validating_creates_the_missing_host_app_version_of_each_viable_result(project):
    host = project.host()
    wu = project.workunit(need_validate=True, min_quorum=2, target_nresults=2)
    r = project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host, app_version=project.version
    )
    FileFactory(result=r, md5_cksum="x")
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)  # one result: no quorum yet
    assert HostAppVersion.objects.filter(host=host, max_jobs_per_day=0).count() == 1


def test_a_version_never_sent_to_the_host_has_no_daily_limit_yet(project):
    # sched_version.cpp daily_quota_exceeded: no record, not exceeded
    host = project.host()
    for _ in range(12):
        project.result(project.workunit(delay_bound=100 * DAY))
    request = work_request(host, cpu_req_secs=1e9, cpu_req_instances=0)
    reply = handle_request(request, project=demo_project(), now=NOW, config=SchedulerConfig(daily_result_quota=2))
    assert len(reply.results) == 10  # max_wus_to_send, not the quota


def test_instances_without_seconds_ask_for_no_work(project):
    host = project.host()
    project.result(project.workunit())
    reply = handle_request(work_request(host, cpu_req_secs=0, cpu_req_instances=2), project=demo_project(), now=NOW)
    assert reply.results == [] and reply.messages == []


def test_without_one_result_per_user_per_wu_two_results_of_a_workunit_go_to_one_host(project):
    host = project.host()
    wu = project.workunit(delay_bound=100 * DAY)
    first, second = project.result(wu), project.result(wu)
    config = SchedulerConfig(one_result_per_user_per_wu=False)
    reply = handle_request(work_request(host, cpu_req_secs=1e6), project=demo_project(), now=NOW, config=config)
    assert sorted(sent(reply)) == sorted([first.name, second.name])


def test_the_request_looks_at_the_whole_job_cache_as_boincs_scheduler_does(project):
    # 30 jobs too big for the host ahead of one that fits; 2 jobs per RPC x candidate_factor 4
    # would look at 8; the scheduler scans its shared-memory cache (shmem_work_items, 100)
    host = project.host()
    for _ in range(30):
        project.result(project.workunit(rsc_memory_bound=64e9))
    fits = project.result(project.workunit())
    request = work_request(host)
    request.host_info.m_nbytes = 1e9
    reply = handle_request(request, project=demo_project(), now=NOW, config=SchedulerConfig(max_wus_to_send=2))
    assert sent(reply) == [fits.name]


def test_memory_notices_name_jobs_the_one_per_user_rule_would_refuse_anyway(project):
    # check_memory runs before the one-result-per-user check
    host = project.host()
    wu = project.workunit(rsc_memory_bound=4e9)
    project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host, user_id=host.owner_id)
    project.result(wu)
    request = work_request(host)
    request.host_info.m_nbytes = 1e9
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert [m.priority for m in reply.messages] == ["low", "notice"]
    assert "needs 3814.70 MB RAM" in reply.messages[1].text


@pytest.mark.parametrize(
    "keep_due, expected", [(True, NOW - 500), (False, NOW), (None, NOW - 500)]
)  # None: the default
def test_a_report_makes_the_workunit_due_now_as_boinc_or_keeps_it_due(project, keep_due, expected):
    from backend.daemons.scheduler import ReportedFile, ReportedResult

    host = project.host()
    wu = project.workunit(transition_time=NOW - 500)
    r = project.result(
        wu,
        server_state=ServerState.IN_PROGRESS,
        host=host,
        user_id=host.owner_id,
        app_version=project.version,
        sent_time=NOW - DAY,
        report_deadline=NOW + DAY,
    )
    report = ReportedResult(r.name, output_files=[ReportedFile(r.output_file_name(0), data=b"x")])
    config = SchedulerConfig() if keep_due is None else SchedulerConfig(keep_due_workunits=keep_due)
    handle_request(work_request(host, cpu_req_secs=0, results=[report]), project=demo_project(), now=NOW, config=config)
    assert Workunit.objects.get(pk=wu.pk).transition_time == expected


def test_a_validator_pass_with_nothing_to_compare_leaves_transition_time_alone(project):
    # validator.cpp: transition_time = IMMEDIATE only once a result was compared
    wu = project.workunit(need_validate=True, transition_time=NOW + 5000)
    r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, validate_state=ValidateState.VALID)
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=r)
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert (wu.transition_time, wu.need_validate) == (NOW + 5000, False)
