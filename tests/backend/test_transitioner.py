"""The transitioner, one table per step of reference/server.md §3.2."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.daemons import transitioner
from backend.models import (
    INT_MAX,
    AssimilateState,
    ErrorMask,
    FileDeleteState,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    TransitionerFlags,
    ValidateState,
    Workunit,
)
from tests.factories import NOW, demo_project

pytestmark = pytest.mark.django_db

S, O, V = ServerState, Outcome, ValidateState  # noqa: E741 (the three enums by initial)
UNSENT = (S.UNSENT, O.INIT, V.INIT)
INACTIVE = (S.INACTIVE, O.INIT, V.INIT)
RUNNING = (S.IN_PROGRESS, O.INIT, V.INIT)
SUCCESS = (S.OVER, O.SUCCESS, V.INIT)
VALID = (S.OVER, O.SUCCESS, V.VALID)
INVALID = (S.OVER, O.SUCCESS, V.INVALID)
INCONCLUSIVE = (S.OVER, O.SUCCESS, V.INCONCLUSIVE)
ERROR = (S.OVER, O.CLIENT_ERROR, V.INVALID)
USER_ABORT = (S.OVER, O.CLIENT_ERROR, V.INVALID, {"exit_status": 203})
VALIDATE_ERROR = (S.OVER, O.VALIDATE_ERROR, V.INVALID)
NO_REPLY = (S.OVER, O.NO_REPLY, V.INIT, {"report_deadline": NOW - 100})
DETACHED = (S.OVER, O.CLIENT_DETACHED, V.INIT)
COULDNT_SEND = (S.OVER, O.COULDNT_SEND, V.INIT)
LATE = (S.IN_PROGRESS, O.INIT, V.INIT, {"report_deadline": NOW - 1})


def transition(project, specs, canonical=None, **wu_fields):
    """A workunit with results as ``specs`` after one transitioner pass at NOW."""
    wu_fields.setdefault("transition_time", NOW - 10)
    wu = project.workunit(**wu_fields)
    results = []
    for spec in specs:
        extra = {"report_deadline": NOW + 3600, "received_time": NOW - 100}
        if len(spec) == 4:
            extra.update(spec[3])
        results.append(project.result(wu, server_state=spec[0], outcome=spec[1], validate_state=spec[2], **extra))
    if canonical is not None:
        Workunit.objects.filter(pk=wu.pk).update(canonical_result=results[canonical])
    assert transitioner.run_once(project=demo_project(), now=NOW, batch_size=100) == 1
    wu.refresh_from_db()
    return wu, [Result.objects.get(pk=r.pk) for r in results]


def new_results(wu, before):
    return list(wu.results.order_by("id").values_list("name", flat=True)[before:])


# --- step 2: timeouts ----------------------------------------------------------------------


@pytest.mark.parametrize("deadline, timed_out", [(NOW - 1, True), (NOW, False), (NOW + 1, False)])
def test_step_2_in_progress_past_report_deadline_becomes_no_reply(project, deadline, timed_out):
    wu, [r] = transition(project, [(S.IN_PROGRESS, O.INIT, V.INIT, {"report_deadline": deadline})], max_total_results=4)
    assert (r.server_state, r.outcome) == ((S.OVER, O.NO_REPLY) if timed_out else (S.IN_PROGRESS, O.INIT))
    assert LifecycleEvent.objects.filter(result=r, field="outcome").exists() is timed_out


# --- steps 2-4 and 6: counting, error masks and new results --------------------------------


@pytest.mark.parametrize(
    "specs, params, error_mask, made",
    [
        # the first results of a new workunit
        ([], dict(target_nresults=2, min_quorum=2), 0, 2),
        # INACTIVE counts as unsent
        ([INACTIVE], dict(target_nresults=2, min_quorum=2), 0, 1),
        # a timed-out instance is replaced
        ([LATE, RUNNING], dict(target_nresults=2, min_quorum=2), 0, 1),
        # INVALID is not a success (issue #1005)
        ([INVALID], dict(), 0, 1),
        # nerrors > max_error_results, strictly
        ([ERROR, ERROR], dict(max_error_results=2), 0, 1),
        ([ERROR, ERROR, ERROR], dict(max_error_results=2), ErrorMask.TOO_MANY_ERROR_RESULTS, 0),
        ([VALIDATE_ERROR] * 3, dict(max_error_results=2), ErrorMask.TOO_MANY_ERROR_RESULTS, 0),
        # user aborts, no-replies and detaches are not errors
        ([USER_ABORT] * 3, dict(max_error_results=2), 0, 1),
        ([NO_REPLY, DETACHED, NO_REPLY], dict(max_error_results=2), 0, 1),
        # needed > allowed: error only when nothing is allowed, else clamped
        (
            [NO_REPLY, NO_REPLY],
            dict(max_total_results=2, max_error_results=2, max_success_results=2),
            ErrorMask.TOO_MANY_TOTAL_RESULTS,
            0,
        ),
        ([NO_REPLY, NO_REPLY], dict(target_nresults=2, min_quorum=2, max_total_results=3), 0, 1),
        ([COULDNT_SEND, RUNNING], dict(), ErrorMask.COULDNT_SEND_RESULT, 0),
        # enough viable results: nothing to do
        ([SUCCESS, RUNNING], dict(target_nresults=2, min_quorum=2), 0, 0),
    ],
)
def test_step_4_error_masks_and_step_6_new_results(project, specs, params, error_mask, made):
    params = {"max_total_results": 4, "max_error_results": 3, "max_success_results": 3, **params}
    wu, _ = transition(project, specs, **params)
    assert wu.error_mask == error_mask
    names = new_results(wu, len(specs))
    assert len(names) == made
    assert names == [f"{wu.name}_{k}" for k in range(len(specs), len(specs) + made)]


def test_step_6_no_new_results_after_a_canonical_result_or_when_flagged(project):
    wu, _ = transition(
        project,
        [VALID, NO_REPLY],
        canonical=0,
        target_nresults=2,
        min_quorum=2,
        max_total_results=4,
        max_success_results=3,
    )
    assert new_results(wu, 2) == []
    wu, _ = transition(
        project, [NO_REPLY], max_total_results=4, transitioner_flags=TransitionerFlags.TRANSITION_NO_NEW_RESULTS
    )
    assert new_results(wu, 1) == []


def test_step_4_only_errors_resets_hr_class_and_app_version(project):
    wu, _ = transition(
        project, [ERROR], hr_class=3, app_version=project.version, max_total_results=4, max_error_results=2
    )
    assert (wu.hr_class, wu.app_version_id) == (0, None)
    wu, _ = transition(project, [ERROR, RUNNING], hr_class=3, max_total_results=4, max_error_results=2)
    assert wu.hr_class == 3


# --- step 3: need_validate -----------------------------------------------------------------


@pytest.mark.parametrize(
    "specs, quorum, need_validate",
    [
        ([SUCCESS], 1, True),
        ([SUCCESS, RUNNING], 2, False),
        ([SUCCESS, SUCCESS], 2, True),
        ([SUCCESS, INVALID], 2, False),
        ([INCONCLUSIVE, INCONCLUSIVE], 2, False),  # nothing new to validate
        ([INCONCLUSIVE, SUCCESS], 2, True),
    ],
)
def test_step_3_need_validate(project, specs, quorum, need_validate):
    wu, _ = transition(
        project, specs, min_quorum=quorum, target_nresults=max(quorum, 2), max_total_results=6, max_success_results=4
    )
    assert wu.need_validate is need_validate


def test_step_2_success_after_the_canonical_files_are_deleted_is_too_late(project):
    wu, [canonical, late] = transition(
        project, [VALID + ({"file_delete_state": 2},), SUCCESS], canonical=0, max_total_results=4
    )
    assert late.validate_state == V.TOO_LATE
    assert not wu.need_validate


# --- step 5: clean-up on error -------------------------------------------------------------


def test_step_5_error_cleans_up_unsent_and_unvalidated_results(project):
    wu, results = transition(
        project,
        [ERROR, ERROR, UNSENT, INACTIVE, SUCCESS, INCONCLUSIVE, RUNNING, VALID],
        max_error_results=1,
        max_total_results=8,
        max_success_results=4,
    )
    assert wu.error_mask == ErrorMask.TOO_MANY_ERROR_RESULTS
    assert wu.assimilate_state == AssimilateState.READY
    assert [(r.server_state, r.outcome, r.validate_state) for r in results[2:]] == [
        (S.OVER, O.DIDNT_NEED, V.INIT),
        (S.OVER, O.DIDNT_NEED, V.INIT),
        (S.OVER, O.SUCCESS, V.NO_CHECK),
        (S.OVER, O.SUCCESS, V.NO_CHECK),
        (S.IN_PROGRESS, O.INIT, V.INIT),
        (S.OVER, O.SUCCESS, V.VALID),
    ]
    assert wu.transition_time == NOW + 3600  # still waits for the running one


# --- steps 7-8: deferred assimilation ------------------------------------------------------


@pytest.mark.parametrize(
    "specs, ready",
    [
        ([VALID, INVALID], True),
        ([VALID, RUNNING], False),
        ([VALID, SUCCESS], False),
    ],
)
def test_step_8_deferred_assimilation(project, specs, ready):
    wu, _ = transition(project, specs, canonical=0, max_total_results=4)
    assert (wu.assimilate_state == AssimilateState.READY) is ready


# --- step 9: file deletion -----------------------------------------------------------------


@pytest.mark.parametrize(
    "specs, delete_delay, wu_ready, outputs_ready",
    [
        ([VALID, INVALID, ERROR], 0, True, [True, True, True]),
        # the canonical output waits until every result is over and validated
        ([VALID, ERROR, RUNNING], 0, False, [False, True, False]),
        ([VALID, INVALID, SUCCESS], 0, False, [False, True, False]),
        # transitioner.cpp deletes only CLIENT_ERROR (a user abort is one) and validated SUCCESS
        # outputs: what timed-out, detached and unusable results left stays on disk
        ([VALID, NO_REPLY, VALIDATE_ERROR], 0, True, [True, False, False]),
        ([VALID, DETACHED, USER_ABORT], 0, True, [True, False, True]),
        # results that never reached a host have nothing to delete
        ([VALID, COULDNT_SEND, (S.OVER, O.DIDNT_NEED, V.INIT)], 0, True, [True, False, False]),
        # delete_delay counts from the latest report (100 s ago)
        ([VALID, INVALID], 101, False, [False, False]),
        ([VALID, INVALID], 100, True, [True, True]),
    ],
)
def test_step_9_file_deletion_readiness(project, specs, delete_delay, wu_ready, outputs_ready):
    project.app.delete_delay = delete_delay
    project.app.save()
    wu, results = transition(project, specs, canonical=0, max_total_results=4, assimilate_state=AssimilateState.DONE)
    assert (wu.file_delete_state == FileDeleteState.READY) is wu_ready
    assert [r.file_delete_state == FileDeleteState.READY for r in results] == outputs_ready
    if delete_delay > 100:
        assert wu.transition_time == NOW - 100 + delete_delay


@pytest.mark.parametrize("specs", [[VALID, NO_REPLY, VALIDATE_ERROR], [VALID, DETACHED]])
def test_step_9_delete_abandoned_outputs_deletes_what_boinc_leaves_on_disk(project, specs):
    wu = project.workunit(transition_time=NOW - 10, max_total_results=4, assimilate_state=AssimilateState.DONE)
    results = [
        project.result(
            wu,
            server_state=spec[0],
            outcome=spec[1],
            validate_state=spec[2],
            **{"report_deadline": NOW + 3600, "received_time": NOW - 100, **(spec[3] if len(spec) == 4 else {})},
        )
        for spec in specs
    ]
    Workunit.objects.filter(pk=wu.pk).update(canonical_result=results[0])
    assert transitioner.run_once(project=demo_project(), now=NOW, batch_size=100, delete_abandoned_outputs=True) == 1
    assert all(Result.objects.get(pk=r.pk).file_delete_state == FileDeleteState.READY for r in results)


# --- step 10: the next transition_time -----------------------------------------------------


@pytest.mark.parametrize(
    "specs, params, expected",
    [
        ([RUNNING], dict(delay_bound=86400), NOW + 3600),
        ([UNSENT], dict(delay_bound=86400), NOW + 10 * 86400),
        ([UNSENT], dict(delay_bound=20 * 86400), NOW + 30 * 86400),
        ([ERROR, ERROR], dict(max_error_results=1), INT_MAX),
        # a deadline of exactly now is not yet passed: the next pass times it out
        ([(S.IN_PROGRESS, O.INIT, V.INIT, {"report_deadline": NOW})], dict(), NOW),
    ],
)
def test_step_10_next_transition_time(project, specs, params, expected):
    params = {"max_total_results": 4, **params}
    wu, _ = transition(project, specs, **params)
    assert wu.transition_time == expected


STATES = [
    UNSENT,
    INACTIVE,
    RUNNING,
    SUCCESS,
    VALID,
    INVALID,
    INCONCLUSIVE,
    ERROR,
    USER_ABORT,
    VALIDATE_ERROR,
    NO_REPLY,
    DETACHED,
    COULDNT_SEND,
    (S.OVER, O.DIDNT_NEED, V.INIT),
]


@settings(max_examples=300, deadline=None)
@given(
    now=st.integers(10**6, 2 * 10**9),
    specs=st.lists(
        st.tuples(
            st.sampled_from(STATES),
            st.integers(-(10**6), 10**6),
            st.integers(-(10**6), 10**6),
            st.sampled_from(list(FileDeleteState)),
        ),
        max_size=8,
    ),
    canonical=st.one_of(st.none(), st.integers(0, 7)),
    quorum=st.integers(1, 3),
    delay_bound=st.integers(1, 40 * 86400),
    delete_delay=st.integers(0, 10**6),
    assimilate_state=st.sampled_from(list(AssimilateState)),
    error_mask=st.sampled_from([0, ErrorMask.TOO_MANY_ERROR_RESULTS]),
)
def test_step_10_the_next_transition_time_is_never_in_the_past(
    now, specs, canonical, quorum, delay_bound, delete_delay, assimilate_state, error_mask
):
    """BOINC's back-off for a next transition_time already in the past (step 10's overload
    rule) needs no code here: with one ``now`` per pass, whatever the results, the time
    handle_wu computes is never before ``now``. It is the minimum of the safety net (in the
    future), the deadlines of results still IN_PROGRESS (those past ``now`` were timed out
    first) and a deferred deletion time (only when ``now`` is before it)."""
    wu = Workunit(
        pk=1,
        name="wu",
        app_id=1,
        min_quorum=quorum,
        target_nresults=quorum,
        max_error_results=3,
        max_total_results=8,
        max_success_results=4,
        delay_bound=delay_bound,
        assimilate_state=assimilate_state,
        error_mask=error_mask,
        transition_time=now - 1,
    )
    results = []
    for i, (spec, deadline, received, file_delete_state) in enumerate(specs):
        extra = spec[3] if len(spec) == 4 else {}
        results.append(
            Result(
                pk=i + 1,
                workunit_id=1,
                name=f"wu_{i}",
                server_state=spec[0],
                outcome=spec[1],
                validate_state=spec[2],
                file_delete_state=file_delete_state,
                exit_status=extra.get("exit_status", 0),
                report_deadline=now + deadline,
                received_time=max(0, now + received),
            )
        )
    if canonical is not None and canonical < len(results):
        wu.canonical_result_id = results[canonical].pk
    changes = transitioner.Changes(project_id=demo_project().pk, now=now)
    transitioner.handle_wu(wu, results, changes, delete_delay=delete_delay)
    read, next_time = changes.transition_times[wu.pk]
    assert next_time >= now
    assert all(r.report_deadline >= now for r in results if r.server_state == S.IN_PROGRESS)


# --- step 11: compare-and-set --------------------------------------------------------------


@pytest.mark.parametrize("touched, expected", [(False, NOW + 3600), (True, NOW)])
def test_step_11_transition_time_is_written_compare_and_set(project, touched, expected):
    wu = project.workunit(transition_time=NOW - 10, max_total_results=4)
    project.result(wu, server_state=S.IN_PROGRESS, report_deadline=NOW + 3600)
    changes = transitioner.Changes(project_id=demo_project().pk, now=NOW)
    transitioner.handle_wu(wu, list(wu.results.all()), changes, delete_delay=0)
    if touched:  # a scheduler reported a result in the meantime
        Workunit.objects.filter(pk=wu.pk).update(transition_time=NOW - 5)
    transitioner.apply(changes)
    wu.refresh_from_db()
    assert wu.transition_time == expected


def test_the_pass_handles_only_due_workunits_and_its_query_count_is_flat(project, django_assert_max_num_queries):
    for i in range(30):
        wu = project.workunit(
            transition_time=NOW - 1 if i % 3 else NOW + 1,
            target_nresults=2,
            min_quorum=2,
            max_total_results=4,
            max_success_results=2,
        )
        project.result(wu, server_state=S.IN_PROGRESS, report_deadline=NOW - 1)
    with django_assert_max_num_queries(12):
        assert transitioner.run_once(project=demo_project(), now=NOW, batch_size=100) == 20
    assert Result.objects.filter(outcome=O.NO_REPLY).count() == 20
    assert Result.objects.filter(server_state=S.UNSENT).count() == 40
