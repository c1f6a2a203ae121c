"""/project/worlds/: the list whole and as its htmx fragment, starting and pausing."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from world.models import World

pytestmark = pytest.mark.django_db


@pytest.fixture
def volunteer(client):
    user = get_user_model().objects.create_user("ada", password="pw")
    client.force_login(user)
    return user


def test_the_worlds_page_lists_worlds_whole_and_as_a_fragment(client):
    World.objects.create(name="tiny", hosts=3, days=0.5, summary={"rpcs": 7})
    page = client.get(reverse("worlds:list"))
    assert page.status_code == 200
    assert b"<h1>Volunteer worlds</h1>" in page.content and b"tiny" in page.content
    fragment = client.get(reverse("worlds:list"), HTTP_HX_REQUEST="true")
    assert b"worlds-panel" in fragment.content and b"<h1>" not in fragment.content


def test_starting_a_world_needs_a_login(client):
    response = client.post(reverse("worlds:create"), {"name": "x", "hosts": 3, "days": 1,
                                                      "seed": 1, "speedup": 3600})
    assert response.status_code == 302 and "login" in response["Location"]
    assert not World.objects.exists()


def test_a_bad_form_is_a_400_and_creates_nothing(client, volunteer):
    response = client.post(reverse("worlds:create"), {"name": "x", "hosts": 0, "days": 1,
                                                      "seed": 1, "speedup": 3600})
    assert response.status_code == 400
    assert b"Choose between 1 and 100,000 hosts." in response.content
    assert not World.objects.exists()


def test_a_world_is_started_paused_and_resumed(client, volunteer, redis_client,
                                               django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("worlds:create"), {"name": "x", "hosts": 3, "days": 1,
                                                          "seed": 1, "speedup": 3600})
    assert response.status_code == 302
    world = World.objects.get()
    assert world.status == World.Status.RUNNING
    client.post(reverse("worlds:action", args=[world.pk, "pause"]))
    assert World.objects.get().status == World.Status.PAUSED
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("worlds:action", args=[world.pk, "start"]))
    assert World.objects.get().status == World.Status.RUNNING
    assert client.post(reverse("worlds:action", args=[world.pk, "explode"])).status_code == 400
