"""A new volunteer signs up in Chromium and changes a preference that the host applies at its
next scheduler request."""

import urllib.request
from xml.etree import ElementTree

import pytest

from backend.models import Host
from tests.protocol.requests import work_request

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def scheduler_rpc(live_server, key, hostid=0):
    """A scheduler request over HTTP, as the volunteer's client makes it, signed with their key."""
    request = urllib.request.Request(
        f"{live_server.url}/boinc/cgi",
        data=work_request(key, hostid),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return ElementTree.fromstring(response.read())


def test_a_new_volunteer_signs_up_and_changes_a_preference_the_host_applies_at_its_next_rpc(page, live_server):
    page.goto(f"{live_server.url}/")
    page.click("[data-testid=account-links] >> text=Sign up")
    page.fill("input[name=username]", "ann")
    page.fill("input[name=email]", "ann@example.org")
    page.fill("input[name=password1]", "violet-kettle-42")
    page.fill("input[name=password2]", "violet-kettle-42")
    page.click("#signup-form [type=submit]")
    page.wait_for_url(f"{live_server.url}/accounts/me/", wait_until="domcontentloaded")
    links = page.locator("[data-testid=account-links]")
    assert "My account" in links.inner_text() and "Sign up" not in links.inner_text()

    # joining the demo project gives the key the client attaches with
    page.click("[data-testid=join-demo]")
    key = page.locator("[data-testid=authenticator]").inner_text().strip()
    reply = scheduler_rpc(live_server, key)
    hostid = int(reply.findtext("hostid"))
    assert reply.find("global_preferences") is None  # nothing edited yet: the client keeps its own

    page.click("[data-testid=account-links] >> text=My account")
    assert f"(#{hostid})" in page.locator("[data-testid=project-demo] [data-testid=hosts]").inner_text()
    page.click("[data-testid=host-prefs-link]")
    field = page.get_by_label("Store at least (days of work)")
    assert field.input_value() == "0.1"
    field.fill("3")
    page.click("#prefs-form [type=submit]")
    message = page.locator(".messages").inner_text()
    assert "Saved: Store at least (days of work): 3 (was 0.1)" in message
    assert "work_buf_min_days" not in message
    assert page.get_by_label("Store at least (days of work)").input_value() == "3"

    # the host's next scheduler RPC takes the new buffer
    reply = scheduler_rpc(live_server, key, hostid)
    prefs = reply.find("global_preferences")
    assert prefs is not None
    assert prefs.findtext("work_buf_min_days") == "3"
    assert prefs.findtext("mod_time") == str(Host.objects.get(pk=hostid).prefs_mod_time)
    assert prefs.findtext("work_buf_additional_days") == "0.5"

    page.click("[data-testid=account-links] >> text=Log out")
    assert "Sign up" in page.locator("[data-testid=account-links]").inner_text()
