"""Admin actions on sets of workunits, as BOINC's ops tools do them; each writes lifecycle events.

Each action is set-based (a few UPDATEs whatever the number of workunits) and compare-and-set:
it locks the rows it read (PostgreSQL) and every UPDATE repeats the precondition, so a daemon
that moved a row meanwhile is neither overwritten nor given an event for a change not made.
"""

from collections.abc import Iterable

from django.db import transaction
from django.db.models import F
from django.db.models.lookups import Exact

from backend.events import event, record
from backend.models import AssimilateState, ErrorMask, Outcome, Project, Result, ServerState, ValidateState, Workunit

CANCELLED = ErrorMask.CANCELLED.value


def _not_cancelled() -> Exact:
    return Exact(F("error_mask").bitand(CANCELLED), 0)


@transaction.atomic
def cancel_workunits(ids: Iterable[int], *, now: int, actor: str, project: Project) -> int:
    """BOINC's cancel_jobs (tools/backend_lib.cpp, reference/server.md §1.6, §2): error_mask |=
    CANCELLED and transition_time = now on each workunit not cancelled yet; its unsent results
    become OVER/DIDNT_NEED. Only workunits of ``project`` are touched. Returns the number of workunits cancelled."""
    wus = list(
        Workunit.objects.select_for_update()
        .filter(_not_cancelled(), project=project, id__in=ids)
        .values_list("id", "error_mask")
    )
    wu_ids = [pk for pk, _ in wus]
    cancelled = Workunit.objects.filter(_not_cancelled(), id__in=wu_ids).update(
        error_mask=F("error_mask").bitor(CANCELLED), transition_time=now
    )
    results = list(
        Result.objects.select_for_update()
        .filter(workunit_id__in=wu_ids, server_state__lte=ServerState.UNSENT)
        .values_list("id", "workunit_id", "server_state")
    )
    Result.objects.filter(id__in=[r[0] for r in results], server_state__lte=ServerState.UNSENT).update(
        server_state=ServerState.OVER, outcome=Outcome.DIDNT_NEED
    )
    reason = f"cancelled by {actor}"
    events = [
        event(time=now, actor=actor, workunit_id=pk, field="error_mask", old=mask, new=mask | CANCELLED, reason=reason)
        for pk, mask in wus
    ]
    for pk, wu_id, server_state in results:
        events.append(
            event(
                time=now,
                actor=actor,
                workunit_id=wu_id,
                result_id=pk,
                field="server_state",
                old=server_state,
                new=ServerState.OVER,
                reason=reason,
            )
        )
        events.append(
            event(
                time=now,
                actor=actor,
                workunit_id=wu_id,
                result_id=pk,
                field="outcome",
                old=Outcome.INIT,
                new=Outcome.DIDNT_NEED,
                reason=reason,
            )
        )
    record(events, project.pk)
    return cancelled


@transaction.atomic
def transition_now(ids: Iterable[int], *, now: int, actor: str, project: Project) -> int:
    """transition_time = now, so the transitioner examines the workunits on its next pass
    (the universal trigger of reference/server.md §5.1); ``project``'s workunits only. Returns how many moved."""
    wus = list(
        Workunit.objects.select_for_update()
        .filter(project=project, id__in=ids, transition_time__gt=now)
        .values_list("id", "transition_time")
    )
    moved = Workunit.objects.filter(id__in=[pk for pk, _ in wus], transition_time__gt=now).update(transition_time=now)
    record(
        [
            event(
                time=now,
                actor=actor,
                workunit_id=pk,
                field="transition_time",
                old=old,
                new=now,
                reason=f"transition requested by {actor}",
            )
            for pk, old in wus
        ],
        project.pk,
    )
    return moved


@transaction.atomic
def revalidate_workunits(ids: Iterable[int], *, now: int, actor: str, project: Project) -> int:
    """Send workunits back to the validator: on each workunit with no error, no canonical result
    and not yet assimilated, SUCCESS results judged INVALID or INCONCLUSIVE return to INIT,
    and need_validate = 1 with transition_time = now; ``project``'s workunits only. Returns the number of workunits."""
    eligible = dict(
        Workunit.objects.select_for_update()
        .filter(
            project=project,
            id__in=ids,
            error_mask=0,
            canonical_result__isnull=True,
            assimilate_state=AssimilateState.INIT,
        )
        .values_list("id", "need_validate")
    )
    judged = [ValidateState.INVALID, ValidateState.INCONCLUSIVE]
    results = list(
        Result.objects.select_for_update()
        .filter(
            workunit_id__in=eligible, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, validate_state__in=judged
        )
        .values_list("id", "workunit_id", "validate_state")
    )
    Result.objects.filter(id__in=[r[0] for r in results], validate_state__in=judged).update(
        validate_state=ValidateState.INIT
    )
    count = Workunit.objects.filter(id__in=eligible, error_mask=0, assimilate_state=AssimilateState.INIT).update(
        need_validate=True, transition_time=now
    )
    reason = f"re-validation requested by {actor}"
    events = [
        event(time=now, actor=actor, workunit_id=pk, field="need_validate", old=int(flag), new=1, reason=reason)
        for pk, flag in eligible.items()
        if not flag
    ]
    events += [
        event(
            time=now,
            actor=actor,
            workunit_id=wu_id,
            result_id=pk,
            field="validate_state",
            old=state,
            new=ValidateState.INIT,
            reason=reason,
        )
        for pk, wu_id, state in results
    ]
    record(events, project.pk)
    return count


# name -> (function, verb for the confirmation page, what it does)
ACTIONS = {
    "cancel": (
        cancel_workunits,
        "Cancel",
        "sets the CANCELLED error bit and marks unsent results DIDNT_NEED; "
        "results already in progress are left as they are",
    ),
    "transition": (
        transition_now,
        "Transition now",
        "sets transition_time to now so the transitioner looks at them on its next pass",
    ),
    "revalidate": (
        revalidate_workunits,
        "Re-validate",
        "puts INVALID and INCONCLUSIVE success results back to INIT and sets "
        "need_validate, for workunits without a canonical result or error",
    ),
}
