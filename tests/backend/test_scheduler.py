"""The scheduler, one table per rule of reference/server.md §3.4–§3.6."""

import dataclasses
import hashlib

import pytest
from django.db import transaction

from backend.daemons.hierarchy import upload_path
from backend.daemons.sched_result import handle_results
from backend.daemons.sched_types import SchedulerReply
from backend.daemons.scheduler import (
    GpuRequest,
    ReportedFile,
    ReportedResult,
    SchedulerConfig,
    SchedulerRequest,
    SchedulerRequestError,
    StickyFile,
    handle_request,
)
from backend.models import (
    INT_MAX,
    ClientState,
    File,
    Host,
    HostFile,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.backend.conftest import work_request
from tests.factories import NOW, AppVersionFactory, FileFactory, demo_project

pytestmark = pytest.mark.django_db


def sent_result(project, host, **fields):
    wu = project.workunit()
    fields.setdefault("server_state", ServerState.IN_PROGRESS)
    return project.result(
        wu, host=host, user_id=host.owner_id, sent_time=NOW - 1000, report_deadline=NOW + 86400, **fields
    )


def report_of(result, data=b"OUTPUT\n", **fields):
    files = [ReportedFile(result.output_file_name(0), data=data)] if data is not None else []
    return ReportedResult(result.name, output_files=files, **fields)


# --- §3.5 step 4: the outcome of a reported result -----------------------------------------


@pytest.mark.parametrize(
    "client_state, exit_status, outcome, validate_state",
    [
        (ClientState.FILES_UPLOADED, 0, Outcome.SUCCESS, ValidateState.INIT),
        (ClientState.FILES_UPLOADED, 3, Outcome.CLIENT_ERROR, ValidateState.INVALID),
        (ClientState.COMPUTE_ERROR, 0, Outcome.CLIENT_ERROR, ValidateState.INVALID),
        (ClientState.COMPUTE_ERROR, 3, Outcome.CLIENT_ERROR, ValidateState.INVALID),
        (ClientState.ABORTED, 203, Outcome.CLIENT_ERROR, ValidateState.INVALID),
        (ClientState.UPLOAD_FAILED, 0, Outcome.CLIENT_ERROR, ValidateState.INVALID),
    ],
)
def test_rule_3_5_success_needs_files_uploaded_and_exit_status_zero(
    project, client_state, exit_status, outcome, validate_state
):
    host = project.host()
    result = sent_result(project, host)
    reply = handle_request(
        work_request(
            host, cpu_req_secs=0, results=[report_of(result, client_state=client_state, exit_status=exit_status)]
        ),
        project=demo_project(),
        now=NOW,
    )
    result.refresh_from_db()
    assert reply.result_acks == [result.name] and reply.rejected == []
    assert (result.server_state, result.outcome, result.validate_state) == (ServerState.OVER, outcome, validate_state)
    assert (result.received_time, result.exit_status) == (NOW, exit_status)
    assert result.workunit.transition_time == NOW
    fields = set(LifecycleEvent.objects.filter(result=result).values_list("field", flat=True))
    assert {"server_state", "outcome"} <= fields


def test_rule_3_5_uploaded_output_is_written_and_recorded(project):
    host = project.host()
    result = sent_result(project, host)
    handle_request(work_request(host, cpu_req_secs=0, results=[report_of(result)]), project=demo_project(), now=NOW)
    name = result.output_file_name(0)
    assert upload_path(demo_project(), name).read_bytes() == b"OUTPUT\n"
    row = File.objects.get(name=name)
    assert (row.result_id, row.nbytes, row.md5_cksum) == (result.pk, 7, hashlib.md5(b"OUTPUT\n").hexdigest())


# --- §3.5 step 2: which reports are accepted -----------------------------------------------


@pytest.mark.parametrize(
    "server_state, outcome, whose, accepted, reason",
    [
        (ServerState.IN_PROGRESS, Outcome.INIT, "this host", True, ""),
        (ServerState.OVER, Outcome.NO_REPLY, "this host", True, ""),
        (ServerState.OVER, Outcome.CLIENT_DETACHED, "this host", True, ""),
        (ServerState.OVER, Outcome.SUCCESS, "this host", False, "already reported (outcome SUCCESS)"),
        (ServerState.OVER, Outcome.DIDNT_NEED, "this host", False, "already reported"),
        (ServerState.UNSENT, Outcome.INIT, "this host", False, "this result was never sent"),
        (ServerState.IN_PROGRESS, Outcome.INIT, "same owner's other host", True, ""),
        (
            ServerState.IN_PROGRESS,
            Outcome.INIT,
            "another volunteer's host",
            False,
            "this result was sent to another host",
        ),
    ],
)
def test_rule_3_5_late_and_foreign_reports(project, server_state, outcome, whose, accepted, reason):
    host = project.host()
    holder = {
        "this host": host,
        "same owner's other host": project.host(owner=host.owner),
        "another volunteer's host": project.host(),
    }[whose]
    result = sent_result(project, holder, server_state=server_state, outcome=outcome)
    before = LifecycleEvent.objects.count()
    reply = handle_request(
        work_request(host, cpu_req_secs=0, results=[report_of(result)]), project=demo_project(), now=NOW
    )
    assert reply.result_acks == [result.name]
    result.refresh_from_db()
    if accepted:
        assert reply.rejected == []
        assert (result.server_state, result.outcome, result.host_id) == (ServerState.OVER, Outcome.SUCCESS, host.pk)
    else:
        assert len(reply.rejected) == 1 and reply.rejected[0].reason.startswith(reason)
        assert (result.server_state, result.outcome) == (server_state, outcome)
        assert LifecycleEvent.objects.count() == before
        assert not File.objects.exists()


@pytest.mark.parametrize(
    "transition_time, expected",
    [
        (INT_MAX, NOW),  # waiting for nothing: due now
        (NOW + 3600, NOW),  # waiting for a later deadline: due now
        (NOW - 60, NOW - 60),  # already due (a wingman past its deadline): stays due
    ],
)
def test_rule_3_5_a_report_makes_the_workunit_due_and_never_postpones_it(project, transition_time, expected):
    host = project.host()
    result = sent_result(project, host)
    Workunit.objects.filter(pk=result.workunit_id).update(transition_time=transition_time)
    handle_request(
        work_request(host, cpu_req_secs=0, cpu_req_instances=0, results=[report_of(result)]),
        project=demo_project(),
        now=NOW,
    )
    assert Workunit.objects.get(pk=result.workunit_id).transition_time == expected


@pytest.mark.parametrize(
    "mangle, reason",
    [
        (lambda r: [ReportedFile("somebody_elses_r1_0", data=b"x")], "does not belong"),
        (
            lambda r: [ReportedFile(r.output_file_name(0), md5_cksum="0" * 32, data=b"x")],
            "does not match its md5_cksum",
        ),
        (lambda r: [ReportedFile(r.output_file_name(0), nbytes=5, data=b"x")], "not 5 bytes long"),
    ],
)
def test_rule_3_5_a_report_with_outputs_not_its_own_changes_nothing(project, mangle, reason):
    host = project.host()
    result = sent_result(project, host)
    report = ReportedResult(result.name, output_files=mangle(result))
    reply = handle_request(work_request(host, cpu_req_secs=0, results=[report]), project=demo_project(), now=NOW)
    assert reason in reply.rejected[0].reason
    result.refresh_from_db()
    assert result.server_state == ServerState.IN_PROGRESS
    assert not File.objects.exists()


def test_rule_3_5_unknown_result_is_acked_and_rejected(project):
    host = project.host()
    reply = handle_request(
        work_request(host, cpu_req_secs=0, results=[ReportedResult("no_such_result")]), project=demo_project(), now=NOW
    )
    assert reply.result_acks == ["no_such_result"]
    assert reply.rejected[0].reason == "no such result"


@pytest.mark.parametrize(
    "elapsed, cpu, version, ncpus, expected",
    [
        (100.0, 90.0, "single", 1, (100.0, 90.0)),
        # elapsed < CPU for a single-threaded app version -> elapsed = CPU ...
        (50.0, 90.0, "single", 1, (90.0, 90.0)),
        # ... but not for a multithreaded one (plan class "mt" or several CPUs) ...
        (50.0, 90.0, "mt", 4, (50.0, 90.0)),
        (50.0, 90.0, "four cpus", 4, (50.0, 90.0)),
        # ... nor for a result without an app version; CPU > elapsed × CPUs is cut to that
        (50.0, 90.0, None, 1, (50.0, 50.0)),
        (50.0, 90.0, "mt", 1, (50.0, 50.0)),
        (20.0, 90.0, "mt", 4, (20.0, 80.0)),
        (-5.0, 90.0, None, 1, (90.0, 90.0)),  # negative -> 0 -> CPU time
        (-5.0, 90.0, "mt", 4, (90.0, 90.0)),
        (0.0, 90.0, None, 1, (90.0, 90.0)),  # zero -> CPU time
        (0.0, 0.0, "single", 1, (0.0, 0.0)),
        (5000.0, 90.0, "single", 1, (1000.0, 90.0)),  # longer than the turnaround (1000 s)
        # elapsed raised to a CPU time beyond the turnaround, then cut: CPU <= 1000 × 2
        (50.0, 5000.0, "single", 2, (1000.0, 2000.0)),
    ],
)
def test_rule_3_5_elapsed_and_cpu_time_are_sanitised(project, elapsed, cpu, version, ncpus, expected):
    host = project.host(p_ncpus=ncpus)
    versions = {
        None: None,
        "single": project.version,
        "mt": AppVersionFactory(app=project.app, version_num=101, plan_class="mt"),
        "four cpus": AppVersionFactory(app=project.app, version_num=102, avg_ncpus=4),
    }
    result = sent_result(project, host, app_version=versions[version])
    handle_request(
        work_request(host, cpu_req_secs=0, results=[report_of(result, final_elapsed_time=elapsed, final_cpu_time=cpu)]),
        project=demo_project(),
        now=NOW,
    )
    result.refresh_from_db()
    assert (result.elapsed_time, result.cpu_time) == expected


@pytest.mark.parametrize(
    "server_state, outcome, resend",
    [
        (ServerState.OVER, Outcome.SUCCESS, True),  # the client lost our reply
        (ServerState.OVER, Outcome.CLIENT_ERROR, False),
        (ServerState.OVER, Outcome.DIDNT_NEED, False),
        (ServerState.UNSENT, Outcome.INIT, False),
        (ServerState.IN_PROGRESS, Outcome.INIT, False),  # accepted: a first report
        (ServerState.OVER, Outcome.NO_REPLY, False),  # accepted late
    ],
)
def test_rule_3_5_a_duplicate_success_report_asks_to_resend_lost_results(project, server_state, outcome, resend):
    host = project.host()
    result = sent_result(project, host, server_state=server_state, outcome=outcome)
    with transaction.atomic():
        handled = handle_results(host, [report_of(result)], now=NOW, reply=SchedulerReply())
    assert handled.resend_lost_results is resend
    assert handled.accepted == (server_state == ServerState.IN_PROGRESS or outcome == Outcome.NO_REPLY)


# --- §3.4: sending -------------------------------------------------------------------------


def test_rule_3_4_send_order_is_priority_then_workunit_and_deadline_has_grace(project):
    host = project.host()
    low = project.result(project.workunit("a"), priority=0)
    high = project.result(project.workunit("b"), priority=5)
    reply = handle_request(
        work_request(host, cpu_req_secs=1, cpu_req_instances=0),
        project=demo_project(),
        now=NOW,
        config=SchedulerConfig(report_grace_period=3600),
    )
    assert [job.name for job in reply.results] == [high.name]
    high.refresh_from_db()
    low.refresh_from_db()
    assert (high.server_state, high.host_id, high.sent_time) == (ServerState.IN_PROGRESS, host.pk, NOW)
    assert high.report_deadline == NOW + 86400 + 3600
    assert reply.results[0].report_deadline == NOW + 86400
    assert high.workunit.transition_time == NOW + 86400 + 3600
    assert low.server_state == ServerState.UNSENT
    job = reply.results[0]
    assert job.output_files[0].name == high.output_file_name(0)
    assert (job.workunit.name, job.app_version.version_num) == ("b", 100)


def test_rule_3_4_one_result_per_user_per_workunit(project):
    host = project.host()
    wu = project.workunit()
    project.result(
        wu,
        host=project.host(owner=host.owner),
        user_id=host.owner_id,
        server_state=ServerState.IN_PROGRESS,
        report_deadline=NOW + 10,
    )
    project.result(wu)
    other = project.result(project.workunit())
    twin = project.result(other.workunit)
    reply = handle_request(work_request(host), project=demo_project(), now=NOW)
    assert [job.name for job in reply.results] == [other.name]
    assert Result.objects.get(pk=twin.pk).server_state == ServerState.UNSENT


@pytest.mark.parametrize(
    "p_fpops, on_frac, estimated_delay, delay_bound, sent",
    [
        # sched_check.cpp check_deadline: a host with nothing queued gets one job however slow
        (1e9, 1.0, 0, 3600, True),
        (1e6, 1.0, 0, 86400, True),
        (1e9, 1.0, 1, 86400, True),  # 3600 s of work, a day to do it
        (1e9, 1.0, 1, 3600, False),  # 1 + 3600 > 3600: a miss
        (1e9, 1.0, 1, 3601, True),  # 1 + 3600 = 3601 is not more than the bound
        (1e9, 0.05, 1, 86400, True),  # 72000 s stretched, fits
        (1e9, 0.1, 1, 36000, False),  # 36000 s stretched, 1 s too many
        # clamp_frac: an availability under 0.1 counts as 0.1 (36000 s)
        (1e9, 0.02, 1, 86400, True),
        (1e9, 0.02, 1, 36000, False),
        (1e9, 1.0, 83000, 86400, False),  # the queue ahead eats the time
        (10e9, 1.0, 83000, 86400, True),  # a faster host makes it
    ],
)
def test_rule_3_4_deadline_feasibility(project, p_fpops, on_frac, estimated_delay, delay_bound, sent):
    host = project.host(p_fpops=p_fpops, on_frac=on_frac)
    result = project.result(project.workunit(delay_bound=delay_bound))
    reply = handle_request(work_request(host, estimated_delay=estimated_delay), project=demo_project(), now=NOW)
    result.refresh_from_db()
    assert bool(reply.results) is sent
    assert result.server_state == (ServerState.IN_PROGRESS if sent else ServerState.UNSENT)
    assert result.infeasible_since == 0  # no infeasible queue in BOINC


def test_rule_4_seed003_infeasible_queue_result_falls_off_as_couldnt_send(project):
    slow = project.host(p_fpops=1e6)
    result = project.result(project.workunit())
    config = SchedulerConfig(seed003_infeasible_queue=True, infeasible_timeout=1000)
    handle_request(work_request(slow, estimated_delay=1), project=demo_project(), now=NOW, config=config)
    assert Result.objects.get(pk=result.pk).infeasible_since == NOW
    handle_request(work_request(slow, estimated_delay=1), project=demo_project(), now=NOW + 999, config=config)
    assert Result.objects.get(pk=result.pk).server_state == ServerState.UNSENT
    handle_request(work_request(slow, estimated_delay=1), project=demo_project(), now=NOW + 1000, config=config)
    result.refresh_from_db()
    assert (result.server_state, result.outcome) == (ServerState.OVER, Outcome.COULDNT_SEND)
    assert result.workunit.transition_time == NOW + 1000


def test_rule_4_without_the_seed003_queue_an_infeasible_result_stays_unsent(project):
    slow = project.host(p_fpops=1e6)
    result = project.result(project.workunit())
    for now in (NOW, NOW + 8 * 86400):
        handle_request(work_request(slow, estimated_delay=1), project=demo_project(), now=now)
    result.refresh_from_db()
    assert (result.server_state, result.outcome, result.infeasible_since) == (ServerState.UNSENT, Outcome.INIT, 0)


@pytest.mark.parametrize(
    "cpu_req_secs, cpu_req_instances, ncpus, expected",
    [
        (1, 0, 2, 1),  # the first RPC asks for one second: one job
        (3 * 3600, 0, 2, 3),  # three jobs' worth of seconds
        (1, 3, 2, 3),  # three idle instances
        (10 * 86400, 0, 1, 10),  # capped at max_wus_to_send x CPUs
        (0, 0, 2, 0),
    ],
)
def test_rule_3_4_how_much_work_is_sent(project, cpu_req_secs, cpu_req_instances, ncpus, expected):
    host = project.host(p_ncpus=ncpus)
    for _ in range(25):
        project.result(project.workunit(delay_bound=100 * 86400))
    request = work_request(host, cpu_req_secs=cpu_req_secs, cpu_req_instances=cpu_req_instances)
    request.host_info.p_ncpus = ncpus
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert len(reply.results) == expected
    assert Result.objects.filter(server_state=ServerState.IN_PROGRESS).count() == expected


@pytest.mark.parametrize("infeasible_priority, feasible_priority", [(1, 0), (0, 0)])
def test_rule_3_4_candidates_beyond_the_jobs_it_may_send_are_looked_at(project, infeasible_priority, feasible_priority):
    # One CPU: up to 10 jobs, from the first 40 candidates (candidate_factor 4).
    host = project.host(p_ncpus=1)
    for _ in range(12):
        project.result(project.workunit(priority=infeasible_priority, delay_bound=10), priority=infeasible_priority)
    feasible = [
        project.result(project.workunit(priority=feasible_priority, delay_bound=10**6), priority=feasible_priority)
        for _ in range(3)
    ]
    reply = handle_request(
        work_request(host, cpu_req_secs=10 * 86400, estimated_delay=1), project=demo_project(), now=NOW
    )
    assert sorted(job.name for job in reply.results) == sorted(r.name for r in feasible)


@pytest.mark.parametrize(
    "client_version, files_of, sent_version",
    [
        # a simulated host runs nothing: the newest version, files or not
        ("", [], 200),
        ("", [100], 200),
        # a real client only gets a version with a main program to download
        ("7.20.5", [100], 100),
        ("7.20.5", [100, 200], 200),
        ("7.20.5", [], None),
    ],
)
def test_rule_3_4_a_real_client_is_only_sent_app_versions_with_executables(
    project, client_version, files_of, sent_version
):
    from protocol.models import AppVersionFile

    newer = AppVersionFactory(app=project.app, version_num=200, flops=1e9)
    for version in (project.version, newer):
        if version.version_num in files_of:
            AppVersionFile.objects.create(
                project=demo_project(),
                app_version=version,
                name=f"worker_{version.pk}",
                nbytes=1,
                md5_cksum="0" * 32,
                file_signature="s",
            )
    project.result(project.workunit())
    host = project.host()
    request = work_request(host, core_client_version=client_version)
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert [job.app_version.version_num for job in reply.results] == ([sent_version] if sent_version else [])


def test_rule_3_4_gpu_requests_get_gpu_versions(project):
    from backend.models import GpuType

    AppVersionFactory(
        app=project.app, version_num=100, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=1, flops=1e11
    )
    host = project.host()
    project.result(project.workunit())
    request = work_request(
        host,
        cpu_req_secs=0,
        cpu_req_instances=0,
        gpu_requests=[GpuRequest("NVIDIA", count=1, peak_flops=1e11, req_secs=60)],
    )
    reply = handle_request(request, project=demo_project(), now=NOW)
    assert [(job.resource, job.app_version.plan_class) for job in reply.results] == [("NVIDIA", "cuda")]
    assert reply.results[0].estimated_runtime == pytest.approx(36.0)


# --- §3.6: result aborts -------------------------------------------------------------------


def test_rule_3_6_result_abort(project):
    from backend.models import AssimilateState, ErrorMask

    host = project.host()
    running = sent_result(project, host)
    cancelled = sent_result(project, host)
    Workunit.objects.filter(pk=cancelled.workunit_id).update(error_mask=ErrorMask.CANCELLED)
    finished = sent_result(project, host)
    Workunit.objects.filter(pk=finished.workunit_id).update(assimilate_state=AssimilateState.DONE)
    timed_out = sent_result(project, host, server_state=ServerState.OVER, outcome=Outcome.NO_REPLY)
    elsewhere = sent_result(project, project.host())
    reply = handle_request(
        work_request(
            host,
            cpu_req_secs=0,
            other_results=[running.name, cancelled.name, finished.name, timed_out.name, elsewhere.name, "unknown"],
        ),
        project=demo_project(),
        now=NOW,
    )
    assert reply.result_aborts == [cancelled.name, elsewhere.name, "unknown"]
    assert reply.result_abort_if_not_started == [finished.name, timed_out.name]


# --- bad requests --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, reason",
    [
        (dict(hostid=999999), "no host with id 999999"),
        (dict(hostid=0, userid=None), "needs the account"),
        (dict(cpu_req_secs=-1), "cpu_req_secs must not be negative"),
        (dict(gpu_requests=[GpuRequest("VOODOO")]), "unknown GPU type 'VOODOO'"),
        (dict(results=[ReportedResult("x"), ReportedResult("x")]), "reported twice"),
        (dict(results=[ReportedResult("x", client_state=42)]), "unknown state 42"),
        (dict(results=[ReportedResult("x", output_files=[ReportedFile("../etc/passwd")])]), "not a plain file name"),
    ],
)
def test_bad_request_is_refused_with_its_reason_and_changes_nothing(project, change, reason):
    host = project.host()
    result = sent_result(project, host)
    request = dataclasses.replace(work_request(host, results=[report_of(result)]), **change)
    before = (LifecycleEvent.objects.count(), Host.objects.count(), Host.objects.get().rpc_time)
    with pytest.raises(SchedulerRequestError, match=reason.replace("(", r"\(")):
        handle_request(request, project=demo_project(), now=NOW)
    assert (LifecycleEvent.objects.count(), Host.objects.count(), Host.objects.get().rpc_time) == before
    assert Result.objects.get(pk=result.pk).server_state == ServerState.IN_PROGRESS


def test_bad_request_for_another_accounts_host(project):
    host = project.host()
    intruder = project.host()
    request = dataclasses.replace(work_request(host), userid=intruder.owner_id)
    with pytest.raises(SchedulerRequestError, match="belongs to another account"):
        handle_request(request, project=demo_project(), now=NOW)


def test_new_host_is_created_and_sticky_files_are_tracked(project):
    host = project.host()
    request = SchedulerRequest(
        hostid=0, userid=host.owner_id, cpu_req_secs=0, file_infos=[StickyFile("big.dat"), StickyFile("gone.dat")]
    )
    FileFactory(name="big.dat", sticky=True)
    reply = handle_request(request, project=demo_project(), now=NOW)
    new = Host.objects.get(pk=reply.hostid)
    assert new.owner_id == host.owner_id and new.rpc_time == NOW
    assert set(HostFile.objects.filter(host=new).values_list("name", flat=True)) == {"big.dat", "gone.dat"}
    assert reply.delete_file_infos == ["gone.dat"]


def test_rule_3_4_a_big_request_reads_candidates_past_the_first_chunks_in_feeder_order(
    project, django_assert_max_num_queries
):
    # Two results per workunit, priorities 0-2 interleaved: a 16-CPU host may take up to 160
    # jobs, one per workunit, in the order (priority descending, workunit id); the candidates
    # are read in chunks of 8, 16, ... that must continue exactly where the last one ended.
    host = project.host(p_ncpus=16)
    wus = [project.workunit(priority=i % 3, delay_bound=10**6) for i in range(90)]
    for wu in wus:
        project.result(wu, priority=wu.priority)
        project.result(wu, priority=wu.priority)
    request = work_request(host, cpu_req_secs=1e9, cpu_req_instances=16)
    request.host_info.p_ncpus = 16
    with django_assert_max_num_queries(40):
        reply = handle_request(request, project=demo_project(), now=NOW)
    expected = sorted(wus, key=lambda wu: (-wu.priority, wu.pk))
    assert [job.wu_name for job in reply.results] == [wu.name for wu in expected]
    sent = Result.objects.filter(server_state=ServerState.IN_PROGRESS)
    assert sent.count() == 90
    assert sent.values("workunit").distinct().count() == 90
