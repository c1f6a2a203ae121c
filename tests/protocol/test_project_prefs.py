"""A volunteer's preferences for each project (BOINC's user.project_prefs): the resource share
on their account in the project, edited on the project's preferences page and sent in every
scheduler reply as <project_preferences> (reference/protocol.md §4.3)."""

from xml.etree import ElementTree

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from backend.daemons.sched_types import SchedulerReply
from backend.models import Host, Project
from protocol.models import Account
from protocol.xml_reply import write_error_reply, write_reply
from tests.factories import ProjectFactory, UserFactory, demo_project
from tests.pages import by_testid, parse
from tests.protocol.requests import work_request
from tests.protocol.test_endpoints import post
from tests.protocol.test_xml_reply import context

pytestmark = pytest.mark.django_db


@pytest.fixture
def other():
    return ProjectFactory(slug="other", name="Other project")


def prefs_url(project):
    return "/boinc/prefs/" if project.slug == Project.DEMO_SLUG else f"/projects/{project.slug}/boinc/prefs/"


def rpc(client, project, key):
    url = "/boinc/cgi" if project.slug == Project.DEMO_SLUG else f"/projects/{project.slug}/boinc/cgi"
    response = post(client, url, work_request(key))
    assert response.status_code == 200
    return response.content


# --- the reply ----------------------------------------------------------------------------


def test_the_reply_carries_the_project_preferences_each_child_on_a_line_of_its_own():
    body = write_reply(SchedulerReply(hostid=3), context(resource_share=25.0))
    root = ElementTree.fromstring(body)
    [prefs] = root.findall("project_preferences")
    assert [child.tag for child in prefs] == ["resource_share"]
    assert prefs.findtext("resource_share") == "25"
    # The client copies the element's lines up to the one holding its end tag (client/
    # scheduler_op.cpp), then reads <resource_share> off its own line of the account file.
    lines = body.decode().splitlines()
    start = lines.index("<project_preferences>")
    assert lines[start : start + 3] == [
        "<project_preferences>",
        "<resource_share>25</resource_share>",
        "</project_preferences>",
    ]
    fractional = write_reply(SchedulerReply(), context(resource_share=12.5))
    assert ElementTree.fromstring(fractional).findtext("project_preferences/resource_share") == "12.5"


def test_a_reply_without_an_account_carries_no_project_preferences():
    assert ElementTree.fromstring(write_reply(SchedulerReply(), context())).find("project_preferences") is None
    assert ElementTree.fromstring(write_error_reply("no")).find("project_preferences") is None


def test_each_project_s_scheduler_sends_the_volunteer_s_share_in_that_project(client, other):
    person = UserFactory(username="volunteer")
    demo_account = Account.for_user(person, demo_project())
    other_account = Account.for_user(person, other)
    assert (demo_account.resource_share, other_account.resource_share) == (100.0, 100.0)  # BOINC's default
    Account.objects.filter(pk=other_account.pk).update(resource_share=25.0)
    demo_reply = ElementTree.fromstring(rpc(client, demo_project(), demo_account.authenticator))
    other_reply = ElementTree.fromstring(rpc(client, other, other_account.authenticator))
    assert demo_reply.findtext("project_preferences/resource_share") == "100"
    assert other_reply.findtext("project_preferences/resource_share") == "25"
    # a refused key gets no one's preferences
    refused = ElementTree.fromstring(rpc(client, other, demo_account.authenticator))
    assert refused.find("project_preferences") is None and "Invalid or missing account key" in refused.findtext(
        "message"
    )


# --- the page -----------------------------------------------------------------------------


def test_a_volunteer_sets_their_share_in_one_project_and_the_other_keeps_its_own(client, other):
    person = UserFactory(username="volunteer")
    Account.for_user(person, demo_project())
    client.force_login(person)
    page = parse(client.get(prefs_url(other)))
    assert page.select_one("#id_resource_share")["value"] == "100.0"
    assert page.title.get_text().startswith("Preferences for Other project")
    response = client.post(prefs_url(other), {"resource_share": "25"})
    assert response.status_code == 302 and response["Location"] == prefs_url(other)
    shown = parse(client.get(prefs_url(other)))
    assert "Saved: resource share 25 (was 100)" in shown.select_one(".messages").get_text()
    assert shown.select_one("#id_resource_share")["value"] == "25.0"
    assert Account.objects.get(project=other, user=person).resource_share == 25.0
    assert Account.objects.get(project=demo_project(), user=person).resource_share == 100.0
    # a large share reads as written
    client.post(prefs_url(other), {"resource_share": "1234567"})
    assert (
        "Saved: resource share 1234567 (was 25)"
        in parse(client.get(prefs_url(other))).select_one(".messages").get_text()
    )
    # 0 is BOINC's backup project, and is taken
    client.post(prefs_url(other), {"resource_share": "0"})
    assert (
        "Saved: resource share 0 (was 1234567)"
        in parse(client.get(prefs_url(other))).select_one(".messages").get_text()
    )
    assert Account.objects.get(project=other, user=person).resource_share == 0.0
    client.post(prefs_url(other), {"resource_share": "25"})
    client.get(prefs_url(other))
    # saved unchanged, nothing changes
    client.post(prefs_url(other), {"resource_share": "25.0"})
    assert "Nothing changed." in parse(client.get(prefs_url(other))).select_one(".messages").get_text()
    # the account page shows it and links here
    account_page = parse(client.get(f"/projects/{other.slug}/boinc/account/"))
    link = by_testid(account_page, "prefs-link")
    assert link["href"] == prefs_url(other) and "resource share 25." in link.parent.get_text()


@pytest.mark.parametrize(
    "value, reason",
    [
        ("lots", "Enter the share as a number, such as 100."),
        ("", "Enter a resource share, such as 100 (BOINC's default)."),
        ("nan", "Enter the share as a number, such as 100."),
        ("inf", "Enter the share as a number, such as 100."),
        ("-5", "A resource share can't be negative"),
        ("-0.001", "A resource share can't be negative"),
        ("10000000", "A resource share can be at most 9,999,999, as in BOINC."),
        ("1e300", "A resource share can be at most 9,999,999, as in BOINC."),
    ],
)
def test_a_bad_share_is_refused_with_its_reason_and_changes_nothing(client, other, value, reason):
    person = UserFactory(username="volunteer")
    Account.for_user(person, other)
    client.force_login(person)
    before = list(Account.objects.order_by("id").values())
    response = client.post(prefs_url(other), {"resource_share": value})
    assert response.status_code == 400
    errors = parse(response).select_one(".has-error .errorlist").get_text()
    assert reason in errors
    assert list(Account.objects.order_by("id").values()) == before


def test_only_one_s_own_account_is_edited_whatever_the_form_names(client, other):
    """The page names no account: a POST that names another's account, user or key changes
    the signed-in user's own share and nothing of the other's."""
    mine, theirs = UserFactory(username="mine"), UserFactory(username="theirs")
    their_account = Account.for_user(theirs, other)
    client.force_login(mine)
    client.post(
        prefs_url(other),
        {
            "resource_share": "7",
            "id": their_account.pk,
            "user": theirs.pk,
            "authenticator": their_account.authenticator,
            "project": demo_project().pk,
        },
    )
    their_account.refresh_from_db()
    assert (their_account.resource_share, their_account.user, their_account.project) == (100.0, theirs, other)
    my_account = Account.objects.get(user=mine)
    assert (my_account.project, my_account.resource_share) == (other, 7.0)
    assert my_account.authenticator != their_account.authenticator


def test_the_page_asks_for_a_login_and_is_a_404_for_worlds_and_unknown_projects(client, other):
    response = client.get(prefs_url(other))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.post(prefs_url(other), {"resource_share": "5"}).status_code == 302
    assert not Account.objects.exists()
    world = ProjectFactory(slug="world-7", name="A world", kind=Project.Kind.WORLD)
    client.force_login(UserFactory(username="volunteer"))
    assert client.get(prefs_url(world)).status_code == 404
    assert client.post(prefs_url(world), {"resource_share": "5"}).status_code == 404
    assert client.get("/projects/nowhere/boinc/prefs/").status_code == 404
    assert client.put(prefs_url(other)).status_code == 405
    assert not Account.objects.filter(project=world).exists()


def test_the_form_needs_csrf(other):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    person = UserFactory(username="volunteer")
    client.force_login(person)
    assert client.post(prefs_url(other), {"resource_share": "5"}).status_code == 403
    assert not Account.objects.filter(resource_share=5.0).exists()
    assert not Host.objects.exists()


# --- the migration ------------------------------------------------------------------------

BEFORE = [("protocol", "0005_account_per_project")]


@pytest.mark.database
@pytest.mark.django_db(transaction=True)
def test_every_existing_account_gets_boinc_s_default_share_and_keeps_its_values():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    old = executor.loader.project_state(BEFORE).apps
    Project_ = old.get_model("backend", "Project")
    User = old.get_model("auth", "User")
    OldAccount = old.get_model("protocol", "Account")
    demo = Project_.objects.get_or_create(slug="demo", defaults={"name": "Demo project"})[0]
    elsewhere = Project_.objects.create(slug="elsewhere", name="Another live project")
    alice, bob = User.objects.create(username="alice"), User.objects.create(username="bob")
    rows = [
        OldAccount.objects.create(project=demo, user=alice, authenticator="key-alice"),
        OldAccount.objects.create(project=elsewhere, user=alice, authenticator="key-alice-elsewhere"),
        OldAccount.objects.create(project=elsewhere, user=bob, authenticator="key-bob"),
    ]
    before = {row.pk: (row.project_id, row.user_id, row.authenticator) for row in rows}

    executor = MigrationExecutor(connection)
    executor.migrate(latest)
    new = executor.loader.project_state(latest).apps
    after = {
        row.pk: ((row.project_id, row.user_id, row.authenticator), row.resource_share)
        for row in new.get_model("protocol", "Account").objects.all()
    }
    assert after == {pk: (values, 100.0) for pk, values in before.items()}
