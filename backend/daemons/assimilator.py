"""The assimilator (reference/server.md §3.8: sched/assimilator.cpp).

A pass claims workunits with assimilate_state READY (row locks, SKIP LOCKED on PostgreSQL),
reads their canonical results and output files, and calls the app's handler
(``App.assimilator``, a name in ``HANDLERS``; ``register`` adds one) with
``(workunit, canonical_result or None, output files)``. Following BOINC's code:

- a workunit READY without a canonical result and without any error gets
  WU_ERROR_NO_CANONICAL_RESULT ("result records got deleted prematurely");
- the handler returning ``DEFER_ASSIMILATION`` sends the workunit back to assimilate_state
  INIT (the transitioner makes it READY again once all results are over and validated);
  returning None (or 0, BOINC's success) or an AssimilatedResult row makes it DONE;
- either way transition_time = now, so the transitioner schedules file deletion; written as
  ``min(transition_time, now)`` so that a workunit already due is never postponed (a result
  past its deadline must be timed out by the next transitioner pass, whatever its clock);
- a handler that raises, or returns anything else (BOINC's non-zero error return), stops the
  pass and rolls it back (BOINC's assimilator exits; we raise ``HandlerError`` naming the
  handler, the workunit and the value), so a broken handler halts the pipeline instead of
  skipping work.

The default handler, ``record``, copies the canonical output to
``<data dir>/assimilated/<app>/<workunit>`` and returns an AssimilatedResult row (canonical
result, error mask, checksum, size, path); the pass inserts the rows in one statement, and the
table's one-row-per-workunit constraint makes a workunit assimilated exactly once.
"""

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Least

from backend.daemons.claim import claim
from backend.daemons.hierarchy import assimilated_path, in_parallel, upload_path
from backend.daemons.id_sets import ids_in
from backend.events import event, record
from backend.models import App, AssimilatedResult, AssimilateState, ErrorMask, File, Project, Result, Workunit

ACTOR = "assimilator"
DEFER_ASSIMILATION = "defer"


class HandlerError(RuntimeError):
    """An assimilate handler returned an error: the pass is rolled back."""


def outcome_of(name: str, wu: Workunit, value: Any) -> str | AssimilatedResult | None:
    """``DEFER_ASSIMILATION``, or None / the AssimilatedResult for DONE; raises HandlerError
    for any other value, an error return."""
    if value == DEFER_ASSIMILATION or value is None or isinstance(value, AssimilatedResult):
        return value
    if type(value) is int and value == 0:
        return None
    raise HandlerError(
        f"assimilate handler {name!r} returned {value!r} for workunit {wu.name}; nothing was assimilated in this pass"
    )


def output_row(
    wu: Workunit, canonical_id: int | None, files: Sequence[File], *, now: int
) -> tuple[AssimilatedResult, tuple[Path, Path] | None]:
    """The default handler's row for ``wu`` (whose canonical result has the id
    ``canonical_id``), and the copy it keeps of the canonical output, ``(source, target)``,
    if there is an output."""
    row = AssimilatedResult(
        project_id=wu.project_id,
        workunit=wu,
        app_id=wu.app_id,
        canonical_result_id=canonical_id,
        error_mask=wu.error_mask,
        time=now,
    )
    if not files:
        return row, None
    first = files[0]
    row.output_md5, row.output_nbytes = first.md5_cksum, first.nbytes
    return row, (upload_path(wu.project, first.name), assimilated_path(wu.project, wu.app.name, wu.name))


def copy_output(row: AssimilatedResult, source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` and name the copy in ``row``; nothing if ``source`` is
    gone. The target's directory is made when a copy first finds it missing."""
    try:
        shutil.copyfile(source, target)
    except FileNotFoundError:
        if not source.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    row.path = str(target)


def record_output(wu: Workunit, canonical: Result | None, files: Sequence[File], *, now: int) -> AssimilatedResult:
    """The default handler: keep a copy of the canonical output and a row describing it.
    ``run_once`` does the same for its workunits, their copies made on a few threads."""
    row, copy = output_row(wu, None if canonical is None else canonical.pk, files, now=now)
    if copy is not None:
        copy_output(row, *copy)
    return row


HANDLERS: dict[str, Callable[..., object]] = {"record": record_output}


def register(name: str, handler: Callable[..., object]) -> None:
    """Make ``App.assimilator = name`` call ``handler(wu, canonical, files, now=...)``."""
    HANDLERS[name] = handler


def run_once(
    *, project: Project, now: int, batch_size: int, mod: int = 1, index: int = 0, keep_due_workunits: bool = True
) -> int:
    """One pass over ``project``'s workunits READY to assimilate; returns how many were handled.

    ``keep_due_workunits`` (SchedulerConfig's): write min(transition_time, now), or, off,
    ``now`` as BOINC does."""
    with transaction.atomic():
        wus = claim(
            Workunit.objects.filter(project=project).ready_to_assimilate(),
            batch_size,
            mod=mod,
            index=index,
        )
        if not wus:
            return 0
        # the apps, read once; the canonical results only for the handlers that are given
        # them (the default one needs their ids)
        apps = App.objects.in_bulk({wu.app_id for wu in wus})
        custom = [wu for wu in wus if HANDLERS[apps[wu.app_id].assimilator] is not record_output]
        canonicals = Result.objects.in_bulk([wu.canonical_result_id for wu in custom if wu.canonical_result_id])
        files: dict[int | None, list[File]] = {}
        canonical_ids = [wu.canonical_result_id for wu in wus if wu.canonical_result_id]
        for f in File.objects.filter(ids_in(File, "result", canonical_ids)).order_by("name"):
            files.setdefault(f.result_id, []).append(f)
        rows, done, deferred, no_canonical, events = [], [], [], [], []
        copies: list[tuple[AssimilatedResult, Path, Path]] = []
        for wu in wus:
            wu.project = project  # the handler's files are in the project's directories
            wu.app = apps[wu.app_id]
            if wu.canonical_result_id is None and not wu.error_mask:
                wu.error_mask = ErrorMask.NO_CANONICAL_RESULT
                no_canonical.append(wu.pk)
                events.append(
                    event(
                        time=now,
                        actor=ACTOR,
                        workunit_id=wu.pk,
                        field="error_mask",
                        old=0,
                        new=wu.error_mask,
                        reason="no canonical result",
                    )
                )
            handler = wu.app.assimilator
            function = HANDLERS[handler]
            outputs = files.get(wu.canonical_result_id, [])
            outcome: str | AssimilatedResult | None
            if function is record_output:
                outcome, copy = output_row(wu, wu.canonical_result_id, outputs, now=now)
                if copy is not None:
                    copies.append((outcome, *copy))
            else:
                canonical = canonicals.get(wu.canonical_result_id) if wu.canonical_result_id else None
                wu.canonical_result = canonical
                outcome = outcome_of(handler, wu, function(wu, canonical, outputs, now=now))
            if outcome == DEFER_ASSIMILATION:
                deferred.append(wu.pk)
                new, reason = AssimilateState.INIT, "handler deferred assimilation"
            else:
                done.append(wu.pk)
                if isinstance(outcome, AssimilatedResult):
                    rows.append(outcome)
                new, reason = AssimilateState.DONE, "assimilated"
            events.append(
                event(
                    time=now,
                    actor=ACTOR,
                    workunit_id=wu.pk,
                    field="assimilate_state",
                    old=AssimilateState.READY,
                    new=new,
                    reason=reason,
                )
            )
        in_parallel(lambda copy: copy_output(*copy), copies)
        if no_canonical:
            Workunit.objects.filter(id__in=no_canonical, error_mask=0).update(error_mask=ErrorMask.NO_CANONICAL_RESULT)
        for ids, state in ((done, AssimilateState.DONE), (deferred, AssimilateState.INIT)):
            if ids:
                Workunit.objects.filter(ids_in(Workunit, "id", ids), assimilate_state=AssimilateState.READY).update(
                    assimilate_state=state,
                    transition_time=Least(F("transition_time"), Value(now)) if keep_due_workunits else now,
                )
        AssimilatedResult.objects.bulk_create(rows, ignore_conflicts=True)
        record(events, project.pk)
    return len(wus)
