"""The scheduler's rules for reported results, each expectation read off BOINC's
sched/sched_result.cpp handle_results (its elapsed and CPU time checks 1-4, the late-report
and other-host rules, got_good_result / got_bad_result) and reference/server.md §3.5."""

from types import SimpleNamespace

import pytest

from backend.daemons import host_app_version
from backend.daemons.sched_result import (
    is_duplicate_success,
    output_files,
    quota_change,
    rejection,
    sanitised_times,
    single_threaded,
)
from backend.daemons.sched_types import ReportedFile
from backend.models import EXIT_ABORTED_BY_PROJECT, Outcome, Result, ServerState
from tests.factories import NOW


def report(elapsed, cpu):
    return SimpleNamespace(final_elapsed_time=elapsed, final_cpu_time=cpu)


def result(sent_time=NOW - 10_000, plan_class="", avg_ncpus=1.0, version=True):
    app_version = SimpleNamespace(plan_class=plan_class, avg_ncpus=avg_ncpus) if version else None
    return SimpleNamespace(sent_time=sent_time, app_version=app_version)


HOST = SimpleNamespace(p_ncpus=2)


@pytest.mark.parametrize(
    "elapsed, cpu, job, times",
    [
        (100.0, 50.0, result(), (100.0, 50.0)),  # nothing to fix
        (10.0, 50.0, result(), (50.0, 50.0)),  # 1) single-threaded: ET = CPU
        (10.0, 50.0, result(plan_class="mt"), (10.0, 20.0)),  # multithreaded: kept, CPU cut
        (10.0, 50.0, result(avg_ncpus=2.0), (10.0, 20.0)),
        (10.0, 50.0, result(version=False), (10.0, 20.0)),  # no app version: kept
        (-5.0, 0.0, result(), (0.0, 0.0)),  # 2) negative: 0
        (0.0, 30.0, result(plan_class="mt"), (30.0, 30.0)),  # 3) zero: CPU time
        (20_000.0, 10.0, result(), (10_000.0, 10.0)),  # 4) cut to the turnaround
        (10_000.0, 10.0, result(), (10_000.0, 10.0)),  # exactly the turnaround
        (20_000.0, 10.0, result(sent_time=NOW + 5), (20_000.0, 10.0)),  # inconsistent: kept
        (100.0, 200.0, result(plan_class="mt"), (100.0, 200.0)),  # CPU = ET x ncpus: kept
        (100.0, 201.0, result(plan_class="mt"), (100.0, 200.0)),  # CPU > ET x ncpus: cut
    ],
)
def test_reported_times_are_sanitised_in_boincs_order(elapsed, cpu, job, times):
    assert sanitised_times(report(elapsed, cpu), job, HOST, now=NOW) == times


def test_single_threaded_means_no_mt_plan_class_and_at_most_one_cpu():
    assert single_threaded(SimpleNamespace(plan_class="", avg_ncpus=1.0))
    assert single_threaded(SimpleNamespace(plan_class="cuda", avg_ncpus=0.5))
    assert not single_threaded(SimpleNamespace(plan_class="mt", avg_ncpus=1.0))
    assert not single_threaded(SimpleNamespace(plan_class="", avg_ncpus=1.5))


def row(server_state=ServerState.IN_PROGRESS, outcome=Outcome.INIT, received_time=0, host_id=1, owner_id=10):
    return SimpleNamespace(
        server_state=server_state,
        outcome=outcome,
        received_time=received_time,
        host_id=host_id,
        host=SimpleNamespace(owner_id=owner_id) if host_id else None,
    )


ME = SimpleNamespace(pk=1, owner_id=10)


@pytest.mark.parametrize(
    "job, accepted",
    [
        (row(), True),
        (None, False),
        (row(server_state=ServerState.UNSENT), False),
        (row(server_state=ServerState.OVER, outcome=Outcome.SUCCESS), False),
        (row(server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR), False),
        (row(server_state=ServerState.OVER, outcome=Outcome.NO_REPLY), True),  # late
        (row(server_state=ServerState.OVER, outcome=Outcome.CLIENT_DETACHED), True),
        (row(server_state=ServerState.OVER, outcome=Outcome.NO_REPLY, received_time=5), False),
        (row(received_time=5), False),
        (row(host_id=2, owner_id=10), True),  # another host of the same volunteer
        (row(host_id=2, owner_id=11), False),
        (row(host_id=None), False),
    ],
)
def test_which_reports_are_accepted(job, accepted):
    assert (rejection(job, None, ME) == "") is accepted


def test_a_rejected_duplicate_of_a_success_asks_for_lost_results_to_be_resent():
    assert is_duplicate_success(row(server_state=ServerState.OVER, outcome=Outcome.SUCCESS))
    assert not is_duplicate_success(row(server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR))
    assert not is_duplicate_success(row(server_state=ServerState.IN_PROGRESS, outcome=Outcome.SUCCESS))
    assert not is_duplicate_success(None)


def test_the_host_app_version_change_of_each_report():
    job = dict(elapsed_time=50.0, flops_estimate=1e9, workunit=SimpleNamespace(rsc_fpops_est=4e10))
    good = SimpleNamespace(
        outcome=Outcome.SUCCESS, sent_time=NOW - 60, host_id=1, app_version_id=2, exit_status=0, **job
    )
    host, version, change = quota_change(good, quota=500, now=NOW)
    assert (host, version, change.func, change.keywords) == (
        1,
        2,
        host_app_version.got_good_result,
        {"quota": 500, "turnaround": 60, "job": (50.0, 1e9, 4e10)},
    )
    unsent = SimpleNamespace(outcome=Outcome.SUCCESS, sent_time=0, host_id=1, app_version_id=2, exit_status=0, **job)
    assert quota_change(unsent, quota=500, now=NOW)[2].keywords["turnaround"] is None
    bad = SimpleNamespace(outcome=Outcome.CLIENT_ERROR, sent_time=NOW - 60, host_id=1, app_version_id=2, exit_status=-1)
    assert quota_change(bad, quota=500, now=NOW)[2].func is host_app_version.got_bad_result
    aborted = SimpleNamespace(
        outcome=Outcome.CLIENT_ERROR,
        sent_time=NOW - 60,
        host_id=1,
        app_version_id=2,
        exit_status=EXIT_ABORTED_BY_PROJECT,
    )
    assert quota_change(aborted, quota=500, now=NOW) == (None, None, None)


OWN = Result(name="wu_0", random=7)  # unsaved: only its name and random are read


@pytest.mark.parametrize(
    "files, reason",
    [
        ([ReportedFile("wu_0_r7_0", data=b"abc")], ""),
        ([ReportedFile("wu_0_r7_0", data=b"abc", nbytes=3, md5_cksum="900150983cd24fb0d6963f7d28e17f72")], ""),
        ([ReportedFile("wu_0_r8_0", data=b"abc")], "does not belong"),
        ([ReportedFile("wu_0_r7_x", data=b"abc")], "does not belong"),
        ([ReportedFile("wu_0_r7_", data=b"abc")], "does not belong"),
        ([ReportedFile("wu_0_r7_0", data=b"abc", md5_cksum="0" * 32)], "md5_cksum"),
        ([ReportedFile("wu_0_r7_0", data=b"abc", nbytes=4)], "4 bytes"),
    ],
)
def test_a_report_carries_only_its_own_outputs_with_their_stated_size_and_checksum(files, reason):
    outputs, why = output_files(OWN, SimpleNamespace(output_files=files))
    assert (why == "") if not reason else (reason in why)
    if not reason:
        [(row_, data)] = outputs
        assert (row_.nbytes, row_.md5_cksum, data) == (3, "900150983cd24fb0d6963f7d28e17f72", b"abc")
    else:
        assert outputs == []


def test_an_output_the_client_failed_to_upload_is_not_recorded():
    files = [ReportedFile("wu_0_r7_0", data=b"abc"), ReportedFile("wu_0_r7_1", error_msg="upload failed")]
    outputs, why = output_files(OWN, SimpleNamespace(output_files=files))
    assert why == "" and [r.name for r, _ in outputs] == ["wu_0_r7_0"]
