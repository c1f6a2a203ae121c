"""/project/worlds/: the list whole and as its htmx fragment; starting and pausing, for staff."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from world.models import World

pytestmark = pytest.mark.django_db

FORM = {"name": "x", "hosts": 3, "days": 1, "seed": 1, "speedup": 3600}


@pytest.fixture
def volunteer(client):
    """A logged-in user who is not staff."""
    user = get_user_model().objects.create_user("ada", password="pw")
    client.force_login(user)
    return user


@pytest.fixture
def admin(client):
    user = get_user_model().objects.create_user("grace", password="pw", is_staff=True)
    client.force_login(user)
    return user


def statuses():
    return list(World.objects.order_by("pk").values_list("status", flat=True))


def test_the_worlds_page_lists_worlds_whole_and_as_a_fragment(client):
    World.objects.create(name="tiny", hosts=3, days=0.5, summary={"rpcs": 7})
    page = client.get(reverse("worlds:list"))
    assert page.status_code == 200
    assert b"<h1>Volunteer worlds</h1>" in page.content and b"tiny" in page.content
    fragment = client.get(reverse("worlds:list"), HTTP_HX_REQUEST="true")
    assert b"worlds-panel" in fragment.content and b"<h1>" not in fragment.content


def test_starting_a_world_needs_a_login(client):
    response = client.post(reverse("worlds:create"), FORM)
    assert response.status_code == 302 and "login" in response["Location"]
    assert not World.objects.exists()


@pytest.mark.parametrize("action", ["start", "pause", "resume"])
def test_world_actions_need_a_login(client, action):
    world = World.objects.create(name="w", hosts=3, days=1, status=World.Status.PAUSED)
    response = client.post(reverse("worlds:action", args=[world.pk, action]))
    assert response.status_code == 302 and "login" in response["Location"]
    assert statuses() == [World.Status.PAUSED]


def test_a_user_who_is_not_staff_may_not_start_a_world(client, volunteer):
    assert client.post(reverse("worlds:create"), FORM).status_code == 403
    assert not World.objects.exists()


@pytest.mark.parametrize("status, action", [
    (World.Status.CREATED, "start"), (World.Status.PAUSED, "resume"),
    (World.Status.RUNNING, "pause"),
])
def test_a_user_who_is_not_staff_may_not_start_pause_or_resume(client, volunteer, redis_client,
                                                               status, action):
    world = World.objects.create(name="w", hosts=3, days=1, status=status)
    assert client.post(reverse("worlds:action", args=[world.pk, action])).status_code == 403
    assert statuses() == [status]


def test_the_page_offers_the_controls_to_staff_only(client):
    World.objects.create(name="w", hosts=3, days=1, status=World.Status.PAUSED)
    anonymous = client.get(reverse("worlds:list")).content.decode()
    assert "Resume" not in anonymous and "Start a world" not in anonymous
    user = get_user_model().objects.create_user("ada", password="pw")
    client.force_login(user)
    html = client.get(reverse("worlds:list")).content.decode()
    assert "Resume" not in html and "Only staff may start worlds" in html
    user.is_staff = True
    user.save()
    html = client.get(reverse("worlds:list")).content.decode()
    assert "Resume" in html and "Start a world" in html


def test_a_bad_form_is_a_400_and_creates_nothing(client, admin):
    response = client.post(reverse("worlds:create"), {**FORM, "hosts": 0})
    assert response.status_code == 400
    assert b"Choose between 1 and 100,000 hosts." in response.content
    assert not World.objects.exists()


def test_staff_start_pause_and_resume_a_world(client, admin, redis_client,
                                              django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("worlds:create"), FORM)
    assert response.status_code == 302
    world = World.objects.get()
    assert world.status == World.Status.RUNNING
    client.post(reverse("worlds:action", args=[world.pk, "pause"]))
    assert World.objects.get().status == World.Status.PAUSED
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("worlds:action", args=[world.pk, "resume"]))
    assert World.objects.get().status == World.Status.RUNNING
    assert client.post(reverse("worlds:action", args=[world.pk, "explode"])).status_code == 400


def test_world_forms_need_the_csrf_token(redis_client):
    world = World.objects.create(name="w", hosts=3, days=1, status=World.Status.RUNNING)
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.create_user("root", is_staff=True))
    assert client.post(reverse("worlds:create"), FORM).status_code == 403
    assert client.post(reverse("worlds:action", args=[world.pk, "pause"])).status_code == 403
    assert statuses() == [World.Status.RUNNING]
    client.get(reverse("worlds:list"))  # the page's forms set the token's cookie
    token = client.cookies["csrftoken"].value
    paused = client.post(reverse("worlds:action", args=[world.pk, "pause"]),
                         {"csrfmiddlewaretoken": token})
    assert paused.status_code == 302 and statuses() == [World.Status.PAUSED]
