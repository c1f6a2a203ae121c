"""Transitioner rules where one workunit's decision must not leak into another's rows,
each expectation read off BOINC's sched/transitioner.cpp handle_wu, which writes each result
of the workunit it handles by id (a SUCCESS result INIT after the canonical result's files
are deleted becomes VALIDATE_STATE_TOO_LATE; results past their deadline become NO_REPLY)."""

from backend.daemons import transitioner
from backend.models import (
    FileDeleteState,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.factories import NOW, demo_project


def test_too_late_and_timed_out_touch_only_the_due_workunits_results(project):
    done = project.workunit(transition_time=NOW - 10, max_total_results=4)
    canonical = project.result(
        done,
        server_state=ServerState.OVER,
        outcome=Outcome.SUCCESS,
        validate_state=ValidateState.VALID,
        file_delete_state=FileDeleteState.DONE,
    )
    Workunit.objects.filter(pk=done.pk).update(canonical_result=canonical)
    late = project.result(done, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, report_deadline=NOW + 3600)
    expired = project.result(done, server_state=ServerState.IN_PROGRESS, report_deadline=NOW - 1)
    # another workunit, not due: its results wait as they are
    waiting = project.workunit(transition_time=NOW + 10**6)
    unchecked = project.result(waiting, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
    overdue = project.result(waiting, server_state=ServerState.IN_PROGRESS, report_deadline=NOW - 1)
    assert transitioner.run_once(project=demo_project(), now=NOW, batch_size=10) == 1
    got = {r.pk: (r.server_state, r.outcome, r.validate_state) for r in Result.objects.all()}
    assert got[late.pk][2] == ValidateState.TOO_LATE
    assert got[expired.pk][:2] == (ServerState.OVER, Outcome.NO_REPLY)
    assert got[unchecked.pk] == (ServerState.OVER, Outcome.SUCCESS, ValidateState.INIT)
    assert got[overdue.pk][:2] == (ServerState.IN_PROGRESS, Outcome.INIT)
