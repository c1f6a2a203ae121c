"""The assimilator's rules, each expectation read off BOINC's sched/assimilator.cpp
(assimilate_handler is called with the workunit as the daemon sees it; a workunit READY
without a canonical result or any error gets WU_ERROR_NO_CANONICAL_RESULT before the handler
runs; assimilate_state DONE and transition_time = now after it)."""

from backend.daemons import assimilator
from backend.models import (
    AssimilatedResult,
    AssimilateState,
    ErrorMask,
    Outcome,
    ServerState,
    Workunit,
)
from tests.factories import NOW, demo_project


def test_a_workunit_without_a_canonical_result_is_assimilated_with_that_error(project):
    wu = project.workunit(assimilate_state=AssimilateState.READY)
    others = [project.workunit(), project.workunit(assimilate_state=AssimilateState.DONE)]
    assert assimilator.run_once(project=demo_project(), now=NOW, batch_size=10) == 1
    wu.refresh_from_db()
    assert (wu.error_mask, wu.assimilate_state) == (ErrorMask.NO_CANONICAL_RESULT, AssimilateState.DONE)
    # the handler saw the error: what it recorded says so
    assert AssimilatedResult.objects.get(workunit=wu).error_mask == ErrorMask.NO_CANONICAL_RESULT
    # and no other workunit was touched
    assert [w.error_mask for w in Workunit.objects.filter(pk__in=[o.pk for o in others])] == [0, 0]
    assert [w.assimilate_state for w in Workunit.objects.filter(pk__in=[o.pk for o in others]).order_by("id")] == [
        AssimilateState.INIT,
        AssimilateState.DONE,
    ]


def test_a_workunit_with_an_error_keeps_its_own_error(project):
    wu = project.workunit(assimilate_state=AssimilateState.READY, error_mask=ErrorMask.TOO_MANY_ERROR_RESULTS)
    assimilator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    assert wu.error_mask == ErrorMask.TOO_MANY_ERROR_RESULTS
    assert AssimilatedResult.objects.get(workunit=wu).error_mask == (ErrorMask.TOO_MANY_ERROR_RESULTS)


def test_the_canonical_result_and_its_output_are_recorded(project):
    wu = project.workunit(assimilate_state=AssimilateState.READY)
    canonical = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=canonical)
    assimilator.run_once(project=demo_project(), now=NOW, batch_size=10)
    row = AssimilatedResult.objects.get(workunit=wu)
    assert (row.canonical_result_id, row.error_mask, row.time) == (canonical.pk, 0, NOW)
    assert Workunit.objects.get(pk=wu.pk).error_mask == 0
