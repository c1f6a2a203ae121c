"""/project/worlds/: the list whole and as its htmx fragment; starting and pausing, for staff."""

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import UserFactory, WorldFactory, WorldSampleFactory
from tests.pages import parse
from world.models import World

pytestmark = pytest.mark.django_db

FORM = {"name": "x", "hosts": 3, "days": 1, "seed": 1, "speedup": 3600}


@pytest.fixture
def volunteer(client):
    """A logged-in user who is not staff."""
    user = UserFactory(username="ada", password="pw")
    client.force_login(user)
    return user


@pytest.fixture
def admin(client):
    user = UserFactory(username="grace", password="pw", is_staff=True)
    client.force_login(user)
    return user


def statuses():
    return list(World.objects.order_by("pk").values_list("status", flat=True))


def test_the_worlds_page_lists_worlds_whole_and_as_a_fragment(client):
    WorldFactory(name="tiny", hosts=3, days=0.5, summary={"rpcs": 7})
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
    world = WorldFactory(name="w", status=World.Status.PAUSED)
    response = client.post(reverse("worlds:action", args=[world.pk, action]))
    assert response.status_code == 302 and "login" in response["Location"]
    assert statuses() == [World.Status.PAUSED]


def test_a_user_who_is_not_staff_may_not_start_a_world(client, volunteer):
    assert client.post(reverse("worlds:create"), FORM).status_code == 403
    assert not World.objects.exists()


@pytest.mark.parametrize(
    "status, action",
    [
        (World.Status.CREATED, "start"),
        (World.Status.PAUSED, "resume"),
        (World.Status.RUNNING, "pause"),
    ],
)
def test_a_user_who_is_not_staff_may_not_start_pause_or_resume(client, volunteer, redis_client, status, action):
    world = WorldFactory(name="w", status=status)
    assert client.post(reverse("worlds:action", args=[world.pk, action])).status_code == 403
    assert statuses() == [status]


def test_the_page_offers_the_controls_to_staff_only(client):
    WorldFactory(name="w", status=World.Status.PAUSED)
    anonymous = client.get(reverse("worlds:list")).content.decode()
    assert "Resume" not in anonymous and "Start a world" not in anonymous
    user = UserFactory(username="ada", password="pw")
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


def test_staff_start_pause_and_resume_a_world(client, admin, redis_client, django_capture_on_commit_callbacks):
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
    world = WorldFactory(name="w", status=World.Status.RUNNING)
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(username="root", is_staff=True))
    assert client.post(reverse("worlds:create"), FORM).status_code == 403
    assert client.post(reverse("worlds:action", args=[world.pk, "pause"])).status_code == 403
    assert statuses() == [World.Status.RUNNING]
    client.get(reverse("worlds:list"))  # the page's forms set the token's cookie
    token = client.cookies["csrftoken"].value
    paused = client.post(reverse("worlds:action", args=[world.pk, "pause"]), {"csrfmiddlewaretoken": token})
    assert paused.status_code == 302 and statuses() == [World.Status.PAUSED]


def add_samples(world, n=3):
    for i in range(n):
        WorldSampleFactory(
            world=world,
            t=1800.0 * i,
            unsent=10 - i,
            in_progress=i,
            over=i,
            success=i,
            valid=i,
            hosts_active=3,
            rpcs=4 * i,
            rpcs_with_work=3 * i,
            rpcs_without_work=i,
            credit=2.0 * i,
            bytes_downloaded=10**6 * i,
        )


def test_a_world_page_carries_every_chart_whole_and_as_its_polling_fragment(client):
    world = WorldFactory(name="w", status=World.Status.RUNNING, summary={"rpcs": 8, "jobs_reported": 2})
    add_samples(world)
    page = client.get(reverse("worlds:detail", args=[world.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and "<h1>World w</h1>" in html
    for name in ("results", "rpcs", "hosts", "credit", "bytes"):
        assert f'data-figure="world-{name}"' in html and f'id="world-{name}"' in html
    assert "Results by server state" in html and "every 2s" in html
    fragment = client.get(reverse("worlds:detail", args=[world.pk]), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and b"<h1>" not in fragment.content
    assert b'id="world-rpcs"' in fragment.content


def test_a_finished_worlds_page_stops_polling(client):
    world = WorldFactory(name="w", status=World.Status.FINISHED)
    assert "every 2s" not in client.get(reverse("worlds:detail", args=[world.pk])).content.decode()
    fragment = client.get(reverse("worlds:detail", args=[world.pk]), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 286  # htmx: stop polling


def test_an_unknown_world_is_a_404(client):
    assert client.get(reverse("worlds:detail", args=[999])).status_code == 404


def test_the_comparison_states_the_transfer_locality_saved(client):
    plain = WorldFactory(
        name="p", seed=4, status=World.Status.FINISHED, summary={"bytes_downloaded": 4 * 10**9, "jobs_received": 1000}
    )
    local = WorldFactory(
        name="l",
        seed=4,
        locality=True,
        status=World.Status.FINISHED,
        summary={"bytes_downloaded": 10**9, "jobs_received": 1000},
    )
    add_samples(plain)
    add_samples(local)
    page = client.get(reverse("worlds:compare") + f"?worlds={plain.pk},{local.pk}")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Both worlds sent 1,000 jobs" in html
    assert "locality scheduling downloaded 1 MB per job against plain scheduling&#x27;s 4 MB, 75% less" in html
    assert "only the scheduling differs" in html
    for name in ("bytes", "success", "credit", "rpcs", "results-1", "results-2"):
        assert f'data-figure="compare-{name}"' in html
    assert "every 2s" not in html


@pytest.mark.parametrize(
    "query, reason",
    [
        ("", "Give two to four world ids"),
        ("?worlds=1", "Give two to four world ids"),
        ("?worlds=1,x", "World ids are whole numbers"),
        ("?worlds=1,1", "Each world may appear once"),
        ("?worlds=1,2,3,4,5", "Compare at most 4 worlds"),
        ("?worlds=1,99999999999999999999", "World ids are whole numbers"),
    ],
)
def test_a_bad_comparison_is_a_400_with_the_reason(client, query, reason):
    response = client.get(reverse("worlds:compare") + query)
    assert response.status_code == 400 and reason in response.content.decode()


def test_comparing_a_missing_world_is_a_404(client):
    world = WorldFactory(name="w")
    response = client.get(reverse("worlds:compare") + f"?worlds={world.pk},999")
    assert response.status_code == 404 and b"No world 999." in response.content


COMPARE = {"hosts": 5, "days": 0.5, "seed": 7, "speedup": 3600}


def test_staff_start_a_plain_and_a_locality_world_on_one_seed_and_see_them_compared(
    client, admin, redis_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("worlds:compare_start"), COMPARE)
    worlds = list(World.objects.order_by("pk"))
    assert [(w.locality, w.seed, w.hosts, w.days, w.status) for w in worlds] == [
        (False, 7, 5, 0.5, World.Status.RUNNING),
        (True, 7, 5, 0.5, World.Status.RUNNING),
    ]
    assert response.status_code == 302
    assert response["Location"] == (reverse("worlds:compare") + f"?worlds={worlds[0].pk},{worlds[1].pk}")


def test_starting_a_comparison_is_for_staff_with_valid_figures(client, volunteer):
    assert client.post(reverse("worlds:compare_start"), COMPARE).status_code == 403
    volunteer.is_staff = True
    volunteer.save()
    response = client.post(reverse("worlds:compare_start"), {**COMPARE, "hosts": 0})
    assert response.status_code == 400 and b"Choose between 1 and 100,000 hosts." in response.content
    assert not World.objects.exists()


def test_the_list_links_a_plain_world_to_its_locality_twin(client):
    plain = WorldFactory(name="p", seed=2)
    local = WorldFactory(name="l", seed=2, locality=True)
    WorldFactory(name="other", hosts=4, days=1, seed=2, locality=True)
    WorldFactory(name="tuned", seed=2, settings={"error_rate": 0.1})
    html = client.get(reverse("worlds:list")).content.decode()
    tree = parse(html)
    link = reverse("worlds:compare") + f"?worlds={plain.pk},{local.pk}"
    assert len(tree.find_all(href=link)) == 2
    assert tree.get_text().count("compare with") == 2  # "other" and "tuned" have no twin
    assert reverse("worlds:detail", args=[plain.pk]) in html


def test_the_form_keeps_plan_classes_and_real_speeds_as_world_settings():
    from world.forms import WorldForm
    from world.jobs import world_settings

    form = WorldForm(
        data={**FORM, "plan_classes": "on", "mt_efficiency_min": "0.2", "gpu_gflops_sigma": "1", "cpu_speed_sigma": "0"}
    )
    assert form.is_valid(), form.errors
    world = form.save()
    # only what differs from the defaults is kept
    assert world.settings == {"plan_classes": True, "mt_efficiency_min": 0.2, "gpu_gflops_sigma": 1.0}
    settings = world_settings(world)
    assert settings.plan_classes and settings.mt_efficiency_min == 0.2


def test_a_world_setting_out_of_range_is_a_400_and_creates_nothing(client, admin):
    response = client.post(reverse("worlds:create"), {**FORM, "gpu_efficiency_min": "1.5"})
    assert response.status_code == 400
    assert b"Ensure this value is less than or equal to 1" in response.content
    response = client.post(reverse("worlds:create"), {**FORM, "cpu_speed_sigma": "-1"})
    assert response.status_code == 400
    assert not World.objects.exists()
