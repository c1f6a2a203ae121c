"""The transitioner (reference/server.md §3.2: sched/transitioner.cpp handle_wu).

A pass claims up to ``batch_size`` workunits whose ``transition_time < now`` (row locks with
SKIP LOCKED on PostgreSQL), reads all their results in one query, runs ``handle_wu`` on each in
memory, and writes the changes back in set updates and one multi-row INSERT.

``handle_wu`` does §3.2's steps in order, following BOINC's code where the seed's pseudo-code
differs (§4):

1. find the canonical result and whether its files are already deleted;
2. count the results: INACTIVE counts as unsent; IN_PROGRESS past report_deadline becomes
   OVER/NO_REPLY here, and its host app version is penalised (``result_timed_out``: quota - 1,
   consecutive_valid 0, delay_bound as a turnaround sample; ``backend.daemons.host_app_version``,
   written last in the pass, in one locked read and one write); SUCCESS counts unless INVALID,
   and a SUCCESS still INIT is new to validate, or TOO_LATE when the canonical files are gone;
   CLIENT_ERROR and VALIDATE_ERROR are errors, except a user abort (EXIT_ABORTED_VIA_GUI) which
   counts as no reply; NO_REPLY and CLIENT_DETACHED are never errors;
3. ``need_validate`` when a new SUCCESS result is there and nsuccess >= min_quorum;
4. error bits, with BOINC's strict comparisons: COULDNT_SEND_RESULT if any result couldn't be
   sent; TOO_MANY_ERROR_RESULTS if nerrors > max_error_results; TOO_MANY_TOTAL_RESULTS if more
   results are needed (target - unsent - in progress - success) but max_total_results allows
   none; hr_class/app_version reset when only errors remain;
5. on an error: unsent results -> OVER/DIDNT_NEED, SUCCESS results INIT or INCONCLUSIVE ->
   NO_CHECK, assimilate_state INIT -> READY;
6. otherwise, with no canonical result, the ``needed`` new results (never more than
   max_total_results allows; none after a canonical result), suffixes after the largest;
7–8. deferred assimilation: READY once all results are over and none is unvalidated;
9. once assimilated and ``app.delete_delay`` after the latest report: input files READY when
   all results are over and validated; outputs READY for client errors and validated successes,
   the canonical output only once all results are over and validated. BOINC leaves on disk for
   ever whatever VALIDATE_ERROR results uploaded, and what NO_REPLY and CLIENT_DETACHED
   results did (an upload the client abandoned, ``.NAME.part``, or outputs it uploaded but
   never reported), and so do we by default; ``delete_abandoned_outputs`` (an option of
   SchedulerConfig, off as in BOINC) deletes those too, as for a client error. Should such a
   result still be reported late, the scheduler puts its file_delete_state back to INIT, so
   its new outputs are deleted in turn.
10. next transition_time: INT_MAX with a canonical result or an error, else the safety net
    ``now + max(1.5 × delay_bound, 10 days)``; lowered to the earliest in-progress deadline and
    to the deferred deletion time. (BOINC's back-off for a next time already in the past,
    ``now + clamp(2 × lag, 60 s, 1 d)``, cannot arise, in BOINC's code as here: one ``now``
    serves the whole of handle_wu, results IN_PROGRESS past it are timed out before the
    minimum is taken, a deferred deletion time is only kept while ``now`` is before it, and the
    safety net is in the future. A pass whose ``now`` lags the clock computes from that ``now``
    alike. tests/backend/test_transitioner.py checks the invariant on random workunits.)
11. written compare-and-set: where someone changed transition_time since we read it, it
    becomes ``now`` so the workunit is looked at again (BOINC PR #3603).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from django.db import connection, transaction
from django.db.models import Field

from backend.daemons import host_app_version, sched_hr, sched_reliable
from backend.daemons.claim import claim, compare_and_set, insert_rows, preparer
from backend.daemons.id_sets import ids_in
from backend.daemons.sched_types import DAILY_RESULT_QUOTA
from backend.events import Event, event, record
from backend.models import (
    EXIT_ABORTED_VIA_GUI,
    INT_MAX,
    App,
    AssimilateState,
    ErrorMask,
    FileDeleteState,
    HostAppVersion,
    Outcome,
    Project,
    Result,
    ServerState,
    TransitionerFlags,
    ValidateState,
    Workunit,
    name_random,
)

ACTOR = "transitioner"
SAFETY_NET_MIN = 10 * 86400
RESULT_FIELDS = (
    "id",
    "workunit",
    "name",
    "server_state",
    "outcome",
    "validate_state",
    "file_delete_state",
    "report_deadline",
    "received_time",
    "exit_status",
    "host",
    "app_version",
)
# Outcomes whose outputs are deleted once the workunit is assimilated: BOINC's (transitioner.cpp:
# "output of error results can be deleted immediately"), and with
# ``SchedulerConfig.delete_abandoned_outputs`` every outcome of a result that was sent and may
# have left files in the upload directory (SUCCESS results are deleted once validated).
ERROR_OUTPUTS = (Outcome.CLIENT_ERROR,)
MAY_HAVE_FILES = (Outcome.CLIENT_ERROR, Outcome.VALIDATE_ERROR, Outcome.NO_REPLY, Outcome.CLIENT_DETACHED)
WU_FIELDS = (
    "need_validate",
    "error_mask",
    "assimilate_state",
    "file_delete_state",
    "hr_class",
    "app_version",
    "awaiting_results",
)
# what handle_wu reads of a workunit besides WU_FIELDS (sched_hr.uncommit: hr_class and
# app_version): a pass reads these columns only
WU_READ = (
    *WU_FIELDS,
    "id",
    "project",
    "app",
    "name",
    "canonical_result",
    "transition_time",
    "delay_bound",
    "priority",
    "min_quorum",
    "target_nresults",
    "max_error_results",
    "max_total_results",
    "transitioner_flags",
)


@dataclass
class Changes:
    """What a pass will write, collected over all its workunits."""

    now: int
    project_id: int
    daily_result_quota: int = DAILY_RESULT_QUOTA
    delete_abandoned_outputs: bool = False
    hr_class_static: bool = False
    reliable_priority_on_over: int = 0
    reliable_priority_on_over_except_error: int = 0
    timed_out: list[Result] = field(default_factory=list)
    too_late: list[Result] = field(default_factory=list)
    didnt_need: list[Result] = field(default_factory=list)
    no_check: list[tuple[Result, int]] = field(default_factory=list)  # (result, old validate_state)
    delete_outputs: list[Result] = field(default_factory=list)
    new_results: list[Result] = field(default_factory=list)
    workunits: list[Workunit] = field(default_factory=list)
    transition_times: dict[int, tuple[int, int]] = field(default_factory=dict)
    host_app_versions: list[tuple[int | None, int | None, Callable[[HostAppVersion], None]]] = field(
        default_factory=list
    )
    events: list[Event] = field(default_factory=list)

    def wu_event(self, wu: Workunit, name: str, old: int | None, new: int | None, reason: str) -> None:
        self.events.append(
            event(time=self.now, actor=ACTOR, workunit_id=wu.pk, field=name, old=old, new=new, reason=reason)
        )

    def result_event(self, result: Result, name: str, old: int | None, new: int | None, reason: str) -> None:
        self.events.append(
            event(
                time=self.now,
                actor=ACTOR,
                result_id=result.pk,
                workunit_id=result.workunit_id,
                field=name,
                old=old,
                new=new,
                reason=reason,
            )
        )


def name_suffix(name: str) -> int:
    tail = name.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def handle_wu(wu: Workunit, results: Sequence[Result], changes: Changes, *, delete_delay: int) -> None:
    """Decide one workunit's transitions (§3.2 steps 1-10), recording them in ``changes``."""
    now = changes.now
    old = {name: getattr(wu, name if name != "app_version" else "app_version_id") for name in WU_FIELDS}
    made_before = len(changes.new_results)
    # step 1
    canonical = next((r for r in results if r.pk == wu.canonical_result_id), None)
    canonical_files_deleted = canonical is not None and canonical.file_delete_state == FileDeleteState.DONE
    # step 2
    nunsent = ninprogress = nsuccess = nerrors = ncouldnt_send = nno_reply = 0
    max_suffix = -1
    new_to_validate = False
    for r in results:
        max_suffix = max(max_suffix, name_suffix(r.name))
        if r.server_state <= ServerState.UNSENT:
            nunsent += 1
            continue
        if r.server_state == ServerState.IN_PROGRESS:
            if r.report_deadline >= now:
                ninprogress += 1
                continue
            r.server_state, r.outcome = ServerState.OVER, Outcome.NO_REPLY
            changes.timed_out.append(r)
            changes.host_app_versions.append(
                (
                    r.host_id,
                    r.app_version_id,
                    partial(host_app_version.timed_out, quota=changes.daily_result_quota, delay_bound=wu.delay_bound),
                )
            )
        if r.outcome == Outcome.COULDNT_SEND:
            ncouldnt_send += 1
        elif r.outcome == Outcome.SUCCESS:
            if r.validate_state == ValidateState.INIT:
                if canonical_files_deleted:
                    r.validate_state = ValidateState.TOO_LATE
                    changes.too_late.append(r)
                else:
                    new_to_validate = True
            if r.validate_state != ValidateState.INVALID:
                nsuccess += 1
        elif r.outcome == Outcome.CLIENT_ERROR:
            if r.exit_status == EXIT_ABORTED_VIA_GUI:
                nno_reply += 1
            else:
                nerrors += 1
        elif r.outcome == Outcome.VALIDATE_ERROR:
            nerrors += 1
        elif r.outcome in (Outcome.NO_REPLY, Outcome.CLIENT_DETACHED):
            nno_reply += 1
    # step 3
    if new_to_validate and nsuccess >= wu.min_quorum:
        wu.need_validate = True
    # step 4
    if ncouldnt_send:
        wu.error_mask |= ErrorMask.COULDNT_SEND_RESULT
    if nerrors and not (nsuccess or ninprogress or nno_reply) and not changes.hr_class_static:
        sched_hr.uncommit(wu, changes.wu_event)
    if nerrors > wu.max_error_results:
        wu.error_mask |= ErrorMask.TOO_MANY_ERROR_RESULTS
    needed = max(0, wu.target_nresults - nunsent - ninprogress - nsuccess)
    allowed = wu.max_total_results - len(results)
    if allowed < 0 or (allowed == 0 and needed > 0):
        wu.error_mask |= ErrorMask.TOO_MANY_TOTAL_RESULTS
    else:
        needed = min(needed, allowed)
    # step 5
    if wu.error_mask:
        for r in results:
            if r.server_state <= ServerState.UNSENT:
                r.server_state, r.outcome = ServerState.OVER, Outcome.DIDNT_NEED
                changes.didnt_need.append(r)
            elif r.outcome == Outcome.SUCCESS and r.validate_state in (ValidateState.INIT, ValidateState.INCONCLUSIVE):
                changes.no_check.append((r, r.validate_state))
                r.validate_state = ValidateState.NO_CHECK
        if wu.assimilate_state == AssimilateState.INIT:
            wu.assimilate_state = AssimilateState.READY
    # step 6
    elif canonical is None and needed > 0 and wu.transitioner_flags != TransitionerFlags.TRANSITION_NO_NEW_RESULTS:
        nover = sum(1 for r in results if r.server_state == ServerState.OVER)
        priority = wu.priority + sched_reliable.retry_priority_boost(nover, nerrors, changes)
        for suffix in range(max_suffix + 1, max_suffix + 1 + needed):
            name = f"{wu.name}_{suffix}"
            changes.new_results.append(
                Result(
                    project_id=wu.project_id,
                    workunit_id=wu.pk,
                    app_id=wu.app_id,
                    name=name,
                    create_time=now,
                    server_state=ServerState.UNSENT,
                    priority=priority,
                    random=name_random(name),
                )
            )
    # the work generator no longer waits for this workunit (work_generator.waiting_for_first_results)
    if wu.awaiting_results and (results or len(changes.new_results) > made_before):
        wu.awaiting_results = False
    # step 7
    all_over = all(r.server_state == ServerState.OVER for r in results)
    unvalidated = any(r.outcome == Outcome.SUCCESS and r.validate_state == ValidateState.INIT for r in results)
    pending_no_reply = any(r.outcome == Outcome.NO_REPLY and r.report_deadline > now for r in results)
    all_over_and_ready_to_assimilate = all_over and not unvalidated
    all_over_and_validated = all_over_and_ready_to_assimilate and not pending_no_reply
    most_recent = max((r.received_time for r in results), default=0)
    # step 8
    if all_over_and_ready_to_assimilate and wu.assimilate_state == AssimilateState.INIT and canonical is not None:
        wu.assimilate_state = AssimilateState.READY
    # step 9
    deferred_delete = None
    if wu.assimilate_state == AssimilateState.DONE:
        if now >= most_recent + delete_delay:
            if all_over_and_validated and wu.file_delete_state == FileDeleteState.INIT:
                wu.file_delete_state = FileDeleteState.READY
            for r in results:
                if r.file_delete_state != FileDeleteState.INIT:
                    continue
                if r is canonical and not all_over_and_validated:
                    continue
                deletable = MAY_HAVE_FILES if changes.delete_abandoned_outputs else ERROR_OUTPUTS
                if r.outcome in deletable or (r.outcome == Outcome.SUCCESS and r.validate_state != ValidateState.INIT):
                    r.file_delete_state = FileDeleteState.READY
                    changes.delete_outputs.append(r)
        else:
            deferred_delete = most_recent + delete_delay
    # step 10
    if wu.canonical_result_id or wu.error_mask:
        next_time = INT_MAX
    else:
        next_time = now + max(int(1.5 * wu.delay_bound), SAFETY_NET_MIN)
    for r in results:
        if r.server_state == ServerState.IN_PROGRESS:
            next_time = min(next_time, r.report_deadline)
    if deferred_delete is not None:
        next_time = min(next_time, deferred_delete)
    changes.transition_times[wu.pk] = (wu.transition_time, next_time)
    # what changed, for step 11
    new = {name: getattr(wu, name if name != "app_version" else "app_version_id") for name in WU_FIELDS}
    if new != old:
        changes.workunits.append(wu)
        for name in ("need_validate", "error_mask", "assimilate_state", "file_delete_state"):
            if new[name] != old[name]:
                reason = {"error_mask": " | ".join(ErrorMask.names(new[name]))}.get(name, "")
                changes.wu_event(wu, name, int(old[name]), int(new[name]), reason)


def update_results(
    changes: Changes,
    results: Sequence[Result],
    guard: Mapping[str, object],
    values: Mapping[str, object],
    events: Callable[[Result], Iterable[tuple[str, int, int, str]]],
) -> None:
    """Set ``values`` on ``results`` in one update, only where each is still as ``guard`` says
    (someone may have moved it on since we read it), then log ``events(result)``, its
    (field, old, new, reason) changes, for each of them."""
    if not results:
        return
    Result.objects.filter(ids_in(Result, "id", (r.pk for r in results)), **guard).update(**values)
    for r in results:
        for name, old, new, reason in events(r):
            changes.result_event(r, name, old, new, reason)


def write_workunits(changes: Changes, chunk: int = 1000) -> None:
    """The workunits' changed fields (WU_FIELDS) and every workunit's transition_time, the
    latter compare-and-set (step 11; ``claim.compare_and_set``), in one write per row: one
    UPDATE ... FROM (VALUES ...) per chunk of the changed workunits, and ``compare_and_set``
    for the rest. Two writes of a row would make PostgreSQL keep two new versions of it,
    each with its own entry in every index of the table."""
    changed = {wu.pk: wu for wu in changes.workunits}
    times = changes.transition_times
    compare_and_set(
        Workunit, "transition_time", {pk: v for pk, v in times.items() if pk not in changed}, otherwise=changes.now
    )
    if not changed:
        return
    q = connection.ops.quote_name
    meta = Workunit._meta
    table = q(meta.db_table)
    # WU_FIELDS name columns (foreign keys included), as update_rows's fields
    columns = [cast("Field[Any, Any]", meta.get_field(name)) for name in WU_FIELDS]
    time_field = cast("Field[Any, Any]", meta.get_field("transition_time"))
    n = len(columns)
    sets = [f"{q(c.column)} = v.column{i + 2}" for i, c in enumerate(columns)]
    sets.append(
        f"{q(time_field.column)} = CASE WHEN {table}.{q(time_field.column)} = v.column{n + 2}"
        f" THEN v.column{n + 3} ELSE %s END"
    )
    kinds = [meta.pk.db_type(connection), *(c.db_type(connection) for c in columns)]
    kinds += [time_field.db_type(connection)] * 2
    prepared = [(c.attname, preparer(c)) for c in columns]
    wus = list(changed.values())
    arrays = connection.vendor == "postgresql"
    if arrays:
        # one array per column: a chunk is a few parameters, not one per value, which the
        # driver would find one by one in a long statement
        names = ", ".join(f"column{i + 1}" for i in range(len(kinds)))
        source = f"unnest({', '.join(f'%s::{kind}[]' for kind in kinds)}) AS v({names})"
    else:
        row_sql = "(" + ", ".join(f"CAST(%s AS {kind})" for kind in kinds) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(wus), chunk):
            part = wus[start : start + chunk]
            rows = [[wu.pk, *(prep(getattr(wu, attname)) for attname, prep in prepared), *times[wu.pk]] for wu in part]
            if arrays:
                params: list[Any] = [changes.now, *(list(values) for values in zip(*rows, strict=True))]
            else:
                source = f"(VALUES {', '.join([row_sql] * len(part))}) AS v"
                params = [changes.now, *(value for row in rows for value in row)]
            cursor.execute(
                f"UPDATE {table} SET {', '.join(sets)} FROM {source} WHERE {table}.{q(meta.pk.column)} = v.column1",
                params,
            )


def apply(changes: Changes) -> None:
    """Write a pass's changes: set updates, one INSERT, and one write of each workunit's
    changed fields and transition_time (its CAS)."""
    update_results(
        changes,
        changes.timed_out,
        dict(server_state=ServerState.IN_PROGRESS),
        dict(server_state=ServerState.OVER, outcome=Outcome.NO_REPLY),
        lambda r: [
            ("server_state", ServerState.IN_PROGRESS, ServerState.OVER, "report deadline passed"),
            ("outcome", Outcome.INIT, Outcome.NO_REPLY, "no reply by the report deadline"),
        ],
    )
    update_results(
        changes,
        changes.too_late,
        dict(validate_state=ValidateState.INIT),
        dict(validate_state=ValidateState.TOO_LATE),
        lambda r: [
            ("validate_state", ValidateState.INIT, ValidateState.TOO_LATE, "canonical result's files are deleted")
        ],
    )
    update_results(
        changes,
        changes.didnt_need,
        dict(server_state__lte=ServerState.UNSENT),
        dict(server_state=ServerState.OVER, outcome=Outcome.DIDNT_NEED),
        lambda r: [
            ("server_state", ServerState.UNSENT, ServerState.OVER, "workunit has an error"),
            ("outcome", Outcome.INIT, Outcome.DIDNT_NEED, "workunit has an error"),
        ],
    )
    old_validate_state = {r.pk: old for r, old in changes.no_check}
    update_results(
        changes,
        [r for r, _ in changes.no_check],
        dict(validate_state__in=[ValidateState.INIT, ValidateState.INCONCLUSIVE]),
        dict(validate_state=ValidateState.NO_CHECK),
        lambda r: [("validate_state", old_validate_state[r.pk], ValidateState.NO_CHECK, "workunit has an error")],
    )
    update_results(
        changes,
        changes.delete_outputs,
        dict(file_delete_state=FileDeleteState.INIT),
        dict(file_delete_state=FileDeleteState.READY),
        lambda r: [("file_delete_state", FileDeleteState.INIT, FileDeleteState.READY, "output no longer needed")],
    )
    if changes.new_results:
        created = insert_rows(Result, changes.new_results)
        for r in created:
            changes.result_event(r, "server_state", None, ServerState.UNSENT, "result created")
    write_workunits(changes)
    record(changes.events, changes.project_id)
    host_app_version.apply(changes.host_app_versions, create=True)


def run_once(
    *,
    project: Project,
    now: int,
    batch_size: int,
    mod: int = 1,
    index: int = 0,
    daily_result_quota: int = DAILY_RESULT_QUOTA,
    delete_abandoned_outputs: bool = False,
    hr_class_static: bool = False,
    reliable_priority_on_over: int = 0,
    reliable_priority_on_over_except_error: int = 0,
) -> int:
    """One pass over ``project``'s due workunits; returns how many were handled.

    ``daily_result_quota`` and ``delete_abandoned_outputs`` are the project's options
    (SchedulerConfig's): the quota for penalising timeouts, and whether outputs BOINC leaves
    on disk are deleted too (step 9); ``hr_class_static`` keeps a workunit's hr_class and
    app_version committed even when only errors remain (step 4); new results gain
    ``reliable_priority_on_over`` (or ``reliable_priority_on_over_except_error``) once the
    workunit has results over (step 6, backend.daemons.sched_reliable).
    """
    host_app_version.check_quota(daily_result_quota)
    with transaction.atomic():
        wus = claim(
            Workunit.objects.filter(project=project).transition_due(now).only(*WU_READ),
            batch_size,
            mod=mod,
            index=index,
        )
        if not wus:
            return 0
        by_wu: dict[int, list[Result]] = {wu.pk: [] for wu in wus}
        results = Result.objects.filter(ids_in(Result, "workunit", by_wu)).only(*RESULT_FIELDS)
        for r in results.order_by("workunit_id", "id"):
            by_wu[r.workunit_id].append(r)
        changes = Changes(
            now=now,
            project_id=project.pk,
            daily_result_quota=daily_result_quota,
            delete_abandoned_outputs=delete_abandoned_outputs,
            hr_class_static=hr_class_static,
            reliable_priority_on_over=reliable_priority_on_over,
            reliable_priority_on_over_except_error=(reliable_priority_on_over_except_error),
        )
        # the apps' delete_delay, read once: a pass's workunits are of a few apps
        delete_delay = dict(App.objects.filter(id__in={wu.app_id for wu in wus}).values_list("id", "delete_delay"))
        for wu in wus:
            handle_wu(wu, by_wu[wu.pk], changes, delete_delay=delete_delay[wu.app_id])
        apply(changes)
    return len(wus)
