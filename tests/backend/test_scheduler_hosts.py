"""Hosts over time: daily quotas and reliability per host app version (reference/server.md
§3.11, §1.9), lost results (§3.6 resend) and detached hosts (§3.6 mark_results_over)."""

import hashlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backend.daemons import host_app_version, transitioner, validator
from backend.daemons.scheduler import (
    ClientAppVersion,
    GpuRequest,
    ReportedFile,
    ReportedResult,
    SchedulerConfig,
    handle_request,
)
from backend.models import (
    EXIT_ABORTED_BY_PROJECT,
    AppVersion,
    ClientState,
    GpuType,
    HostAppVersion,
    Outcome,
    Result,
    ServerState,
    Workunit,
)
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, FileFactory, HostAppVersionFactory, demo_project
from tests.pages import parse, rows

pytestmark = pytest.mark.django_db

DAY = 86400
TODAY = NOW // DAY
QUOTA = 10


def config(**fields):
    fields.setdefault("daily_result_quota", QUOTA)
    return SchedulerConfig(**fields)


def unsent(project, n, **wu_fields):
    wu_fields.setdefault("delay_bound", 100 * DAY)
    return [project.result(project.workunit(**wu_fields)) for _ in range(n)]


def lots_of_work(host, **fields):
    """A request for more jobs than max_wus_to_send allows."""
    fields.setdefault("cpu_req_secs", 1e9)
    fields.setdefault("cpu_req_instances", 0)
    request = work_request(host, **fields)
    request.host_info.p_ncpus = host.p_ncpus
    return request


def hav_of(host, version):
    return HostAppVersion.objects.get(host=host, app_version=version)


def sent_result(project, host, version=None, **fields):
    fields.setdefault("server_state", ServerState.IN_PROGRESS)
    fields.setdefault("sent_time", NOW - 1000)
    fields.setdefault("report_deadline", NOW + DAY)
    version = project.version if version is None else version
    return project.result(project.workunit(), host=host, user_id=host.owner_id, app_version=version, **fields)


def report_of(result, **fields):
    files = [ReportedFile(result.output_file_name(0), data=b"OUTPUT\n")]
    return ReportedResult(result.name, output_files=files, **fields)


def count_queries(fn):
    with CaptureQueriesContext(connection) as queries:
        fn()
    return len(queries)


# --- §3.11 daily quota: the record, the count, the limit ------------------------------------


def test_rule_3_11_first_send_creates_the_host_app_version_and_the_next_request_the_quota(project):
    # sched_send.cpp update_host_app_versions creates the record cleared; update_quota, at
    # the start of the host's next request, gives it the quota
    host = project.host(p_ncpus=1)
    unsent(project, 3)
    reply = handle_request(lots_of_work(host, cpu_req_secs=2 * 3600), project=demo_project(), now=NOW, config=config())
    assert len(reply.results) == 2
    hav = hav_of(host, project.version)
    assert (hav.max_jobs_per_day, hav.n_jobs_today, hav.jobs_day) == (0, 2, TODAY)
    handle_request(lots_of_work(host, cpu_req_secs=0), project=demo_project(), now=NOW + 60, config=config())
    assert hav_of(host, project.version).max_jobs_per_day == QUOTA
    assert (hav.consecutive_valid, hav.turnaround_n) == (0, 0)
    handle_request(lots_of_work(host, cpu_req_secs=1), project=demo_project(), now=NOW + 60, config=config())
    assert hav_of(host, project.version).n_jobs_today == 3


@pytest.mark.parametrize(
    "ncpus, max_jobs_per_day, n_jobs_today, days_ago, quota, sent",
    [
        (1, 3, 0, 0, QUOTA, 3),  # 3 a day on one CPU
        (2, 3, 0, 0, QUOTA, 6),  # scaled by the CPU count
        (2, 3, 4, 0, QUOTA, 2),  # 4 of 6 already sent today
        (2, 3, 6, 0, QUOTA, 0),  # reached
        (2, 3, 9, 0, QUOTA, 0),  # over (the quota fell since)
        (2, 3, 6, 1, QUOTA, 6),  # yesterday's count does not count
        (1, 0, 50, 0, 0, 10),  # daily_result_quota 0: no quota (max_wus_to_send caps)
        (1, 12, 0, 0, QUOTA, 10),  # above the quota after valid results: max_wus_to_send caps
    ],
)
def test_rule_3_11_daily_quota_per_host_app_version_scaled_by_cpus(
    project, ncpus, max_jobs_per_day, n_jobs_today, days_ago, quota, sent
):
    host = project.host(p_ncpus=ncpus)
    HostAppVersionFactory(
        host=host,
        app_version=project.version,
        max_jobs_per_day=max_jobs_per_day,
        n_jobs_today=n_jobs_today,
        jobs_day=TODAY - days_ago,
    )
    unsent(project, 25)
    reply = handle_request(lots_of_work(host), project=demo_project(), now=NOW, config=config(daily_result_quota=quota))
    assert len(reply.results) == sent
    hav = hav_of(host, project.version)
    assert (hav.n_jobs_today, hav.jobs_day) == (
        (n_jobs_today if days_ago == 0 else 0) + sent,
        TODAY if sent or not days_ago else TODAY - days_ago,
    )
    # sched_version.cpp daily_quota_exceeded's message, shown only when nothing was sent
    exceeded = [(m.text, m.priority) for m in reply.messages if "Daily job limit" in m.text]
    limit = max_jobs_per_day * ncpus
    if quota and sent == 0:
        assert exceeded == [(f"Daily job limit ({limit}) has been reached", "notice")]
    else:
        assert exceeded == []


def test_rule_3_11_the_count_starts_again_on_a_new_utc_day(project):
    host = project.host(p_ncpus=1)
    # a version sent before (a record at 0, which the request sets to the quota)
    HostAppVersionFactory(host=host, app_version=project.version)
    unsent(project, 12)
    cfg = config(daily_result_quota=2)
    end_of_day = (TODAY + 1) * DAY - 1
    assert len(handle_request(lots_of_work(host), project=demo_project(), now=end_of_day, config=cfg).results) == 2
    assert handle_request(lots_of_work(host), project=demo_project(), now=end_of_day, config=cfg).results == []
    reply = handle_request(lots_of_work(host), project=demo_project(), now=end_of_day + 1, config=cfg)
    assert len(reply.results) == 2
    hav = hav_of(host, project.version)
    assert (hav.n_jobs_today, hav.jobs_day) == (2, TODAY + 1)


@pytest.mark.parametrize(
    "max_jobs_per_day, gpu_multiplier, gpu_jobs, cpu_jobs",
    [
        (2, 0, 6, 2),  # 2 x 3 GPUs, 2 x 1 CPU
        (2, 2, 12, 2),  # gpu_multiplier scales GPU versions' quota too
        # sched_version.cpp scaled_max_jobs_per_day: a limit of 1 is not scaled
        (1, 0, 1, 1),
        (1, 2, 1, 1),
    ],
)
def test_rule_3_11_gpu_quota_is_scaled_by_the_gpu_count_and_counted_apart(
    project, max_jobs_per_day, gpu_multiplier, gpu_jobs, cpu_jobs
):
    gpu = AppVersionFactory(
        app=project.app, version_num=100, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=1, flops=1e11
    )
    host = project.host(p_ncpus=1)
    for version in (project.version, gpu):
        HostAppVersionFactory(host=host, app_version=version, max_jobs_per_day=max_jobs_per_day, jobs_day=TODAY)
    unsent(project, 20)
    request = lots_of_work(host, gpu_requests=[GpuRequest("NVIDIA", count=3, peak_flops=1e11, req_secs=1e9)])
    reply = handle_request(
        request, project=demo_project(), now=NOW, config=config(gpu_multiplier=gpu_multiplier, max_wus_to_send=20)
    )
    assert sorted(job.resource for job in reply.results) == (["NVIDIA"] * gpu_jobs + ["cpu"] * cpu_jobs)
    assert hav_of(host, gpu).n_jobs_today == gpu_jobs
    assert hav_of(host, project.version).n_jobs_today == cpu_jobs


def test_rule_3_11_anonymous_platform_jobs_have_no_host_app_version(project):
    host = project.host()
    unsent(project, 3)
    request = lots_of_work(
        host,
        platform_name="anonymous",
        app_versions=[ClientAppVersion("uppercase", 100, platform="x86_64-pc-linux-gnu")],
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=config(daily_result_quota=1))
    assert len(reply.results) == 3
    assert not HostAppVersion.objects.exists()


# --- §3.11 reports: success doubles, error lowers -------------------------------------------


@pytest.mark.parametrize(
    "client_state, exit_status, before, after, valid_after",
    [
        (ClientState.FILES_UPLOADED, 0, 3, 6, 4),  # success doubles
        (ClientState.FILES_UPLOADED, 0, 8, QUOTA, 4),  # capped at the quota
        (ClientState.FILES_UPLOADED, 0, 12, 12, 4),  # above it (valid results): left alone
        (ClientState.COMPUTE_ERROR, 1, 5, 4, 0),  # error: one less, consecutive_valid 0
        (ClientState.COMPUTE_ERROR, 1, 1, 1, 0),  # never below one
        (ClientState.COMPUTE_ERROR, 1, 12, QUOTA - 1, 0),  # from the quota, if above it
        (ClientState.ABORTED, EXIT_ABORTED_BY_PROJECT, 5, 5, 4),  # the project's abort: no penalty
    ],
)
def test_rule_3_11_a_report_adjusts_the_quota(project, client_state, exit_status, before, after, valid_after):
    host = project.host()
    HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=before, consecutive_valid=4)
    result = sent_result(project, host)
    handle_request(
        work_request(
            host, cpu_req_secs=0, results=[report_of(result, client_state=client_state, exit_status=exit_status)]
        ),
        project=demo_project(),
        now=NOW,
        config=config(),
    )
    hav = hav_of(host, project.version)
    assert (hav.max_jobs_per_day, hav.consecutive_valid) == (after, valid_after)
    success = client_state == ClientState.FILES_UPLOADED
    assert (hav.turnaround_avg, hav.turnaround_n) == ((1000.0, 1) if success else (0.0, 0))


def test_rule_3_11_reports_of_one_request_apply_in_order_in_a_fixed_number_of_queries(project):
    def rpc(host, outcomes):
        HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=2, consecutive_valid=3)
        reports = [
            report_of(
                sent_result(project, host), client_state=ClientState.FILES_UPLOADED if ok else ClientState.COMPUTE_ERROR
            )
            for ok in outcomes
        ]
        count = count_queries(
            lambda: handle_request(
                work_request(host, cpu_req_secs=0, results=reports), project=demo_project(), now=NOW, config=config()
            )
        )
        return count, hav_of(host, project.version)

    few, hav = rpc(project.host(), [True, True])
    assert (hav.max_jobs_per_day, hav.turnaround_n) == (8, 2)  # 2 -> 4 -> 8
    many, hav = rpc(project.host(), [True, True, False, True] * 3)
    assert hav.max_jobs_per_day == QUOTA and hav.consecutive_valid == 0
    assert many == few


def test_rule_3_11_a_report_without_a_record_changes_no_record(project):
    host = project.host()
    result = sent_result(project, host)
    handle_request(
        work_request(host, cpu_req_secs=0, results=[report_of(result)]),
        project=demo_project(),
        now=NOW,
        config=config(),
    )
    assert not HostAppVersion.objects.exists()


@pytest.mark.parametrize(
    "samples, avg, n",
    [
        ([100.0], 100.0, 1),
        ([100.0, 300.0], 200.0, 2),
        ([100.0, 5000.0], 550.0, 2),  # cut to 10 x the average: (100 + 1000) / 2
        ([100.0] * 19, 100.0, 19),
        ([100.0] * 19 + [200.0], 101.0, 20),  # from the 20th sample on: weight 0.01
        ([-5.0], 0.0, 0),  # a negative sample is dropped
    ],
)
def test_rule_3_11_turnaround_is_boincs_running_average(samples, avg, n):
    got = (0.0, 0)
    for sample in samples:
        got = host_app_version.running_average(*got, sample)
    assert got == (pytest.approx(avg), n)


# --- §3.11 timeouts (transitioner) -----------------------------------------------------------


@pytest.mark.parametrize(
    "before, after",
    [
        (0, QUOTA - 1),  # a record never set counts as the quota
        (5, 4),
        (1, 1),
        (15, QUOTA - 1),
    ],
)
def test_rule_3_11_a_timeout_lowers_the_quota(project, before, after):
    host = project.host()
    HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=before, consecutive_valid=7)
    result = sent_result(project, host, report_deadline=NOW - 1)
    Workunit.objects.filter(pk=result.workunit_id).update(transition_time=NOW - 1)
    assert transitioner.run_once(project=demo_project(), now=NOW, batch_size=10, daily_result_quota=QUOTA) == 1
    assert Result.objects.get(pk=result.pk).outcome == Outcome.NO_REPLY
    hav = hav_of(host, project.version)
    assert (hav.max_jobs_per_day, hav.consecutive_valid) == (after, 0)
    assert (hav.turnaround_avg, hav.turnaround_n) == (float(project.app.delay_bound), 1)


def test_rule_3_11_timeouts_of_a_pass_apply_in_order_in_a_fixed_number_of_queries(project):
    def timeouts(n):
        host = project.host()
        HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=QUOTA)
        for _ in range(n):
            sent_result(project, host, report_deadline=NOW - 1)
        Workunit.objects.filter(results__host=host).update(transition_time=NOW - 1)
        count = count_queries(
            lambda: transitioner.run_once(project=demo_project(), now=NOW, batch_size=100, daily_result_quota=QUOTA)
        )
        return count, hav_of(host, project.version).max_jobs_per_day

    few, after_few = timeouts(2)
    many, after_many = timeouts(6)
    assert (after_few, after_many) == (QUOTA - 2, QUOTA - 6)
    assert many == few


# --- §3.11 validation ---------------------------------------------------------------------------


def validated(project, outputs, *, before, app_target=None, **wu_fields):
    """Successful results with these outputs on one host each, after a validator pass; the
    host app version of each before the pass is ``before`` (max_jobs_per_day, cons. valid)."""
    if app_target is not None:
        project.app.target_nresults = app_target
        project.app.save()
    wu_fields.setdefault("min_quorum", len(outputs))
    wu_fields.setdefault("target_nresults", len(outputs))
    wu = project.workunit(
        need_validate=True, max_success_results=3, max_total_results=6, max_error_results=3, **wu_fields
    )
    hosts = []
    for data in outputs:
        host = project.host()
        HostAppVersionFactory(
            host=host, app_version=project.version, max_jobs_per_day=before[0], consecutive_valid=before[1]
        )
        r = project.result(
            wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host, app_version=project.version
        )
        FileFactory(result=r, md5_cksum=hashlib.md5(data).hexdigest())
        hosts.append(host)
    assert validator.run_once(project=demo_project(), now=NOW, batch_size=10, daily_result_quota=QUOTA) == 1
    return [(hav.max_jobs_per_day, hav.consecutive_valid) for hav in (hav_of(h, project.version) for h in hosts)]


@pytest.mark.parametrize(
    "outputs, before, after",
    [
        # valid: one more job a day (even above the quota) and one more consecutive valid
        ([b"1", b"1"], (4, 2), [(5, 3), (5, 3)]),
        ([b"1", b"1"], (QUOTA, 2), [(QUOTA + 1, 3)] * 2),
        # quorum 3, two agree: the odd one is invalid: consecutive_valid 0, quota kept at or below
        ([b"1", b"1", b"2"], (4, 2), [(5, 3), (5, 3), (4, 0)]),
        # ... and lowered by one when above the quota
        ([b"1", b"1", b"2"], (QUOTA + 3, 2), [(QUOTA + 4, 3), (QUOTA + 4, 3), (QUOTA + 2, 0)]),
    ],
)
def test_rule_3_11_validation_adjusts_the_quota_and_consecutive_valid(project, outputs, before, after):
    assert validated(project, outputs, before=before) == after


def test_rule_3_11_an_unreplicated_valid_job_does_not_count_as_consecutive_valid(project):
    # adaptive replication: the app wants 2, this workunit was sent alone (target 1)
    assert validated(project, [b"1"], before=(4, 2), app_target=2) == [(5, 2)]


def test_rule_3_11_a_validate_error_is_invalid_for_the_host_app_version(project):
    wu = project.workunit(need_validate=True)
    host = project.host()
    HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=QUOTA + 1, consecutive_valid=5)
    project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host, app_version=project.version
    )  # no output file: unusable
    validator.run_once(project=demo_project(), now=NOW, batch_size=10, daily_result_quota=QUOTA)
    assert Result.objects.get().outcome == Outcome.VALIDATE_ERROR
    hav = hav_of(host, project.version)
    assert (hav.max_jobs_per_day, hav.consecutive_valid) == (QUOTA, 0)


# --- bad configuration ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, 2.5, "500", True, None])
def test_rule_3_11_a_bad_daily_result_quota_is_refused_with_its_reason(project, value):
    with pytest.raises(ValueError, match="daily_result_quota must be a whole number"):
        SchedulerConfig(daily_result_quota=value)
    with pytest.raises(ValueError, match="daily_result_quota must be a whole number"):
        transitioner.run_once(project=demo_project(), now=NOW, batch_size=10, daily_result_quota=value)
    with pytest.raises(ValueError, match="daily_result_quota must be a whole number"):
        validator.run_once(project=demo_project(), now=NOW, batch_size=10, daily_result_quota=value)


def test_scheduler_config_refuses_other_bad_values():
    with pytest.raises(ValueError, match="max_wus_to_send must be a whole number"):
        SchedulerConfig(max_wus_to_send=-3)
    with pytest.raises(ValueError, match="resend_lost_results must be True or False"):
        SchedulerConfig(resend_lost_results="yes")


# --- §3.6 resend lost results ----------------------------------------------------------------

GRACE = 3600


def resend_config(**fields):
    fields.setdefault("resend_lost_results", True)
    fields.setdefault("report_grace_period", GRACE)
    return config(**fields)


def lost_job(project, host, **fields):
    """A job sent 1000 s ago; its client deadline is a day from now (stored with grace)."""
    fields.setdefault("report_deadline", NOW + DAY + GRACE)
    return sent_result(project, host, **fields)


@pytest.mark.parametrize(
    "case, fate",
    [
        ("lost", "resent"),
        ("listed by the client", "untouched"),
        ("reported in this request", "reported"),
        ("workunit has an error", "expired"),
        ("workunit has a canonical result", "expired"),
        ("cannot finish before its deadline", "expired"),
        ("app version deprecated", "expired"),
        ("resend_lost_results off", "untouched"),
        ("no other_results list", "untouched"),
        ("asks for no work", "untouched"),
    ],
)
def test_rule_3_6_lost_results_are_resent_or_expired(project, case, fate):
    from backend.models import ErrorMask, LifecycleEvent

    host = project.host(p_ncpus=1)
    job = lost_job(project, host)
    other = lost_job(project, host)  # listed by the client: never touched
    [spare] = unsent(project, 1)  # new work the request could get
    fields = dict(cpu_req_secs=3600, cpu_req_instances=0, other_results=[other.name])
    cfg = resend_config()
    if case == "listed by the client":
        fields["other_results"].append(job.name)
    elif case == "reported in this request":
        fields["results"] = [report_of(job)]
    elif case == "workunit has an error":
        Workunit.objects.filter(pk=job.workunit_id).update(error_mask=ErrorMask.CANCELLED)
    elif case == "workunit has a canonical result":
        Workunit.objects.filter(pk=job.workunit_id).update(canonical_result=other)
    elif case == "cannot finish before its deadline":
        # 1800 s left before the stored deadline (grace included) for a 3600 s job
        Result.objects.filter(pk=job.pk).update(report_deadline=NOW + 1800)
    elif case == "app version deprecated":
        AppVersion.objects.filter(pk=project.version.pk).update(deprecated=True)
    elif case == "resend_lost_results off":
        cfg = resend_config(resend_lost_results=False)
    elif case == "no other_results list":
        fields["other_results"] = None
    elif case == "asks for no work":
        fields["cpu_req_secs"] = 0
    before = Result.objects.get(pk=job.pk)
    reply = handle_request(work_request(host, **fields), project=demo_project(), now=NOW, config=cfg)
    after = Result.objects.get(pk=job.pk)
    wu = Workunit.objects.get(pk=job.workunit_id)
    names = [r.name for r in reply.results]
    texts = [m.text for m in reply.messages]
    events = list(LifecycleEvent.objects.filter(result=job, actor="scheduler").values_list("field", "old", "new"))
    assert Result.objects.get(pk=other.pk).sent_time == NOW - 1000
    if fate == "resent":
        assert names == [job.name]
        # possibly_give_result_new_deadline keeps the stored deadline (the grace in it), less
        # the second BOINC's truncated dtime() loses, as the one the client is told, and
        # mark_as_sent adds the grace once more
        assert reply.results[0].report_deadline == before.report_deadline - 1
        assert (after.server_state, after.sent_time, after.report_deadline) == (
            ServerState.IN_PROGRESS,
            NOW,
            before.report_deadline - 1 + GRACE,
        )
        assert events == [("sent_time", NOW - 1000, NOW)]
        assert f"Resent lost task {job.name}" in texts
        # nothing new in an RPC that resent work, and a resend is not a new job of the day
        assert Result.objects.get(pk=spare.pk).server_state == ServerState.UNSENT
        assert not HostAppVersion.objects.exists()
    elif fate == "expired":
        # now - 1, and mark_as_sent adds the grace period; the workunit is due then
        assert (after.server_state, after.report_deadline) == (ServerState.IN_PROGRESS, NOW - 1 + GRACE)
        assert wu.transition_time == NOW - 1 + GRACE
        assert events == [("report_deadline", before.report_deadline, NOW - 1 + GRACE)]
        assert f"Didn't resend lost task {job.name} (expired)" in texts
        assert job.name not in names
        # the transitioner's pass once the grace period is over times it out
        transitioner.run_once(project=demo_project(), now=NOW + GRACE, batch_size=10)
        assert (Result.objects.get(pk=job.pk).server_state, Result.objects.get(pk=job.pk).outcome) == (
            ServerState.OVER,
            Outcome.NO_REPLY,
        )
    elif fate == "reported":
        assert (after.server_state, after.outcome) == (ServerState.OVER, Outcome.SUCCESS)
        assert job.name not in names and not any("lost task" in t for t in texts)
    else:
        assert (after.sent_time, after.report_deadline) == (NOW - 1000, NOW + DAY + GRACE)
        assert events == [] and not any("lost task" in t for t in texts)
    if fate != "resent" and case not in ("asks for no work", "app version deprecated"):
        assert names[-1:] == [spare.name]  # new work as usual


def test_rule_3_6_a_lost_gpu_job_is_resent_for_the_gpu_when_only_cpu_work_is_asked(project):
    gpu = AppVersionFactory(
        app=project.app, version_num=100, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=1, flops=1e11
    )
    host = project.host(p_ncpus=1)
    job = lost_job(project, host, version=gpu)
    request = work_request(
        host, cpu_req_secs=3600, other_results=[], gpu_requests=[GpuRequest("NVIDIA", count=1, peak_flops=1e11)]
    )
    reply = handle_request(request, project=demo_project(), now=NOW, config=resend_config())
    assert [(r.name, r.resource, r.app_version.plan_class) for r in reply.results] == [(job.name, "NVIDIA", "cuda")]
    # the GPU is gone: the job is expired
    job2 = lost_job(project, host, version=gpu)
    reply = handle_request(
        work_request(host, cpu_req_secs=3600, other_results=[job.name]),
        project=demo_project(),
        now=NOW + 1,
        config=resend_config(),
    )
    assert Result.objects.get(pk=job2.pk).report_deadline == NOW + GRACE
    assert job2.name not in [r.name for r in reply.results]


def test_rule_3_6_jobs_resent_queue_up_against_their_deadlines(project):
    # One CPU; each lost job runs 3600 s; 9000 s are left before the stored deadline, the
    # delay bound: the first skips the check (nothing queued), the second fits after it
    # (3600 + 3600), the third does not (7200 + 3600 > 9000) and is expired.
    host = project.host(p_ncpus=1)
    jobs = [
        project.result(
            project.workunit(delay_bound=9000),
            host=host,
            user_id=host.owner_id,
            app_version=project.version,
            server_state=ServerState.IN_PROGRESS,
            sent_time=NOW - 1000,
            report_deadline=NOW + 9000,
        )
        for _ in range(3)
    ]
    reply = handle_request(
        work_request(host, cpu_req_secs=DAY, other_results=[]), project=demo_project(), now=NOW, config=resend_config()
    )
    assert [r.name for r in reply.results] == [j.name for j in jobs[:2]]
    assert Result.objects.get(pk=jobs[2].pk).report_deadline == NOW - 1 + GRACE


def test_rule_3_6_resending_takes_a_fixed_number_of_queries(project):
    def resend(n):
        host = project.host(p_ncpus=1)
        for _ in range(n):
            lost_job(project, host, report_deadline=NOW + 100 * DAY)
        request = work_request(host, cpu_req_secs=100 * DAY, other_results=[])
        count = count_queries(lambda: handle_request(request, project=demo_project(), now=NOW, config=resend_config()))
        return count, Result.objects.filter(host=host, sent_time=NOW).count()

    few, resent_few = resend(2)
    many, resent_many = resend(7)
    assert (resent_few, resent_many) == (2, 7)
    assert many == few


# --- §3.6 detached and re-attached hosts -----------------------------------------------------


def attach_request(host, **fields):
    """What a client that lost its state sends: no host id, its account and its hardware."""
    from backend.daemons.scheduler import HostInfo, SchedulerRequest

    info = dict(domain_name=host.domain_name, os_name=host.os_name, p_ncpus=host.p_ncpus, p_fpops=2e9)
    info.update(fields.pop("host_info", {}))
    fields.setdefault("userid", host.owner_id)
    return SchedulerRequest(hostid=0, host_info=HostInfo(**info), **fields)


@pytest.mark.parametrize(
    "change, reused, detached",
    [
        ({}, True, True),
        (dict(other_results=[]), True, True),  # an empty list: nothing in progress
        (dict(other_results=["JOB"]), True, False),  # it still has work: not detached
        (dict(host_info=dict(p_fpops=9e9)), True, True),  # new benchmarks: same computer
        (dict(host_info=dict(domain_name="elsewhere")), False, False),
        (dict(host_info=dict(os_name="Windows")), False, False),
        (dict(host_info=dict(p_ncpus=8)), False, False),
        (dict(host_info=dict(domain_name="")), False, False),  # BOINC needs the fields given
        (dict(host_info=dict(os_name="")), False, False),
        ("another account", False, False),
    ],
)
def test_rule_3_6_a_reattached_host_is_reused_and_its_jobs_become_client_detached(project, change, reused, detached):
    from backend.models import Host, LifecycleEvent

    host = project.host(p_ncpus=2, os_name="Linux")
    job = sent_result(project, host)
    listed = sent_result(project, host) if change == dict(other_results=["JOB"]) else None
    Workunit.objects.filter(pk=job.workunit_id).update(transition_time=NOW + 5000)
    if change == "another account":
        request = attach_request(host, userid=project.host().owner_id)
    else:
        change = dict(change)
        if listed is not None:
            change["other_results"] = [listed.name]
        request = attach_request(host, cpu_req_secs=0, **change)
    hosts_before = Host.objects.count()
    reply = handle_request(request, project=demo_project(), now=NOW, config=config())
    assert (reply.hostid == host.pk) is reused
    assert Host.objects.count() == hosts_before + (0 if reused else 1)
    job = Result.objects.get(pk=job.pk)
    events = set(LifecycleEvent.objects.filter(result=job).values_list("field", "new"))
    if detached:
        assert (job.server_state, job.outcome, job.received_time) == (ServerState.OVER, Outcome.CLIENT_DETACHED, NOW)
        assert Workunit.objects.get(pk=job.workunit_id).transition_time == NOW
        assert events == {("server_state", ServerState.OVER), ("outcome", Outcome.CLIENT_DETACHED)}
    else:
        assert (job.server_state, job.received_time) == (ServerState.IN_PROGRESS, 0)
        assert events == set()


def test_rule_3_6_the_newest_matching_host_is_reused_and_a_job_reported_is_not_detached(project):
    old = project.host(os_name="Linux")
    new = project.host(owner=old.owner, os_name="Linux")
    new.domain_name = old.domain_name
    new.save()
    job, reported = sent_result(project, new), sent_result(project, new)
    reply = handle_request(
        attach_request(new, cpu_req_secs=0, results=[report_of(reported)]),
        project=demo_project(),
        now=NOW,
        config=config(),
    )
    assert reply.hostid == new.pk
    assert Result.objects.get(pk=job.pk).outcome == Outcome.CLIENT_DETACHED
    assert Result.objects.get(pk=reported.pk).outcome == Outcome.SUCCESS


def test_rule_3_6_detached_results_are_never_resent_and_are_aborted_if_listed(project):
    host = project.host(os_name="Linux")
    job = sent_result(project, host)
    reply = handle_request(
        attach_request(host, cpu_req_secs=3600, other_results=[]),
        project=demo_project(),
        now=NOW,
        config=resend_config(),
    )
    assert job.name not in [r.name for r in reply.results]
    assert Result.objects.get(pk=job.pk).outcome == Outcome.CLIENT_DETACHED
    reply = handle_request(
        work_request(host, cpu_req_secs=0, other_results=[job.name]),
        project=demo_project(),
        now=NOW + 1,
        config=resend_config(),
    )
    assert reply.result_aborts == [job.name]


# --- §3.2 / §3.7: CLIENT_DETACHED is no reply, not an error ---------------------------------


@pytest.mark.parametrize("outcome", [Outcome.NO_REPLY, Outcome.CLIENT_DETACHED, Outcome.CLIENT_ERROR])
def test_rule_3_6_the_transitioner_counts_client_detached_as_no_reply(project, outcome):
    # max_error_results 1: two errors are too many; two no-replies are retried
    wu = project.workunit(transition_time=NOW - 1, max_error_results=1, max_total_results=4, hr_class=3)
    for _ in range(2):
        project.result(
            wu,
            server_state=ServerState.OVER,
            outcome=outcome,
            report_deadline=NOW - 100,
            received_time=NOW - 100,
            validate_state=0 if outcome != Outcome.CLIENT_ERROR else 2,
        )
    transitioner.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    unsent_now = wu.results.filter(server_state=ServerState.UNSENT).count()
    if outcome == Outcome.CLIENT_ERROR:
        from backend.models import ErrorMask

        assert (wu.error_mask, unsent_now, wu.hr_class) == (
            ErrorMask.TOO_MANY_ERROR_RESULTS,
            0,
            0,
        )  # errors only: HR class released
    else:
        assert (wu.error_mask, unsent_now, wu.hr_class) == (0, 1, 3)


@pytest.mark.parametrize("outcome", [Outcome.NO_REPLY, Outcome.CLIENT_DETACHED])
def test_rule_3_6_the_validator_ignores_client_detached_as_no_reply(project, outcome):
    wu = project.workunit(need_validate=True, min_quorum=1)
    gone = project.result(wu, server_state=ServerState.OVER, outcome=outcome, received_time=NOW - 10)
    done = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
    FileFactory(result=done, md5_cksum="a")
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert wu.canonical_result_id == done.pk
    gone.refresh_from_db()
    assert (gone.outcome, gone.validate_state, gone.granted_credit) == (outcome, 0, 0.0)


# --- the host page shows the record ----------------------------------------------------------


def test_the_host_page_shows_each_host_app_versions_quota_and_reliability(project, client):
    host = project.host(p_ncpus=1)
    unsent(project, 3)
    reply = handle_request(lots_of_work(host, cpu_req_secs=2 * 3600), project=demo_project(), now=NOW, config=config())
    [first, _] = reply.results
    job = Result.objects.get(name=first.name)
    handle_request(
        work_request(host, cpu_req_secs=0, cpu_req_instances=0, results=[report_of(job)]),
        project=demo_project(),
        now=NOW + 1800,
        config=config(),
    )
    HostAppVersion.objects.filter(host=host).update(consecutive_valid=3)
    page = client.get(f"/project/hosts/{host.pk}/")
    assert page.status_code == 200
    # consecutive valid, max jobs/day (the quota: a success does not raise it past it),
    # jobs today, the turnaround of the one report, the runtimes reported (one) and no speed
    # from them yet (more than 10 are needed)
    [row] = [cells for cells in rows(parse(page)) if cells and cells[0].startswith("uppercase 100")]
    assert row == ["uppercase 100 x86_64-pc-linux-gnu", "3", "10", "2", "30 min 00 s", "1", "—"]


# --- the project's options: settings for the endpoint and the daemons' passes ----------------


@pytest.mark.parametrize("quota, after", [(QUOTA, QUOTA - 1), (500, 14)])
def test_rule_3_11_run_pass_uses_the_projects_daily_result_quota(project, settings, quota, after):
    from backend.daemons import run_pass

    settings.BOINC_DAILY_RESULT_QUOTA = quota
    host = project.host()
    HostAppVersionFactory(host=host, app_version=project.version, max_jobs_per_day=15)
    result = sent_result(project, host, report_deadline=NOW - 1)
    Workunit.objects.filter(pk=result.workunit_id).update(transition_time=NOW - 1)
    assert run_pass("transitioner", project=demo_project(), now=NOW, batch_size=10) == 1
    assert hav_of(host, project.version).max_jobs_per_day == after


def test_the_scheduler_endpoint_takes_the_projects_options_from_the_settings(settings):
    from backend.daemons.sched_types import project_config

    settings.BOINC_DAILY_RESULT_QUOTA, settings.BOINC_RESEND_LOST_RESULTS = 7, True
    assert (project_config().daily_result_quota, project_config().resend_lost_results) == (7, True)
