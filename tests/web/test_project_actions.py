import pytest

from backend.actions import cancel_workunits, revalidate_workunits, transition_now
from backend.models import (
    INT_MAX,
    AssimilateState,
    ErrorMask,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.factories import NOW, AppFactory, ProjectFactory, demo_project
from tests.pages import parse
from tests.web.project_data import (  # noqa: F401
    app,
    busy_workunit,
    host,
    make_results,
    make_workunits,
    owner,
    staff,
    stranger,
    versions,
)

# The actions lock rows with SELECT ... FOR UPDATE and update them counted: database-specific.
pytestmark = [pytest.mark.django_db, pytest.mark.database]

UNSENT = (ServerState.UNSENT, Outcome.INIT, ValidateState.INIT)
INACTIVE = (ServerState.INACTIVE, Outcome.INIT, ValidateState.INIT)
RUNNING = (ServerState.IN_PROGRESS, Outcome.INIT, ValidateState.INIT)


def events_of(field):
    return list(
        LifecycleEvent.objects.filter(field=field).order_by("id").values_list("workunit_id", "result_id", "old", "new")
    )


def test_cancel_sets_the_bit_and_marks_unsent_results_didnt_need(app):
    wu, other = make_workunits(app, 2, error_mask=ErrorMask.TOO_MANY_TOTAL_RESULTS)
    unsent, inactive, running = make_results(wu, [UNSENT, INACTIVE, RUNNING])
    make_results(other, [UNSENT])
    assert cancel_workunits([wu.id], now=NOW, actor="boss", project=demo_project()) == 1
    wu.refresh_from_db()
    assert wu.error_mask == ErrorMask.TOO_MANY_TOTAL_RESULTS | ErrorMask.CANCELLED
    assert wu.transition_time == NOW
    states = dict(Result.objects.filter(workunit=wu).values_list("id", "outcome"))
    assert states == {unsent.id: Outcome.DIDNT_NEED, inactive.id: Outcome.DIDNT_NEED, running.id: Outcome.INIT}
    assert Result.objects.get(pk=running.pk).server_state == ServerState.IN_PROGRESS
    assert Result.objects.get(workunit=other).server_state == ServerState.UNSENT
    assert events_of("error_mask") == [(wu.id, None, 8, 24)]
    assert events_of("server_state") == [(wu.id, unsent.id, 2, 5), (wu.id, inactive.id, 1, 5)]
    assert events_of("outcome") == [(wu.id, unsent.id, 0, 5), (wu.id, inactive.id, 0, 5)]
    assert LifecycleEvent.objects.filter(reason="cancelled by boss").count() == 5


def test_cancelling_twice_changes_and_records_nothing_more(app):
    [wu] = make_workunits(app, 1)
    make_results(wu, [UNSENT])
    cancel_workunits([wu.id], now=NOW, actor="boss", project=demo_project())
    assert cancel_workunits([wu.id], now=NOW + 5, actor="boss", project=demo_project()) == 0
    assert LifecycleEvent.objects.count() == 3
    assert Workunit.objects.get(pk=wu.pk).transition_time == NOW


def test_cancel_runs_a_fixed_number_of_queries_whatever_the_count(app, django_assert_max_num_queries):
    wus = make_workunits(app, 40)
    for wu in wus:
        make_results(wu, [UNSENT, UNSENT])
    with django_assert_max_num_queries(8):
        assert cancel_workunits([w.id for w in wus], now=NOW, actor="boss", project=demo_project()) == 40
    assert Result.objects.filter(outcome=Outcome.DIDNT_NEED).count() == 80


def test_transition_now_moves_only_later_times(app):
    later, never, due = make_workunits(app, 3)
    Workunit.objects.filter(pk=never.pk).update(transition_time=INT_MAX)
    Workunit.objects.filter(pk=due.pk).update(transition_time=NOW - 10)
    assert transition_now([later.id, never.id, due.id], now=NOW, actor="boss", project=demo_project()) == 2
    times = dict(Workunit.objects.values_list("id", "transition_time"))
    assert times == {later.id: NOW, never.id: NOW, due.id: NOW - 10}
    assert events_of("transition_time") == [(later.id, None, NOW + 3600, NOW), (never.id, None, INT_MAX, NOW)]


def test_revalidate_resets_judged_successes_on_open_workunits_only(app):
    open_wu, errored, assimilated = make_workunits(app, 3)
    Workunit.objects.filter(pk=errored.pk).update(error_mask=ErrorMask.CANCELLED)
    Workunit.objects.filter(pk=assimilated.pk).update(assimilate_state=AssimilateState.DONE)
    invalid, inconclusive, client_error = make_results(
        open_wu,
        [
            (ServerState.OVER, Outcome.SUCCESS, ValidateState.INVALID),
            (ServerState.OVER, Outcome.SUCCESS, ValidateState.INCONCLUSIVE),
            (ServerState.OVER, Outcome.CLIENT_ERROR, ValidateState.INVALID),
        ],
    )
    make_results(errored, [(ServerState.OVER, Outcome.SUCCESS, ValidateState.INVALID)])
    assert (
        revalidate_workunits([open_wu.id, errored.id, assimilated.id], now=NOW, actor="boss", project=demo_project())
        == 1
    )
    states = dict(Result.objects.values_list("id", "validate_state"))
    assert states[invalid.id] == states[inconclusive.id] == ValidateState.INIT
    assert states[client_error.id] == ValidateState.INVALID
    assert Result.objects.get(workunit=errored).validate_state == ValidateState.INVALID
    open_wu.refresh_from_db()
    assert open_wu.need_validate and open_wu.transition_time == NOW
    assert not Workunit.objects.get(pk=errored.pk).need_validate
    assert events_of("need_validate") == [(open_wu.id, None, 0, 1)]
    assert len(events_of("validate_state")) == 2


# --- the action pages ------------------------------------------------------------------------


ACTION_NAMES = ["cancel", "transition", "revalidate"]
INVALID_SUCCESS = (ServerState.OVER, Outcome.SUCCESS, ValidateState.INVALID)


@pytest.fixture
def target(app):
    """A workunit every action changes: open, never due, with an invalid success to re-check
    and an unsent result to cancel."""
    [wu] = make_workunits(app, 1, transition_time=INT_MAX)
    make_results(wu, [INVALID_SUCCESS, UNSENT])
    return wu


def snapshot(wu):
    """What any of the actions would change, and the number of events."""
    return (
        Workunit.objects.filter(pk=wu.pk).values_list("error_mask", "transition_time", "need_validate").get(),
        list(
            Result.objects.filter(workunit=wu).order_by("id").values_list("server_state", "outcome", "validate_state")
        ),
        LifecycleEvent.objects.count(),
    )


def confirm_url(action, wu):
    return f"/project/workunits/actions/{action}/?id={wu.id}"


def do_url(action):
    return f"/project/workunits/actions/{action}/"


@pytest.mark.parametrize("action", ACTION_NAMES)
def test_every_action_needs_a_login(client, target, action):
    before = snapshot(target)
    for response in [client.get(confirm_url(action, target)), client.post(do_url(action), {"id": target.id})]:
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert snapshot(target) == before


@pytest.mark.parametrize("action", ACTION_NAMES)
@pytest.mark.parametrize("who", ["owner", "stranger"])
def test_every_action_is_for_staff_only(client, target, request, who, action):
    before = snapshot(target)
    client.force_login(request.getfixturevalue(who))
    assert client.get(confirm_url(action, target)).status_code == 403
    assert client.post(do_url(action), {"id": target.id}).status_code == 403
    assert client.post(do_url(action), {"id": target.id}, HTTP_HX_REQUEST="true").status_code == 403
    assert snapshot(target) == before


@pytest.mark.parametrize(
    "action, changed",
    [
        ("cancel", lambda wu, results: wu[0] == ErrorMask.CANCELLED and results[1][1] == Outcome.DIDNT_NEED),
        ("transition", lambda wu, results: wu[1] < INT_MAX),
        ("revalidate", lambda wu, results: wu[2] and results[0][2] == ValidateState.INIT),
    ],
)
def test_staff_runs_every_action_only_after_confirming(client, staff, target, action, changed):
    before = snapshot(target)
    client.force_login(staff)
    confirm = client.get(confirm_url(action, target))
    assert confirm.status_code == 200 and "csrfmiddlewaretoken" in confirm.content.decode()
    assert snapshot(target) == before
    done = client.post(do_url(action), {"id": target.id})
    assert done.status_code == 302 and done["Location"] == f"/project/workunits/{target.id}/"
    wu, results, events = snapshot(target)
    assert changed(wu, results) and events > before[2]


@pytest.mark.parametrize("action", ACTION_NAMES)
def test_every_action_needs_the_csrf_token(staff, target, action):
    from django.test import Client

    before = snapshot(target)
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    assert client.post(do_url(action), {"id": target.id}).status_code == 403
    assert client.post(do_url(action), {"id": target.id, "csrfmiddlewaretoken": "forged" * 8}).status_code == 403
    assert snapshot(target) == before
    client.get(confirm_url(action, target))  # the confirm page sets the token's cookie
    token = client.cookies["csrftoken"].value
    done = client.post(do_url(action), {"id": target.id, "csrfmiddlewaretoken": token})
    assert done.status_code == 302 and snapshot(target) != before


def test_staff_confirm_then_cancel(client, staff, app, django_assert_max_num_queries):
    wus = make_workunits(app, 2)
    client.force_login(staff)
    query = "&".join(f"id={w.id}" for w in wus)
    with django_assert_max_num_queries(5):
        confirm = client.get(f"/project/workunits/actions/cancel/?{query}")
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert "wu_00000" in html and "wu_00001" in html and "Yes, cancel" in html
    assert "csrfmiddlewaretoken" in html
    assert Workunit.objects.filter(error_mask=0).count() == 2  # nothing happens before the POST
    done = client.post("/project/workunits/actions/cancel/", {"id": [w.id for w in wus]})
    assert done.status_code == 302 and done["Location"] == "/project/workunits/"
    assert Workunit.objects.filter(error_mask=ErrorMask.CANCELLED).count() == 2


def test_confirm_page_queries_do_not_grow_with_the_ids(client, staff, app, django_assert_max_num_queries):
    client.force_login(staff)
    few = make_workunits(app, 2)
    with django_assert_max_num_queries(5):  # session, user, the ids' check, the list
        assert (
            client.get("/project/workunits/actions/revalidate/?" + "&".join(f"id={w.id}" for w in few)).status_code
            == 200
        )
    many = few + make_workunits(app, 298, start=2)
    with django_assert_max_num_queries(5):
        page = client.get("/project/workunits/actions/revalidate/?" + "&".join(f"id={w.id}" for w in many))
    html = page.content.decode()
    assert page.status_code == 200 and "It applies to 300 workunits" in html
    assert "wu_00099" in html and "wu_00100" not in html and "and 300 in all" in html
    assert len(parse(html).find_all("input", type="hidden", attrs={"name": "id"})) == 300


def test_confirm_page_asks_before_acting(client, staff, app):
    [wu] = make_workunits(app, 1)
    client.force_login(staff)
    page = client.get(f"/project/workunits/actions/transition/?id={wu.id}")
    html = page.content.decode()
    assert page.status_code == 200
    assert "<html" in html and '<div id="action-confirm">' in html
    assert "Yes, transition now" in html and "csrfmiddlewaretoken" in html


def test_bad_targets_come_back_with_a_400(client, staff):
    client.force_login(staff)
    page = client.get("/project/workunits/actions/cancel/?id=99999")
    html = page.content.decode()
    assert page.status_code == 400 and '<div id="action-confirm">' in html
    assert "Cannot cancel" in html and "no workunit with id 99999" in html


def test_one_workunit_action_returns_to_its_page(client, staff, app):
    [wu] = make_workunits(app, 1, transition_time=INT_MAX)
    client.force_login(staff)
    done = client.post("/project/workunits/actions/transition/", {"id": wu.id}, follow=True)
    assert done.redirect_chain[-1][0] == f"/project/workunits/{wu.id}/"
    assert "Transition now: 1 of 1 workunit(s) changed." in done.content.decode()


@pytest.mark.parametrize(
    "query, status",
    [
        ("", 400),
        ("id=abc", 400),
        ("id=0", 400),
        ("id=-3", 400),
        ("id=99999", 400),
        ("id=99999999999999999999999", 400),
    ],
)
def test_bad_action_targets_get_a_400_with_the_reason(client, staff, app, query, status):
    client.force_login(staff)
    for response in [
        client.get(f"/project/workunits/actions/cancel/?{query}"),
        client.post("/project/workunits/actions/cancel/", dict([query.split("=")]) if query else {}),
    ]:
        assert response.status_code == status
        assert "Cannot cancel" in response.content.decode()


def test_unknown_action_is_404(client, staff):
    client.force_login(staff)
    assert client.get("/project/workunits/actions/explode/?id=1").status_code == 404


def test_too_many_targets_are_refused(client, staff):
    client.force_login(staff)
    query = "&".join(f"id={i}" for i in range(1, 503))
    response = client.get(f"/project/workunits/actions/cancel/?{query}")
    assert response.status_code == 400 and "at most 500" in response.content.decode()


def test_another_projects_workunit_is_a_form_error_and_changes_nothing(client, staff, app):
    """An action's targets are the project's workunits; another project's id is refused as a
    missing one is, whether asked to confirm or posted."""
    other = ProjectFactory(slug="other")
    [theirs] = make_workunits(AppFactory(project=other, name="theirs"), 1, start=700, transition_time=INT_MAX)
    [ours] = make_workunits(app, 1, transition_time=INT_MAX)
    client.force_login(staff)
    for response in [
        client.get(f"/project/workunits/actions/transition/?id={theirs.id}&id={ours.id}"),
        client.post("/project/workunits/actions/transition/", {"id": [theirs.id, ours.id]}),
    ]:
        assert response.status_code == 400
        assert f"no workunit with id {theirs.id} in this project" in response.content.decode()
    assert Workunit.objects.filter(transition_time=INT_MAX).count() == 2 and not LifecycleEvent.objects.exists()
    done = client.post("/projects/other/workunits/actions/transition/", {"id": theirs.id})
    assert done.status_code == 302
    assert Workunit.objects.get(pk=theirs.pk).transition_time < INT_MAX
