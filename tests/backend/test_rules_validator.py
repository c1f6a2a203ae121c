"""The validator's consensus and credit, each expectation read off BOINC's
sched/validate_util2.cpp check_set (no decision under min_quorum good results; the first
result, in order, that matches at least ``min_quorum / 2 + 1`` results, itself included, is
canonical; the results it matches are VALID, the others INVALID) and sched/validator.cpp
(max_granted_credit 200 x 1000 x 365) with sched/credit.cpp's COBBLESTONE_SCALE
(200 / 86400e9 credit per FLOP)."""

from types import SimpleNamespace

import pytest

from backend.daemons import validator
from tests.factories import demo_project


class Outputs:
    """A checker over results whose output is a letter: equal letters match."""

    def compare(self, a, b):
        return a.output == b.output


def results(letters):
    return [SimpleNamespace(pk=i + 1, output=letter) for i, letter in enumerate(letters)]


@pytest.mark.parametrize(
    "letters, quorum, expected",
    [
        ("A", 1, (1, {1})),
        ("AA", 2, (1, {1, 2})),
        ("AB", 2, None),  # 2 needed, each matches only itself
        ("AAB", 3, (1, {1, 2})),  # 3 // 2 + 1 = 2
        ("BAA", 3, (2, {2, 3})),  # the first result that has a majority
        ("ABC", 3, None),
        ("AABB", 4, None),  # 4 // 2 + 1 = 3
        ("ABAA", 4, (1, {1, 3, 4})),
        ("AAAB", 5, None),  # fewer good results than the quorum: no decision
        ("AB", 1, (1, {1})),  # a quorum of 1 takes the first
    ],
)
def test_the_canonical_result_is_the_first_matching_a_majority_of_the_quorum(letters, quorum, expected):
    assert validator.consensus(results(letters), quorum, Outputs()) == expected


@pytest.mark.parametrize(
    "fpops, credit",
    [
        (86400e9, 200.0),
        (0.0, 0.0),
        (86400e9 * 1000 * 365, 200 * 1000 * 365),
        (86400e9 * 1000 * 365 * 1.5, 200 * 1000 * 365),
    ],
)
def test_the_credit_of_a_workunit_is_its_flops_in_cobblestones_capped(fpops, credit):
    assert validator.credit_for(SimpleNamespace(rsc_fpops_est=fpops)) == pytest.approx(credit)


def test_the_turnaround_average_weighs_a_new_sample_three_tenths():
    # sched_util.cpp compute_avg_turnaround: the first sample whole, then 0.7 old + 0.3 new
    assert validator.avg_turnaround(0.0, 500.0) == 500.0
    assert validator.avg_turnaround(1000.0, 2000.0) == pytest.approx(1300.0)


DAY = 86400
HALF_LIFE = 7 * DAY


def test_recent_average_credit_decays_with_a_week_half_life():
    # lib/util.cpp update_average: a week later the old average is halved, and the new work
    # enters as work per day over the week times (1 - the weight)
    avg, t = validator.update_average(HALF_LIFE, 0, 700.0, 100.0, 1.0)
    assert t == HALF_LIFE
    assert avg == pytest.approx(100.0 * 0.5 + 0.5 * 700.0 / ((HALF_LIFE - 1) / DAY))


def test_the_first_credit_averages_over_the_days_since_the_work_started():
    avg, t = validator.update_average(3 * DAY, DAY, 100.0, 0.0, 0)
    assert (avg, t) == (pytest.approx(50.0), 3 * DAY)


def test_a_first_credit_for_work_started_now_takes_the_limit_of_back_to_back_updates():
    import math

    avg, _ = validator.update_average(DAY, DAY, 100.0, 0.0, 0)
    assert avg == pytest.approx(math.log(2) * 100.0 * DAY / HALF_LIFE)
    avg, _ = validator.update_average(DAY, DAY - 10, 100.0, 40.0, DAY)  # no time since
    assert avg == pytest.approx(40.0 + math.log(2) * 100.0 * DAY / HALF_LIFE)


def test_no_work_leaves_a_fresh_average_at_zero():
    assert validator.update_average(DAY, 0, 0.0, 0.0, 0) == (0.0, DAY)


def test_a_late_result_that_cannot_be_read_now_is_retried_later(project):
    # validator.cpp handle_wu with a canonical result: a transient error in check_pair
    # leaves the result as it is and retries the workunit later (6 hours)
    from backend.daemons.hierarchy import upload_path
    from backend.models import Outcome, ServerState, ValidateState, Workunit
    from tests.factories import NOW, FileFactory

    project.app.validator = "numeric"
    project.app.save()
    wu = project.workunit(need_validate=True, transition_time=NOW + 10**6)
    canonical = project.result(
        wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS, validate_state=ValidateState.VALID
    )
    late = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
    for r in (canonical, late):
        FileFactory(result=r)
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=canonical)
    assert not upload_path(demo_project(), "x").parent.exists()  # the upload directory is away
    validator.run_once(project=demo_project(), now=NOW, batch_size=10)
    wu.refresh_from_db()
    late.refresh_from_db()
    assert (late.validate_state, late.outcome) == (ValidateState.INIT, Outcome.SUCCESS)
    assert (wu.need_validate, wu.transition_time) == (False, NOW + validator.RETRY_DELAY)
