"""A volunteer's computing preferences (BOINC's global preferences) on their host's preferences
page, and the scheduler reply that hands them to the host's client at its next request as
<global_preferences> (reference/protocol.md §4.3)."""

from xml.etree import ElementTree

import pytest

from backend.models import PREF_FIELDS, Host, LifecycleEvent
from protocol.models import Account
from tests.factories import HostFactory, ProjectFactory, UserFactory, demo_project
from tests.pages import parse
from tests.protocol.requests import work_request
from tests.protocol.test_endpoints import post

pytestmark = pytest.mark.django_db


@pytest.fixture
def ann():
    return UserFactory(username="ann", password="violet-kettle-42")


@pytest.fixture
def key(ann):
    return Account.for_user(ann, demo_project()).authenticator


def rpc(client, key, hostid=0, prefs_mod_time=None):
    """The reply to a work request; ``prefs_mod_time``: the client holds a project's
    preferences of that mod_time (its top-level <global_preferences>)."""
    body = work_request(key, hostid)
    if prefs_mod_time is not None:
        held = f"<global_preferences>\n<mod_time>{prefs_mod_time}.000000</mod_time>\n</global_preferences>\n"
        body = body.replace(b"<cross_project_id>", held.encode() + b"<cross_project_id>")
    response = post(client, "/boinc/cgi", body)
    assert response.status_code == 200
    return ElementTree.fromstring(response.content)


@pytest.fixture
def host(client, key):
    """Ann's host, made by her client's first scheduler request."""
    return Host.objects.get(pk=int(rpc(client, key).findtext("hostid")))


def prefs_url(host):
    return f"/projects/{host.project.slug}/hosts/{host.pk}/prefs/"


def test_the_page_shows_every_preference_with_its_label_unit_and_help(client, ann, host):
    client.force_login(ann)
    page = parse(client.get(prefs_url(host)))
    form = page.select_one("#prefs-form")
    names = {tag["name"] for tag in form.select("input[name]") if tag["name"] != "csrfmiddlewaretoken"}
    assert names == set(PREF_FIELDS)
    assert [o["value"] for o in form.select('select[name="venue"] option')] == ["", "home", "school", "work"]
    text = form.get_text(" ", strip=True)
    for label in [
        "Compute while the computer runs on batteries",
        "Compute while the computer is in use",
        "Use at most (% of the CPUs)",
        "Use at most (% of CPU time)",
        "Suspend when non-BOINC CPU usage is above (%)",
        "Compute only between (hour)",
        "Transfer files only between (hour)",
        "Use at most (GB of disk)",
        "Use at most (% of the disk)",
        "Leave at least (GB free)",
        "Use at most (% of memory) while the computer is in use",
        "Use at most (% of memory) while the computer is idle",
        "Limit download rate to (kB/s)",
        "Limit upload rate to (kB/s)",
        "Store at least (days of work)",
        "Store up to an additional (days of work)",
    ]:
        assert label in text, label
    assert [legend.get_text() for legend in form.select("legend")] == [
        "Venue",
        "Computing",
        "When",
        "Disk",
        "Memory",
        "Network",
        "Work buffer and switching",
    ]
    # the flags are yes/no radios showing the host's values (BOINC's defaults)
    assert form.select_one('input[name="run_if_user_active"][checked]')["value"] == "True"
    assert form.select_one('input[name="suspend_cpu_usage"]')["value"] == "25"  # as a person writes it


def test_a_volunteer_s_change_is_saved_in_its_units_and_named_by_its_label(client, ann, host):
    client.force_login(ann)
    response = client.post(
        prefs_url(host),
        {"work_buf_min_days": "2", "max_bytes_sec_down": "250", "run_on_batteries": "False", "start_hour": "22"},
        follow=True,
    )
    message = parse(response).select_one(".messages").get_text()
    assert message == (
        "Saved: Compute while the computer runs on batteries: no (was yes); Compute only between (hour): 22 (was 0); "
        "Limit download rate to (kB/s): 250 (was 0); Store at least (days of work): 2 (was 0.1). "
        "The host takes them at its next scheduler request."
    )
    assert "work_buf_min_days" not in message
    host.refresh_from_db()
    assert (host.work_buf_min_days, host.max_bytes_sec_down, host.run_on_batteries, host.start_hour) == (
        2.0,
        250_000.0,
        False,
        22.0,
    )
    # what the POST left out keeps its value
    assert (host.work_buf_additional_days, host.run_if_user_active, host.end_hour) == (0.5, True, 0.0)
    assert host.prefs_mod_time > 0
    page = parse(client.get(prefs_url(host)))
    assert page.select_one('input[name="max_bytes_sec_down"]')["value"] == "250"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("max_ncpus_pct", "0", "Ensure this value is greater than or equal to 1."),
        ("cpu_usage_limit", "100.5", "Ensure this value is less than or equal to 100."),
        ("suspend_cpu_usage", "-5", "Ensure this value is greater than or equal to 0."),
        ("suspend_cpu_usage", "much", "Enter a percentage, a number from 0 to 100."),
        ("start_hour", "25", "An hour of the day is at most 24 (midnight at the end of the day)."),
        ("end_hour", "-1", "An hour of the day is 0 (midnight) or later."),
        ("net_start_hour", "noon", "Enter an hour of the day from 0 to 24, such as 8 or 17.5 (17:30)."),
        ("net_end_hour", "24.5", "An hour of the day is at most 24 (midnight at the end of the day)."),
        ("disk_max_used_gb", "-1", "This can't be negative; 0 means no limit."),
        ("disk_max_used_gb", "1e9", "Ensure this value is less than or equal to 9999999.0."),
        ("disk_max_used_pct", "101", "Ensure this value is less than or equal to 100."),
        ("disk_min_free_gb", "-0.5", "This can't be negative; 0 means no limit."),
        ("ram_max_used_busy_pct", "0", "Ensure this value is greater than or equal to 1."),
        ("ram_max_used_idle_pct", "150", "Ensure this value is less than or equal to 100."),
        ("max_bytes_sec_down", "-1", "A rate can't be negative; 0 means no limit."),
        ("max_bytes_sec_up", "1e12", "Ensure this value is less than or equal to 9999999.0."),
        ("work_buf_min_days", "11", "Ensure this value is less than or equal to 10.0."),
        ("work_buf_additional_days", "-1", "Ensure this value is greater than or equal to 0.0."),
        ("run_on_batteries", "maybe", "Choose yes or no."),
        ("run_if_user_active", "", "Choose yes or no."),
        ("cpu_scheduling_period_minutes", "0.5", "Ensure this value is greater than or equal to 1."),
        ("venue", "garden", "Choose a venue: none, home, school or work."),
    ],
)
def test_each_preference_out_of_range_gets_its_message_and_nothing_is_saved(client, ann, host, field, value, message):
    client.force_login(ann)
    before = Host.objects.filter(pk=host.pk).values(*PREF_FIELDS, "venue", "prefs_mod_time").get()
    # a good change beside the bad one is not saved either
    response = client.post(
        prefs_url(host), {field: value, "max_ncpus_pct": "50" if field != "max_ncpus_pct" else value}
    )
    assert response.status_code == 400
    assert response.context["form"].errors[field] == [message]
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert Host.objects.filter(pk=host.pk).values(*PREF_FIELDS, "venue", "prefs_mod_time").get() == before
    assert not LifecycleEvent.objects.filter(host=host).exists()


def test_a_visitor_or_another_volunteer_cannot_reach_the_preferences(client, ann, host):
    anon = client.get(prefs_url(host))
    assert anon.status_code == 302 and anon["Location"].startswith("/accounts/login/")
    bob = UserFactory(username="bob", password="amber-lantern-7")
    client.force_login(bob)
    assert client.get(prefs_url(host)).status_code == 403
    assert client.post(prefs_url(host), {"work_buf_min_days": "3"}).status_code == 403
    # under another project's URL the host does not exist
    other = ProjectFactory(slug="other", name="Other project")
    client.force_login(ann)
    assert client.get(f"/projects/{other.slug}/hosts/{host.pk}/prefs/").status_code == 404
    host.refresh_from_db()
    assert host.work_buf_min_days == 0.1 and host.prefs_mod_time == 0


def test_the_next_reply_carries_the_saved_preferences_with_their_mod_time(client, ann, key, host):
    # never edited: the client keeps its own
    assert rpc(client, key, host.pk).find("global_preferences") is None
    client.force_login(ann)
    client.post(
        prefs_url(host),
        {"work_buf_min_days": "1.5", "work_buf_additional_days": "0.25", "max_bytes_sec_up": "12.5", "end_hour": "6"},
    )
    host.refresh_from_db()
    reply = rpc(client, key, host.pk)
    [prefs] = reply.findall("global_preferences")
    assert prefs.findtext("mod_time") == str(host.prefs_mod_time)
    assert [child.tag for child in prefs] == ["mod_time", *PREF_FIELDS]
    assert prefs.findtext("work_buf_min_days") == "1.5"
    assert prefs.findtext("work_buf_additional_days") == "0.25"
    assert prefs.findtext("max_bytes_sec_up") == "12500"  # bytes per second, as BOINC's element
    assert prefs.findtext("end_hour") == "6"
    assert prefs.findtext("run_if_user_active") == "1" and prefs.findtext("run_on_batteries") == "1"
    assert prefs.findtext("leave_apps_in_memory") == "0"
    assert prefs.findtext("disk_max_used_pct") == "90" and prefs.findtext("ram_max_used_idle_pct") == "90"
    # one element to a line: the client copies the element's lines verbatim (§4.3)
    lines = post(client, "/boinc/cgi", work_request(key, host.pk)).content.decode().splitlines()
    start = lines.index("<global_preferences>")
    assert lines[start + 1] == f"<mod_time>{host.prefs_mod_time}</mod_time>"
    assert lines[start + 2 + len(PREF_FIELDS)] == "</global_preferences>"
    # a client already holding them (or newer ones) is not sent them again
    assert rpc(client, key, host.pk, prefs_mod_time=host.prefs_mod_time).find("global_preferences") is None
    assert rpc(client, key, host.pk, prefs_mod_time=host.prefs_mod_time + 60).find("global_preferences") is None
    older = rpc(client, key, host.pk, prefs_mod_time=host.prefs_mod_time - 60)
    assert older.findtext("global_preferences/work_buf_min_days") == "1.5"


def test_a_host_is_sent_its_own_preferences_not_another_host_s(client, ann, key, host):
    second = HostFactory(owner=ann, domain_name="second-box")
    stranger_host = HostFactory(work_buf_min_days=7.0, prefs_mod_time=10**10)
    client.force_login(ann)
    client.post(prefs_url(second), {"work_buf_min_days": "4"})
    assert rpc(client, key, host.pk).find("global_preferences") is None
    assert rpc(client, key, second.pk).findtext("global_preferences/work_buf_min_days") == "4"
    # a hostid of someone else's host is not theirs: their preferences are never sent
    reply = rpc(client, key, stranger_host.pk)
    assert int(reply.findtext("hostid")) != stranger_host.pk
    assert reply.findtext("global_preferences/work_buf_min_days") != "7"


def test_saving_at_a_venue_sets_the_same_preferences_on_the_volunteer_s_other_computers_there(client, ann, key, host):
    other_home = HostFactory(owner=ann, domain_name="kitchen-box", venue="home")
    at_work = HostFactory(owner=ann, domain_name="office-box", venue="work", work_buf_min_days=0.2)
    bobs = HostFactory(domain_name="bobs-box", venue="home")
    elsewhere = HostFactory(
        owner=ann, project=ProjectFactory(slug="other", name="Other project"), domain_name="far-box", venue="home"
    )
    client.force_login(ann)
    response = client.post(prefs_url(host), {"venue": "home", "work_buf_min_days": "2", "run_if_user_active": "False"})
    messages = [m.get_text() for m in parse(client.get(response["Location"])).select(".messages li")]
    assert messages == [
        "Saved: This computer is at (venue): home (was none); Compute while the computer is in use: no (was yes); "
        "Store at least (days of work): 2 (was 0.1). The host takes them at its next scheduler request.",
        f"The same preferences are set on your other computers at home: host {other_home.pk}.",
    ]
    values = ("venue", "work_buf_min_days", "run_if_user_active")
    assert Host.objects.filter(pk=other_home.pk).values_list(*values).get() == ("home", 2.0, False)
    # the venue where the values differ, another volunteer's computer, another project's: untouched
    assert Host.objects.filter(pk=at_work.pk).values_list(*values).get() == ("work", 0.2, True)
    assert Host.objects.filter(pk=bobs.pk).values_list(*values).get() == ("home", 0.1, True)
    assert Host.objects.filter(pk=elsewhere.pk).values_list(*values).get() == ("home", 0.1, True)
    shared = LifecycleEvent.objects.filter(host=other_home).values_list("field", "detail", "reason")
    assert sorted(shared) == [
        ("run_if_user_active", "True → False", f"preferences form of host {host.pk} (venue home)"),
        ("work_buf_min_days", "0.1 → 2.0", f"preferences form of host {host.pk} (venue home)"),
    ]
    # each host's reply names its venue and carries its venue's values
    reply = rpc(client, key, host.pk)
    assert reply.findtext("host_venue") == "home"
    assert reply.findtext("global_preferences/work_buf_min_days") == "2"
    assert reply.findtext("global_preferences/run_if_user_active") == "0"
    work_reply = rpc(client, key, at_work.pk)
    assert work_reply.findtext("host_venue") == "work" and work_reply.find("global_preferences") is None
    # saved again unchanged, nothing more is written
    again = client.post(prefs_url(host), {}, follow=True)
    assert [m.get_text() for m in parse(again).select(".messages li")] == ["Nothing changed."]
    assert LifecycleEvent.objects.filter(host=other_home).count() == 2


def test_a_host_without_a_venue_sends_none_and_shares_nothing(client, ann, key, host):
    twin = HostFactory(owner=ann, domain_name="twin-box")
    client.force_login(ann)
    client.post(prefs_url(host), {"work_buf_min_days": "2"})
    assert Host.objects.get(pk=twin.pk).work_buf_min_days == 0.1
    assert rpc(client, key, host.pk).find("host_venue") is None
