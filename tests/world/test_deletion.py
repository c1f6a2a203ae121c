"""Deleting a world, and with it on request its project (world.deletion): every row and file of
the project goes, in as many statements for a large world as for a small one, and nothing of
another project's; a running world, a slice in flight and a live project are refused with
nothing changed. From the world's page (staff, CSRF, a confirmation) and ``manage.py
delete_world``."""

import io
from datetime import timedelta

import django_rq
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from backend.daemons.hierarchy import projects_root
from backend.models import App, Host, Project, Result, UserCredit, Workunit
from protocol.models import Account
from tests.factories import ResultFactory, UserFactory, WorldFactory
from tests.web.test_redis_outage import point_at
from tests.world.test_project_isolation import PROJECT_TABLES, checksums, demo_project_rows, rows_per_table
from tests.world.test_world import SMALL_CUSHION
from world import jobs
from world.deletion import Refused, delete_world, project_tables, refers_to
from world.models import EngineHostRun, EngineRecordChunk, World, WorldSample

# Commits that other connections see, a foreign-key check at the commit, and raw deletes:
# database-specific.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

HOUR = 3600.0
User = get_user_model()


def paused_world(name, seed, *, hours=2, locality=False, **settings):
    """A world stopped mid-run, with work in progress (and with ``locality``, files on hosts)."""
    world = WorldFactory(
        name=name, hosts=4, days=0.5, seed=seed, locality=locality, settings={**SMALL_CUSHION, **settings}
    )
    with jobs.unsynced_commits():
        sim = jobs.create_simulation(world)
        sim.run_until(hours * HOUR)
        jobs.store(world.pk, sim, status=World.Status.PAUSED)
    world.refresh_from_db()
    return world


def rows_of(project_id):
    """Rows per table that name the project, the empty tables left out."""
    return rows_per_table(Project(pk=project_id))


def world_rows(world_id):
    return {
        "World": World.objects.filter(pk=world_id).count(),
        "WorldSample": WorldSample.objects.filter(world_id=world_id).count(),
        "EngineHostRun": EngineHostRun.objects.filter(world_id=world_id).count(),
        "EngineRecordChunk": EngineRecordChunk.objects.filter(run__world_id=world_id).count(),
    }


def data_file(project):
    """A file in the project's data directory, as its daemons keep them there."""
    path = project.download_dir / f"{project.slug}_input"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"input")
    return path


@pytest.fixture
def three_projects(redis_client):
    """The demo and two worlds paused mid-run, one with engine hosts and plan classes."""
    demo = demo_project_rows()
    doomed = paused_world(
        "doomed", 3, hours=1, locality=True, plan_classes=True, engine_hosts=[{"count": 1, "policy": "boinc7"}]
    )
    kept = paused_world("kept", 4)
    return demo, doomed, kept


def test_a_world_deleted_with_its_project_takes_every_row_and_file_of_it_and_nothing_of_another(three_projects):
    demo, doomed, kept = three_projects
    project = doomed.project
    before = rows_of(project.pk)
    # the paused world has rows in most tables, work in progress among them
    assert {"App", "AppVersion", "Host", "Workunit", "Result", "File", "LocalityTrigger", "LifecycleEvent"} <= set(
        before
    )
    assert Result.objects.filter(project=project, server_state=4).exists()
    assert all(world_rows(doomed.pk).values())
    links = Workunit.input_files.through.objects.filter(workunit__project=project).count()
    assert links
    spec = projects_root(project).parent.parent / "worlds" / f"{doomed.prefix}_plan_class_spec.xml"
    assert spec.exists()
    mine, theirs = data_file(project), data_file(kept.project)
    survivors = {"demo": checksums(demo), "kept": checksums(kept.project)}
    kept_world = world_rows(kept.pk)

    deleted = delete_world(doomed.pk, with_project=True)

    assert rows_of(project.pk) == {}
    assert not Project.objects.filter(pk=project.pk).exists()
    assert world_rows(doomed.pk) == dict.fromkeys(world_rows(doomed.pk), 0)
    assert not Workunit.input_files.through.objects.filter(file__project_id=project.pk).exists()
    assert not mine.exists() and not projects_root(project).exists() and not spec.exists()
    # what it says it deleted is what there was
    assert {
        label.split(".")[1]: n for label, n in deleted.rows.items() if n and label.startswith(("backend.", "protocol."))
    } == {
        **before,
        "Workunit_input_files": links,
        "Project": 1,
    }
    assert deleted.project == project.slug and deleted.project_rows == sum(before.values()) + links + 1
    # the others are as they were, row for row
    assert {"demo": checksums(demo), "kept": checksums(kept.project)} == survivors
    assert world_rows(kept.pk) == kept_world and theirs.read_bytes() == b"input"


def test_a_world_deleted_with_its_project_takes_its_volunteers_users_and_never_a_real_person(three_projects):
    demo, doomed, kept = three_projects
    project = doomed.project
    owners = sorted(set(Host.objects.filter(project=project).values_list("owner_id", flat=True)))
    assert len(owners) >= 5  # its simulated volunteers, the engine host's among them
    joined, credited, staff, logged_in = owners[:4]
    # real people who volunteer in the world's project too: with an account in another project,
    # credit in another, staff, or someone who has logged in
    Account.for_user(User.objects.get(pk=joined), demo)
    UserCredit.objects.create(project=kept.project, user_id=credited)
    User.objects.filter(pk=staff).update(is_staff=True)
    User.objects.filter(pk=logged_in).update(last_login=timezone.now())
    others = set(User.objects.exclude(pk__in=owners).values_list("pk", flat=True))
    assert set(Host.objects.filter(project=kept.project).values_list("owner_id", flat=True)) <= others

    deleted = delete_world(doomed.pk, with_project=True)

    simulated = owners[4:]
    assert deleted.volunteers == len(simulated)
    assert not User.objects.filter(pk__in=simulated).exists()
    assert set(User.objects.values_list("pk", flat=True)) == others | {joined, credited, staff, logged_in}
    assert Account.objects.get(user_id=joined).project == demo
    assert UserCredit.objects.get(user_id=credited).project == kept.project


def test_a_world_deleted_alone_keeps_its_volunteers_users(three_projects):
    _demo, doomed, _kept = three_projects
    users = User.objects.count()
    assert delete_world(doomed.pk, with_project=False).volunteers == 0
    assert User.objects.count() == users


def test_a_world_deleted_alone_leaves_its_project_its_rows_and_its_pages(three_projects, client):
    _demo, doomed, _kept = three_projects
    project = doomed.project
    before = checksums(project)
    deleted = delete_world(doomed.pk, with_project=False)
    assert deleted.project == "" and deleted.project_rows == 0
    assert world_rows(doomed.pk) == dict.fromkeys(world_rows(doomed.pk), 0)
    assert checksums(project) == before
    assert data_file(project).exists()
    page = client.get(f"/projects/{project.slug}/status/")
    assert page.status_code == 200 and f"{doomed.prefix}_einstein" in page.content.decode()


def test_a_running_world_is_refused_and_nothing_changes(redis_client):
    world = paused_world("busy", 5, hours=2)
    World.objects.filter(pk=world.pk).update(
        status=World.Status.RUNNING, job_id="world-x-queued", job_since=timezone.now()
    )
    before, rows = checksums(world.project), world_rows(world.pk)
    with pytest.raises(Refused, match=r"is running: pause it"):
        delete_world(world.pk, with_project=True)
    assert checksums(world.project) == before and world_rows(world.pk) == rows
    # once its job is judged lost (jobs.check_world), the world is failed and may go
    World.objects.filter(pk=world.pk).update(job_since=timezone.now() - jobs.LOST_AFTER - timedelta(seconds=1))
    delete_world(world.pk, with_project=True)
    assert not World.objects.filter(pk=world.pk).exists()


def test_a_world_whose_slice_is_in_flight_is_refused_until_it_ends(redis_client):
    world = paused_world("slicing", 5, hours=2)
    lock = redis_client.lock(jobs.lock_key(world.pk), timeout=60)
    assert lock.acquire(blocking=False)
    rows = rows_of(world.project_id)
    with pytest.raises(Refused, match="still running; try again"):
        delete_world(world.pk, with_project=True)
    assert rows_of(world.project_id) == rows
    lock.release()
    delete_world(world.pk, with_project=True)
    assert rows_of(world.project_id) == {}


def test_a_queued_slice_of_a_deleted_world_runs_nothing(redis_client):
    world = WorldFactory(name="gone", hosts=3, days=0.25, settings=SMALL_CUSHION)
    assert jobs.start(world.pk) and jobs.pause(world.pk)
    delete_world(world.pk, with_project=True)
    queue = django_rq.get_queue(jobs.QUEUE)
    django_rq.get_worker(jobs.QUEUE).work(burst=True)
    ran = [queue.fetch_job(job_id) for job_id in queue.finished_job_registry.get_job_ids()]
    assert [job.return_value() for job in ran] == [None]
    assert not queue.failed_job_registry.get_job_ids()
    assert not Project.objects.filter(kind=Project.Kind.WORLD).exists()


def test_the_demo_and_live_projects_are_not_deleted_with_a_world(redis_client):
    demo = demo_project_rows()
    live = Project.objects.create(name="Live", slug="live-one")
    before = checksums(demo)
    for project in (demo, live):
        world = WorldFactory(name=f"for {project.slug}", project=project, status=World.Status.FINISHED)
        with pytest.raises(Refused, match=f"Project {project.slug} is a live project"):
            delete_world(world.pk, with_project=True)
        assert World.objects.filter(pk=world.pk).exists()
        delete_world(world.pk, with_project=False)  # the world alone may go
        assert Project.objects.filter(pk=project.pk).exists()
    assert checksums(demo) == before


def test_a_row_of_another_project_that_refers_to_the_worlds_rows_refuses_the_deletion(redis_client):
    demo = demo_project_rows()
    world = paused_world("referred", 6)
    # a row no code makes: a demo result on one of the world's hosts
    stray = ResultFactory(workunit__app=demo.apps.get(), host=Host.objects.filter(project=world.project).first())
    assert stray.project == demo
    rows, survivors, users = rows_of(world.project_id), checksums(demo), User.objects.count()
    with pytest.raises(Refused, match="Rows of another project still refer to rows of project world-"):
        delete_world(world.pk, with_project=True)
    assert rows_of(world.project_id) == rows and checksums(demo) == survivors
    assert User.objects.count() == users  # the volunteers' users too: one transaction
    assert World.objects.filter(pk=world.pk).exists()


def test_another_world_on_the_project_refuses_its_deletion(redis_client):
    world = paused_world("shared", 7)
    other = WorldFactory(name="other", project=world.project)
    with pytest.raises(Refused, match=f"also world {other.pk}'s"):
        delete_world(world.pk, with_project=True)
    assert rows_of(world.project_id)


def set_up_world(name, hosts):
    world = WorldFactory(name=name, hosts=hosts, days=0.25, settings={"engine_hosts": [{"count": 1}], **SMALL_CUSHION})
    jobs.store(world.pk, jobs.create_simulation(world), status=World.Status.PAUSED)
    return world


def test_deleting_a_world_of_many_hosts_takes_as_many_statements_as_one_of_a_few(redis_client):
    small, large = set_up_world("small", 2), set_up_world("large", 60)
    assert Host.objects.filter(project=large.project).count() > 60
    counts = []
    for world in (small, large):
        with CaptureQueriesContext(connection) as queries:
            delete_world(world.pk, with_project=True)
        counts.append(len(queries))
    assert counts[0] == counts[1]
    assert counts[0] <= 2 * len(project_tables()) + 20


def test_every_table_with_a_project_is_deleted_from_before_the_tables_it_refers_to():
    tables = project_tables()
    assert set(PROJECT_TABLES) <= set(tables)
    for i, later in enumerate(tables):
        assert not any(refers_to(later, earlier) for earlier in tables[:i]), later
    assert tables.index(Result) < tables.index(Workunit) < tables.index(App)


# --- manage.py delete_world ------------------------------------------------------------------


def test_the_command_deletes_a_world_and_with_project_its_project(redis_client):
    alone, both = paused_world("alone", 8), paused_world("both", 9)
    out = io.StringIO()
    call_command("delete_world", str(alone.pk), stdout=out)
    assert out.getvalue() == f"deleted world {alone.pk} (alone)\n"
    assert Project.objects.filter(pk=alone.project_id).exists()
    out = io.StringIO()
    slug = both.project.slug
    call_command("delete_world", str(both.pk), "--project", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"deleted world {both.pk} (both)"
    assert lines[1].startswith(f"and its project {slug}: ")
    volunteers = int(lines[2].split()[2])
    assert volunteers >= 4 and lines[2] == f"and its {volunteers} simulated volunteers' users"
    assert not User.objects.filter(username__startswith=f"{both.prefix}-").exists()
    assert not Project.objects.filter(pk=both.project_id).exists()


@pytest.mark.parametrize(
    "status, message",
    [(None, "No world 999."), (World.Status.RUNNING, "is running: pause it")],
)
def test_the_command_refuses_with_exit_status_2_and_changes_nothing(redis_client, status, message):
    world = WorldFactory(name="w", status=World.Status.RUNNING, job_id="world-1-x", job_since=timezone.now())
    wid = 999 if status is None else world.pk
    with pytest.raises(CommandError, match=message) as info:
        call_command("delete_world", str(wid), "--project", stdout=io.StringIO())
    assert info.value.returncode == 2
    assert World.objects.filter(pk=world.pk).exists()


# --- the world's page --------------------------------------------------------------------------


@pytest.fixture
def staff_client(client):
    client.force_login(UserFactory(username="grace", password="pw", is_staff=True))
    return client


def delete_url(world):
    return reverse("worlds:delete", args=[world.pk])


def test_the_world_page_offers_deletion_to_staff_only(client, staff_client):
    world = WorldFactory(name="shown", status=World.Status.FINISHED)
    assert 'data-testid="delete-world"' in staff_client.get(reverse("worlds:detail", args=[world.pk])).content.decode()
    assert 'data-testid="delete-world"' not in Client().get(reverse("worlds:detail", args=[world.pk])).content.decode()


def test_deleting_from_the_page_needs_staff_a_post_and_csrf(redis_client):
    world = WorldFactory(name="guarded", status=World.Status.FINISHED)
    form = {"confirm": "on", "project": "on"}
    anonymous = Client().post(delete_url(world), form)
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    volunteer = Client()
    volunteer.force_login(UserFactory(username="ada"))
    assert volunteer.post(delete_url(world), form).status_code == 403
    staff = Client(enforce_csrf_checks=True)
    staff.force_login(UserFactory(username="grace", is_staff=True))
    assert staff.get(delete_url(world)).status_code == 405
    assert staff.post(delete_url(world), form).status_code == 403  # no CSRF token
    assert World.objects.filter(pk=world.pk).exists()


def test_staff_delete_a_world_and_its_project_from_its_page(redis_client, staff_client):
    world = paused_world("paged", 10)
    slug = world.project.slug
    unconfirmed = staff_client.post(delete_url(world), {"project": "on"})
    assert unconfirmed.status_code == 400
    assert "Tick the box to confirm: deleting cannot be undone." in unconfirmed.content.decode()
    assert rows_of(world.project_id)
    response = staff_client.post(delete_url(world), {"project": "on", "confirm": "on"}, follow=True)
    assert response.redirect_chain == [(reverse("worlds:list"), 302)]
    assert f"World paged deleted, with its project {slug}" in response.content.decode()
    assert "simulated volunteers&#x27; users" in response.content.decode()
    assert not World.objects.filter(pk=world.pk).exists() and rows_of(world.project_id) == {}
    assert staff_client.get(f"/projects/{slug}/status/").status_code == 404


def test_a_running_world_is_refused_on_its_page_with_the_reason(redis_client, staff_client):
    world = WorldFactory(name="running", status=World.Status.RUNNING, job_id="world-x", job_since=timezone.now())
    response = staff_client.post(delete_url(world), {"project": "on", "confirm": "on"})
    assert response.status_code == 409
    assert "is running: pause it, or let it finish, before deleting it." in response.content.decode()
    assert World.objects.get(pk=world.pk).status == World.Status.RUNNING


def test_the_redis_lock_is_released_after_a_deletion(redis_client):
    world = paused_world("unlocked", 11)
    delete_world(world.pk, with_project=True)
    assert not redis_client.exists(jobs.lock_key(world.pk))


def test_without_redis_nothing_is_deleted_and_the_command_and_the_page_say_why(settings, tmp_path, staff_client):
    world = WorldFactory(name="unjudged", status=World.Status.PAUSED)
    point_at(settings, f"unix://{tmp_path}/no-redis.sock")
    with pytest.raises(CommandError, match="Redis is not reachable") as info:
        call_command("delete_world", str(world.pk), stdout=io.StringIO())
    assert info.value.returncode == 1
    response = staff_client.post(delete_url(world), {"confirm": "on"})
    assert response.status_code == 503
    assert World.objects.filter(pk=world.pk).exists()
