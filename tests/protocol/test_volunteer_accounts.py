"""A volunteer's way in: signing up, the navigation's account links, and My account listing their
projects, their computers (made by their clients' scheduler requests) and their preferences."""

from xml.etree import ElementTree

import pytest
from django.contrib.auth.models import User

from backend.models import Host
from protocol.models import Account
from tests.factories import HostFactory, ProjectFactory, UserFactory, demo_project
from tests.pages import by_testid, parse, rows
from tests.protocol.requests import work_request
from tests.protocol.test_endpoints import post

pytestmark = pytest.mark.django_db

GOOD = {
    "username": "ann",
    "email": "ann@example.org",
    "password1": "violet-kettle-42",
    "password2": "violet-kettle-42",
}


def errors_of(response, field):
    return [str(e) for e in response.context["form"].errors[field]]


def test_a_visitor_signs_up_and_is_logged_in_on_my_account(client):
    response = client.post("/accounts/signup/", GOOD, follow=True)
    assert response.redirect_chain == [("/accounts/me/", 302)]
    user = User.objects.get(username="ann")
    assert user.email == "ann@example.org" and user.check_password("violet-kettle-42")
    assert not user.is_staff
    page = parse(response)
    assert by_testid(page, "username").get_text() == "ann"
    assert "Welcome, ann" in page.select_one(".messages").get_text()
    # the demo project is there to join, and nothing is joined yet
    assert by_testid(page, "no-projects")
    assert by_testid(page, "join-demo")["href"] == "/boinc/account/"


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"password1": "k3ttle", "password2": "k3ttle"}, "password2", "This password is too short."),
        ({"password1": "password123", "password2": "password123"}, "password2", "This password is too common."),
        ({"password1": "48151623429", "password2": "48151623429"}, "password2", "This password is entirely numeric."),
        ({"password2": "violet-kettle-43"}, "password2", "The two password fields didn’t match."),
        ({"email": "not-an-address"}, "email", "Enter an email address, such as ann@example.org."),
        ({"email": ""}, "email", "Enter your email address."),
        ({"username": "bad name!"}, "username", "Enter a valid username."),
    ],
)
def test_bad_sign_up_gets_the_form_s_message_and_makes_no_one(client, change, field, message):
    response = client.post("/accounts/signup/", {**GOOD, **change})
    assert response.status_code == 400
    assert any(message in e for e in errors_of(response, field)), errors_of(response, field)
    assert message.replace("’", "&#x27;") in response.content.decode() or message in response.content.decode()
    assert not User.objects.exists()
    assert "_auth_user_id" not in client.session


def test_a_taken_username_or_email_is_refused_and_the_first_account_is_unchanged(client):
    ann = UserFactory(username="ann", email="ann@example.org", password="first-password-1")
    taken = client.post("/accounts/signup/", {**GOOD, "email": "other@example.org"})
    assert taken.status_code == 400
    assert errors_of(taken, "username") == ["A user with that username already exists."]
    same_email = client.post("/accounts/signup/", {**GOOD, "username": "ann2", "email": "ANN@example.org"})
    assert same_email.status_code == 400
    assert errors_of(same_email, "email") == ["An account with that email address already exists."]
    assert list(User.objects.values_list("username", flat=True)) == ["ann"]
    ann.refresh_from_db()
    assert ann.check_password("first-password-1")


def test_the_navigation_offers_sign_up_to_visitors_and_my_account_to_volunteers(client):
    links = by_testid(parse(client.get("/projects/")), "account-links")
    assert [a.get_text() for a in links.find_all("a")] == ["Sign up", "Log in"]
    assert not links.find("button")
    client.force_login(UserFactory(username="ann"))
    links = by_testid(parse(client.get("/projects/")), "account-links")
    assert [(a.get_text(), a["href"]) for a in links.find_all("a")] == [("My account", "/accounts/me/")]
    assert links.find("button").get_text() == "Log out"


def test_my_account_needs_a_login_and_a_logged_in_volunteer_skips_sign_up(client):
    response = client.get("/accounts/me/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(UserFactory(username="ann"))
    assert client.get("/accounts/signup/")["Location"] == "/accounts/me/"
    assert client.post("/accounts/signup/", {**GOOD, "username": "bob"}).status_code == 302
    assert not User.objects.filter(username="bob").exists()


def test_a_host_made_by_the_volunteer_s_client_is_listed_under_my_account(client):
    client.post("/accounts/signup/", GOOD)
    ann = User.objects.get(username="ann")
    # joining the demo project: its account key page makes the account
    key_page = parse(client.get("/boinc/account/"))
    key = by_testid(key_page, "authenticator").get_text()
    assert key == Account.objects.get(user=ann, project=demo_project()).authenticator
    reply = ElementTree.fromstring(post(client, "/boinc/cgi", work_request(key)).content)
    hostid = int(reply.findtext("hostid"))
    host = Host.objects.get(pk=hostid)
    assert host.owner == ann and host.project == demo_project()
    # another person's host, and ann's in another project she has no account in, are theirs
    HostFactory(domain_name="someone-elses-box")
    other = ProjectFactory(slug="other", name="Other project")
    HostFactory(project=other, owner=ann, domain_name="old-box")

    page = parse(client.get("/accounts/me/"))
    demo = by_testid(page, "project-demo")
    [row] = rows(by_testid(demo, "hosts"))
    assert row[0] == f"{host.domain_name}(#{host.pk})"  # the cells' texts, stripped
    assert row[1] == "none" and row[4] == "0.1days of work"
    assert by_testid(demo, "host-prefs-link")["href"] == f"/projects/demo/hosts/{host.pk}/prefs/"
    assert by_testid(demo, "account-key-link")["href"] == "/boinc/account/"
    assert "someone-elses-box" not in str(page)
    old = by_testid(page, "project-other")
    assert [r[0] for r in rows(by_testid(old, "hosts"))][0].startswith("old-box")
    assert not page.select('[data-testid="join-demo"]')
    # the prefs link opens the host's preferences for its owner
    assert client.get(f"/projects/demo/hosts/{host.pk}/prefs/").status_code == 200


def test_a_new_volunteer_logs_out_and_in_again(client):
    client.post("/accounts/signup/", GOOD)
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/accounts/me/").status_code == 302
    response = client.post("/accounts/login/", {"username": "ann", "password": "violet-kettle-42"})
    assert response.status_code == 302
    assert client.get("/accounts/me/").status_code == 200
