"""The scheduler's handling of reported results (reference/server.md §3.5).

Follows BOINC's code (sched/sched_result.cpp) where the seed's pseudo-code differs (§4):

- every reported result is acked, accepted or not, so the client forgets it;
- a result that is OVER with outcome NO_REPLY or CLIENT_DETACHED is accepted late (and, if the
  transitioner had already given its files to the file deleter, its file_delete_state goes
  back to INIT: the late report brings outputs that are to be deleted in their turn); any other
  OVER result, an UNSENT one, or one already received is ignored ("already reported");
- a result reported again that is already OVER/SUCCESS means the client probably lost the
  reply to its earlier report, which may have carried new jobs: ``handle_results`` returns
  ``Handled.resend_lost_results`` true, telling the scheduler to resend this request's lost
  results even where the project's resend_lost_results option is off;
- a result sent to another host is accepted when that host has the same owner, otherwise it
  is rejected and nothing changes;
- the outcome is SUCCESS only if the client state is FILES_UPLOADED **and** exit_status is 0;
  anything else is CLIENT_ERROR with validate_state INVALID;
- elapsed and CPU time are sanitised, in BOINC's order: elapsed < CPU for a single-threaded
  app version (plan class without "mt", at most one CPU) -> CPU; negative -> 0; zero -> CPU;
  longer than the turnaround (received - sent, when not negative) -> the turnaround; then a CPU
  time over elapsed × the host's CPUs is cut to that;
- the host app version of each accepted result is updated (``got_good_result`` for a success,
  ``got_bad_result`` for an error unless exit_status is EXIT_ABORTED_BY_PROJECT; see
  ``backend.daemons.host_app_version``), all in one locked read and one write, last;
- the workunits of accepted results get ``transition_time = now`` in one update; BOINC writes
  ``now`` outright, we write ``min(transition_time, now)`` so that a report never postpones a
  workunit that was already due (another result past its deadline): a transitioner pass at the
  same ``now`` would skip it and leave that result IN_PROGRESS past its deadline
  (``SchedulerConfig.keep_due_workunits``; off, ``now`` is written as BOINC does).

Additionally (our rule, not BOINC's): a report whose output files are not the result's own
(``<result name>_r<random>_<i>``) or whose uploaded contents do not match the stated size or
checksum is rejected and changes nothing, so a host cannot plant another result's output.

Results of one workunit are written only under that workunit's row lock (PostgreSQL), which the
transitioner and validator also hold while they decide, so a report never races them.
"""

import hashlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

from django.db import connection

from backend.daemons import host_app_version
from backend.daemons.claim import (
    locked_in_id_order,
    lower_transition_time,
    placeholders,
    read_rows,
    rows_by_id,
    update_rows,
)
from backend.daemons.hierarchy import upload_path, write_files
from backend.daemons.sched_types import DAILY_RESULT_QUOTA, RejectedReport, ReportedResult, SchedulerReply
from backend.events import Event, event, record
from backend.models import (
    EXIT_ABORTED_BY_PROJECT,
    AppVersion,
    ClientState,
    File,
    FileDeleteState,
    Host,
    HostAppVersion,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)

ACTOR = "scheduler"

LATE_OUTCOMES = {Outcome.NO_REPLY, Outcome.CLIENT_DETACHED}


class Handled(NamedTuple):
    """What ``handle_results`` did: how many reports it accepted, and whether this request
    should have its lost results resent (a duplicate SUCCESS report, §3.5 step 2)."""

    accepted: int
    resend_lost_results: bool = False


def handle_results(
    host: Host,
    reports: Sequence[ReportedResult],
    *,
    now: int,
    reply: SchedulerReply,
    quota: int = DAILY_RESULT_QUOTA,
    keep_due: bool = True,
) -> Handled:
    """Apply the reported results of one request; call inside ``transaction.atomic()``.

    ``quota`` is the project's daily_result_quota, for the host app versions' bookkeeping.
    Returns a ``Handled``.
    """
    if not reports:
        return Handled(0)
    names = [report.name for report in reports]
    by_name = f"t.name IN ({placeholders(len(names))})"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.workunit_id FROM {connection.ops.quote_name(Result._meta.db_table)} t WHERE {by_name}", names
        )
        wu_ids = sorted({wu_id for (wu_id,) in cursor.fetchall()})
    # Lock the workunits in id order (FOR NO KEY UPDATE, as the daemons' claims), then read
    # the results under the lock, with their workunits and app versions (a result's host is
    # read only where it is not the requesting host, which is rare)
    locked_in_id_order(wu_ids)
    results = read_rows(Result, by_name, names)
    workunits = rows_by_id(Workunit, wu_ids)
    versions = rows_by_id(AppVersion, sorted({r.app_version_id for r in results if r.app_version_id}))
    workunit, app_version = Result._meta.get_field("workunit"), Result._meta.get_field("app_version")
    for r in results:
        workunit.set_cached_value(r, workunits[r.workunit_id])
        if r.app_version_id:
            app_version.set_cached_value(r, versions[r.app_version_id])
    found = {r.name: r for r in results}
    accepted: list[Result] = []
    files, events = [], []
    resend = False
    for report in reports:
        reply.result_acks.append(report.name)
        result = found.get(report.name)
        reason = rejection(result, report, host)
        if reason:
            reply.rejected.append(RejectedReport(report.name, reason))
            resend = resend or is_duplicate_success(result)
            continue
        assert result is not None  # rejection refuses a result not found
        outputs, reason = output_files(result, report)
        if reason:
            reply.rejected.append(RejectedReport(report.name, reason))
            continue
        events.extend(receive(result, report, host, now=now))
        accepted.append(result)
        files.extend(outputs)
    if not accepted:
        return Handled(0, resend)
    update_rows(
        Result,
        accepted,
        [
            "server_state",
            "outcome",
            "validate_state",
            "client_state",
            "exit_status",
            "host",
            "received_time",
            "elapsed_time",
            "cpu_time",
            "stderr_out",
            "file_delete_state",
        ],
    )
    store_output_files(host, files)
    accepted_wus = sorted({r.workunit_id for r in accepted})
    if keep_due:
        lower_transition_time(accepted_wus, now)
    else:
        Workunit.objects.filter(id__in=accepted_wus).update(transition_time=now)
    record(events, host.project_id)
    host_app_version.apply([quota_change(result, quota=quota, now=now) for result in accepted])
    return Handled(len(accepted), resend)


def is_duplicate_success(result: Result | None) -> bool:
    """Whether a rejected report is of a result already reported as a success."""
    return result is not None and result.server_state == ServerState.OVER and result.outcome == Outcome.SUCCESS


def quota_change(
    result: Result, *, quota: int, now: int
) -> tuple[int | None, int | None, Callable[[HostAppVersion], None] | None]:
    """The host app version change of an accepted report (§3.5 step 4): got_good_result for
    a success, got_bad_result for an error unless the project aborted the job."""
    if result.outcome == Outcome.SUCCESS:
        turnaround = now - result.sent_time if result.sent_time else None
        job = (result.elapsed_time, result.flops_estimate, result.workunit.rsc_fpops_est)
        change = partial(host_app_version.got_good_result, quota=quota, turnaround=turnaround, job=job)
    elif result.exit_status != EXIT_ABORTED_BY_PROJECT:
        change = partial(host_app_version.got_bad_result, quota=quota)
    else:
        return None, None, None
    return result.host_id, result.app_version_id, change


def rejection(result: Result | None, report: ReportedResult, host: Host) -> str:
    """Why ``report`` changes nothing, or "" when it is to be accepted (§3.5 step 2)."""
    if result is None:
        return "no such result"
    if result.server_state == ServerState.OVER:
        if result.outcome not in LATE_OUTCOMES:
            return f"already reported (outcome {Outcome(result.outcome).name})"
    elif result.server_state != ServerState.IN_PROGRESS:
        return "this result was never sent"
    if result.received_time:
        return "already reported"
    if result.host_id != host.pk and (result.host is None or result.host.owner_id != host.owner_id):
        return "this result was sent to another host"
    return ""


def output_files(result: Result, report: ReportedResult) -> tuple[list[tuple[File, bytes | None]], str]:
    """The File rows (with their contents) for ``report``'s outputs, or a rejection reason."""
    prefix = f"{result.name}_r{result.random}_"
    outputs = []
    for out in report.output_files:
        if not out.name.startswith(prefix) or not out.name[len(prefix) :].isdigit():
            return [], f"output file {out.name} does not belong to this result"
        nbytes, md5 = out.nbytes, out.md5_cksum
        if out.data is not None:
            actual_md5 = hashlib.md5(out.data).hexdigest()
            if md5 and md5 != actual_md5:
                return [], f"output file {out.name} does not match its md5_cksum"
            if nbytes and nbytes != len(out.data):
                return [], f"output file {out.name} is not {nbytes} bytes long"
            nbytes, md5 = len(out.data), actual_md5
        if out.error_msg:
            continue
        outputs.append(
            (
                File(
                    project_id=result.project_id,
                    name=out.name,
                    kind=File.Kind.OUTPUT,
                    result=result,
                    nbytes=nbytes,
                    max_nbytes=out.max_nbytes,
                    md5_cksum=md5,
                ),
                out.data,
            )
        )
    return outputs, ""


def receive(result: Result, report: ReportedResult, host: Host, *, now: int) -> list[Event]:
    """Set the fields of an accepted result (§3.5 steps 3-4); return its events."""
    old_state, old_outcome = result.server_state, result.outcome
    result.host_id = host.pk
    result.server_state = ServerState.OVER
    result.received_time = now
    result.client_state = report.client_state
    result.exit_status = report.exit_status
    result.elapsed_time, result.cpu_time = sanitised_times(report, result, host, now=now)
    result.stderr_out = report.stderr_out
    success = report.client_state == ClientState.FILES_UPLOADED and report.exit_status == 0
    late = " (late)" if old_state == ServerState.OVER else ""
    events = []
    if old_state != ServerState.OVER:
        events.append(result_event(result, now, "server_state", old_state, ServerState.OVER, "reported by the host"))
    elif result.file_delete_state != FileDeleteState.INIT:
        events.append(
            result_event(
                result,
                now,
                "file_delete_state",
                result.file_delete_state,
                FileDeleteState.INIT,
                "reported late, with new outputs",
            )
        )
        result.file_delete_state = FileDeleteState.INIT
    if success:
        result.outcome = Outcome.SUCCESS
        events.append(
            result_event(
                result, now, "outcome", old_outcome, Outcome.SUCCESS, f"output uploaded and exit status 0{late}"
            )
        )
    else:
        result.outcome = Outcome.CLIENT_ERROR
        result.validate_state = ValidateState.INVALID
        why = f"client state {ClientState(report.client_state).name}, exit status {report.exit_status}{late}"
        events.append(result_event(result, now, "outcome", old_outcome, Outcome.CLIENT_ERROR, why))
        events.append(
            result_event(result, now, "validate_state", ValidateState.INIT, ValidateState.INVALID, "client error")
        )
    return events


def result_event(result: Result, now: int, field: str, old: int | None, new: int | None, reason: str) -> Event:
    return event(
        time=now,
        actor=ACTOR,
        result_id=result.pk,
        workunit_id=result.workunit_id,
        field=field,
        old=old,
        new=new,
        reason=reason,
    )


def single_threaded(version: AppVersion) -> bool:
    """BOINC's ``!is_multithread()``: a plan class without "mt"; we also take an app version
    using more than one CPU on average as multithreaded."""
    return "mt" not in version.plan_class and version.avg_ncpus <= 1


def sanitised_times(report: ReportedResult, result: Result, host: Host, *, now: int) -> tuple[float, float]:
    """``(elapsed, cpu)`` of a report, sanitised as §3.5 step 3 says, in BOINC's order."""
    cpu = max(report.final_cpu_time, 0.0)
    elapsed = report.final_elapsed_time
    # clients that report a tiny elapsed time but the real CPU time
    if elapsed < cpu and result.app_version is not None and single_threaded(result.app_version):
        elapsed = cpu
    if elapsed < 0:
        elapsed = 0.0
    if elapsed == 0 and cpu > 0:
        elapsed = cpu
    turnaround = now - result.sent_time
    if result.sent_time and turnaround >= 0 and elapsed > turnaround:
        elapsed = float(turnaround)
    if cpu > elapsed * host.p_ncpus:
        cpu = elapsed * host.p_ncpus
    return float(elapsed), float(cpu)


def store_output_files(host: Host, files: Sequence[tuple[File, bytes | None]]) -> None:
    """Write uploaded contents to the upload directory of the host's project and record the
    File rows."""
    written = [(row, data) for row, data in files if data is not None]
    if written:
        write_files((upload_path(host.project, row.name), data) for row, data in written)
    File.objects.bulk_create([row for row, _ in files], ignore_conflicts=True)
