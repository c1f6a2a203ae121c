"""Who may do what in the lab, the forms sent back with their errors, the demo login hint, and
the index's query count.

Editing or deleting a scenario is for its owner and staff; another user gets 403 (the page
says to duplicate it instead). Duplicating, importing, loading a preset, starting runs and
comparisons are open to anyone logged in and make rows of their own; an anonymous visitor is
sent to the login page by every one of them.
"""

import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from scheduling.models import Run, StoredScenario
from scheduling.presets import BY_SLUG
from tests.factories import RunFactory, StoredScenarioFactory
from tests.pages import by_testid, parse
from tests.scheduling.test_lab_views import finished_run, form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return User.objects.create_user("owner", password="pw-owner-1")


@pytest.fixture
def stored(owner):
    return StoredScenarioFactory(owner=owner)


def client_for(role, owner):
    client = Client()
    if role == "other":
        client.force_login(User.objects.create_user("other", password="pw-other-1"))
    elif role == "owner":
        client.force_login(owner)
    elif role == "staff":
        client.force_login(User.objects.create_user("staffer", password="pw-staff-1", is_staff=True))
    return client


def snapshot():
    return (
        sorted((s.pk, s.name, json.dumps(s.data, sort_keys=True), s.owner_id) for s in StoredScenario.objects.all()),
        Run.objects.count(),
    )


def edit_post(client, stored):
    data = form_data(stored)
    data["meta-name"] = "renamed"
    return client.post(f"/lab/{stored.pk}/edit/", data)


VIEWS = {
    "edit page": lambda c, s: c.get(f"/lab/{s.pk}/edit/"),
    "edit": edit_post,
    "delete": lambda c, s: c.post(f"/lab/{s.pk}/delete/"),
    "duplicate": lambda c, s: c.post(f"/lab/{s.pk}/duplicate/"),
    "import": lambda c, s: c.post("/lab/import/", {"pcdr": "A(1, 10, .5) B(2, 24, .5)", "name": "imported"}),
    "run": lambda c, s: c.post(
        f"/lab/{s.pk}/runs/", {"policy": "boinc5", "duration": "1h", "seed": 1, "compat": "intended", "delta": 60}
    ),
    "compare": lambda c, s: c.post(
        f"/lab/{s.pk}/compare/", {"policies": ["boinc5", "boinc7"], "duration": "1h", "seed": 1, "compat": "intended"}
    ),
    "preset": lambda c, s: c.post("/lab/presets/seed-002-cpu-and-gpu/"),
    "new page": lambda c, s: c.get("/lab/new/"),
    "new": lambda c, s: c.post("/lab/new/", dict(form_data(s), **{"meta-name": "brand new"})),
}
OWNERS_ONLY = {"edit page", "edit", "delete"}


@pytest.mark.parametrize("view", VIEWS)
def test_an_anonymous_visitor_is_sent_to_log_in_by_every_editing_view_and_changes_nothing(stored, owner, view):
    before = snapshot()
    response = VIEWS[view](client_for("anonymous", owner), stored)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")
    assert snapshot() == before


@pytest.mark.parametrize("view", sorted(OWNERS_ONLY))
def test_another_user_may_not_edit_or_delete_a_scenario_and_gets_403(stored, owner, view):
    before = snapshot()
    response = VIEWS[view](client_for("other", owner), stored)
    assert response.status_code == 403
    assert "duplicate it to change a copy of your own" in response.content.decode()
    assert snapshot() == before


@pytest.mark.parametrize("role", ["owner", "staff"])
def test_the_owner_and_staff_may_edit_and_delete(stored, owner, role):
    client = client_for(role, owner)
    assert VIEWS["edit page"](client, stored).status_code == 200
    assert VIEWS["edit"](client, stored).status_code == 302
    stored.refresh_from_db()
    assert stored.name == "renamed" and stored.owner == owner, "editing keeps the owner"
    assert VIEWS["delete"](client, stored).status_code == 302
    assert not StoredScenario.objects.filter(pk=stored.pk).exists()


@pytest.mark.parametrize("role", ["other", "owner", "staff"])
@pytest.mark.parametrize(
    "view,made",
    [
        ("duplicate", "scenario"),
        ("import", "scenario"),
        ("preset", "scenario"),
        ("new", "scenario"),
        ("run", 1),
        ("compare", 2),
    ],
)
def test_anyone_logged_in_may_duplicate_import_load_create_and_run_making_rows_of_their_own(
    stored, owner, role, view, made
):
    client = client_for(role, owner)
    me = User.objects.get(pk=int(client.session["_auth_user_id"]))
    scenarios, runs = StoredScenario.objects.count(), Run.objects.count()
    assert VIEWS[view](client, stored).status_code == 302
    if made == "scenario":
        new = StoredScenario.objects.exclude(pk=stored.pk).get()
        assert new.owner == me and Run.objects.count() == runs
    else:
        assert Run.objects.count() == runs + made and StoredScenario.objects.count() == scenarios
    stored.refresh_from_db()
    assert stored.owner == owner


def test_the_scenario_page_offers_edit_and_delete_only_to_those_who_may(stored, owner):
    other = client_for("other", owner).get(f"/lab/{stored.pk}/").content.decode()
    assert 'data-testid="edit"' not in other and 'data-testid="delete"' not in other
    assert "Duplicate to change a copy of your own" in other
    mine = client_for("owner", owner).get(f"/lab/{stored.pk}/").content.decode()
    assert 'data-testid="edit"' in mine and 'data-testid="delete"' in mine


def test_a_scenario_without_an_owner_is_editable_by_staff_only(owner):
    orphan = StoredScenarioFactory(scenario=BY_SLUG["seed-001-wrr-example"].scenario(), preset="")
    assert client_for("other", owner).get(f"/lab/{orphan.pk}/edit/").status_code == 403
    assert client_for("staff", owner).get(f"/lab/{orphan.pk}/edit/").status_code == 200


# ---------------------------------------------------------------- forms sent back


def test_the_edit_page_renders_the_stored_scenario(stored, owner):
    client = client_for("owner", owner)
    whole = client.get(f"/lab/{stored.pk}/edit/").content.decode()
    assert "<html" in whole and f"Edit “{stored.name}”" in whole and 'value="P1"' in whole


def _form(response, testid):
    """The <form> of the page marked data-testid=`testid`, or the one around that mark."""
    marked = by_testid(parse(response), testid)
    return marked if marked.name == "form" else marked.find_parent("form")


def test_a_bad_run_form_comes_back_on_the_scenario_page_with_its_field_errors(stored, owner):
    client = client_for("owner", owner)
    response = client.post(
        f"/lab/{stored.pk}/runs/",
        {"policy": "boinc7", "duration": "ten days", "seed": -1, "compat": "intended", "delta": 60},
    )
    form = _form(response, "run-form")
    assert response.status_code == 400 and (form["method"], form["action"]) == ("post", f"/lab/{stored.pk}/runs/")
    assert "Give seconds or a number with a unit" in form.get_text() and "greater than or equal to 0" in form.get_text()
    assert form.find(attrs={"value": "ten days"}) is not None
    assert Run.objects.count() == 0


def test_a_bad_compare_form_comes_back_on_the_scenario_page_with_its_errors(stored, owner):
    client = client_for("owner", owner)
    policies = client.post(
        f"/lab/{stored.pk}/compare/", {"policies": ["boinc7"], "duration": "1d", "seed": 1, "compat": "intended"}
    )
    form = _form(policies, "compare-form")
    assert policies.status_code == 400 and form["data-testid"] == "compare-form"
    assert "Pick at least two policies to compare." in form.get_text()
    values = client.post(
        f"/lab/{stored.pk}/compare/",
        {
            "parameter": "cpu_scheduling_period_minutes",
            "values": "60",
            "policy": "boinc7",
            "duration": "1d",
            "seed": 1,
            "compat": "intended",
        },
    )
    form = _form(values, "parameter-form")
    assert values.status_code == 400 and form["data-testid"] == "parameter-form"
    assert "Give between 2 and 6 values to compare." in form.get_text()
    assert form.find(attrs={"value": "60"}) is not None
    assert Run.objects.count() == 0


# ---------------------------------------------------------------- demo login hint


@pytest.fixture
def demo_account():
    return User.objects.create_superuser("admin", "admin@example.org", "boincweb")


HINT = 'data-testid="demo-login"'


def test_with_debug_on_the_login_page_and_the_lab_name_the_demo_login(settings, demo_account, stored):
    settings.DEBUG = True
    client = Client()
    login = client.get("/accounts/login/").content.decode()
    assert HINT in login and "<code>admin</code>" in login and "<code>boincweb</code>" in login
    assert client.get("/lab/").content.decode().count(HINT) == 1
    assert client.get(f"/lab/{stored.pk}/").content.decode().count(HINT) == 1
    assert client.login(username="admin", password="boincweb"), "the hint is a login that works"
    assert HINT not in client.get("/lab/").content.decode(), "not once logged in"


def test_with_debug_off_the_demo_login_is_never_shown(settings, demo_account, stored):
    settings.DEBUG = False
    client = Client()
    for url in ("/accounts/login/", "/lab/", f"/lab/{stored.pk}/"):
        assert HINT not in client.get(url).content.decode()


def test_the_demo_login_is_not_shown_once_its_password_changed_or_without_the_account(settings, demo_account):
    settings.DEBUG = True
    demo_account.set_password("a-private-one")
    demo_account.save()
    assert HINT not in Client().get("/accounts/login/").content.decode()
    demo_account.delete()
    assert HINT not in Client().get("/accounts/login/").content.decode()


# ---------------------------------------------------------------- query count


def _index_queries(client):
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/lab/").status_code == 200
    return len(queries)


def test_the_lab_index_makes_as_many_queries_for_twenty_scenarios_as_for_one(owner, stored):
    client = client_for("owner", owner)
    finished_run(stored, duration=600.0)
    one = _index_queries(client)
    for i in range(19):
        s = StoredScenarioFactory(owner=owner)
        RunFactory(scenario=s, duration=60)
        RunFactory(scenario=s, policy="boinc5", duration=60)
    twenty = _index_queries(client)
    assert twenty == one
    runs = {}
    for row in parse(client.get("/lab/")).find_all("tr"):
        cells = row.find_all("td")
        scenario = re.fullmatch(r"/lab/(\d+)/", cells[0].a["href"]) if cells and cells[0].a else None
        if scenario and len(cells) >= 5 and all(c.get_text().isdigit() for c in cells[1:5]):
            runs[int(scenario.group(1))] = int(cells[4].get_text())
    assert len(runs) == 20 and runs.pop(stored.pk) == 1 and set(runs.values()) == {2}
