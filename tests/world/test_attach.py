"""Attaching a lab scenario's host to a world's project (issue 20): /project/worlds/attach/<pk>/
starts one world of engine hosts on that host, or two on the same seed and volunteers with
other server settings, opened side by side."""

import pytest
from django.urls import reverse

from tests.factories import StoredScenarioFactory, UserFactory
from tests.pages import parse
from world.engine_host import EngineClass
from world.models import World
from world.simulation import WorldSettings

pytestmark = pytest.mark.django_db

FORM = {
    "engine_hosts": 4,
    "simple_hosts": 2,
    "policy": "boinc7",
    "days": 1,
    "seed": 3,
    "speedup": 3600,
    "resource_share": 100,
    "delay_bound_hours_a": 72,
    "delay_bound_hours_b": 72,
}


@pytest.fixture
def admin(client):
    client.force_login(UserFactory(username="grace", password="pw", is_staff=True))


def test_anyone_sees_the_form_from_the_scenarios_page(client):
    stored = StoredScenarioFactory(preset="seed-002-cpu-and-gpu")
    lab = parse(client.get(reverse("lab:scenario", args=[stored.pk])).content)
    link = lab.select_one("[data-testid=attach-world]")
    assert link["href"] == reverse("worlds:attach", args=[stored.pk])
    page = client.get(link["href"])
    assert page.status_code == 200
    soup = parse(page.content)
    assert soup.select_one("[data-testid=attach-form]")
    assert "Log in" in soup.select_one("[data-testid=attach-form]").get_text()


def test_staff_attach_the_host_and_compare_two_daily_quotas_side_by_side(
    client, admin, redis_client, django_capture_on_commit_callbacks
):
    stored = StoredScenarioFactory(preset="seed-002-cpu-and-gpu")
    form = {**FORM, "compare": "on", "daily_result_quota_b": 1}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("worlds:attach", args=[stored.pk]), form)
    worlds = list(World.objects.order_by("pk"))
    assert len(worlds) == 2
    assert response.status_code == 302
    assert response["Location"] == reverse("worlds:compare") + f"?worlds={worlds[0].pk},{worlds[1].pk}"
    a, b = worlds
    assert (a.seed, a.hosts, a.days) == (b.seed, b.hosts, b.days) == (3, 2, 1)
    assert a.status == b.status == World.Status.RUNNING
    assert "daily_result_quota" not in a.settings and b.settings["daily_result_quota"] == 1
    (engine_class,) = b.settings["engine_hosts"]
    assert engine_class["count"] == 4 and engine_class["scenario_name"] == stored.name
    settings = WorldSettings.from_dict({**b.settings, "hosts": b.hosts, "days": b.days, "seed": b.seed})
    host = EngineClass.from_dict(settings.engine_hosts[0]).description().host
    assert host.ncpus == 4 and [g.name for g in host.gpus] == ["NVIDIA"]
    compared = parse(client.get(response["Location"]).content)
    assert "only the server settings differ" in compared.select_one(".lead").get_text()
    cells = [td.get_text() for td in compared.select("[data-testid=server-settings]")]
    assert cells == ["deadline 72 h", "deadline 72 h, daily quota 1"]


def test_comparing_the_same_settings_twice_is_refused_and_starts_nothing(client, admin, redis_client):
    stored = StoredScenarioFactory()
    response = client.post(reverse("worlds:attach", args=[stored.pk]), {**FORM, "compare": "on"})
    assert response.status_code == 400
    assert "differs from A" in response.content.decode()
    assert not World.objects.exists()


def test_only_staff_start_attached_worlds(client, redis_client):
    stored = StoredScenarioFactory()
    response = client.post(reverse("worlds:attach", args=[stored.pk]), FORM)
    assert response.status_code == 302 and "login" in response["Location"]
    client.force_login(UserFactory(username="ada", password="pw"))
    assert client.post(reverse("worlds:attach", args=[stored.pk]), FORM).status_code == 403
    assert not World.objects.exists()


def test_bad_numbers_are_a_400_with_the_field_named(client, admin, redis_client):
    stored = StoredScenarioFactory()
    response = client.post(reverse("worlds:attach", args=[stored.pk]), {**FORM, "engine_hosts": 0})
    assert response.status_code == 400
    assert not World.objects.exists()
    assert client.get(reverse("worlds:attach", args=[999999])).status_code == 404


def test_the_worlds_form_adds_engine_hosts_of_a_preset(client, admin, redis_client, django_capture_on_commit_callbacks):
    form = {
        "name": "mixed",
        "hosts": 5,
        "days": 1,
        "seed": 2,
        "speedup": 3600,
        "engine_hosts": 3,
        "engine_policy": "boinc5",
        "engine_preset": "seed-002-tight-deadlines",
    }
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("worlds:create"), form).status_code == 302
    world = World.objects.get()
    assert world.settings["engine_hosts"] == [{"count": 3, "policy": "boinc5", "preset": "seed-002-tight-deadlines"}]
    assert client.post(reverse("worlds:create"), {**form, "engine_preset": "nope"}).status_code == 400
    assert World.objects.count() == 1
