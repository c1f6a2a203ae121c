"""Projects (DESIGN.md "Projects"): daemon passes of one project touch no row of another, the
periodic job passes over the live projects only, ``run_daemon --project`` names one, and no
page of one project shows a row of another."""

import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction

from backend.jobs import run_all_daemons
from backend.models import DaemonStatus, Project, Result, ServerState, UserCredit, Workunit
from tests.factories import (
    NOW,
    AppFactory,
    HostFactory,
    ProjectFactory,
    ResultFactory,
    TeamFactory,
    UserFactory,
    WorkunitFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    """A world's project, whose one workunit's in-progress result is long past its deadline."""
    project = ProjectFactory(slug="world-1", name="A world", kind=Project.Kind.WORLD, simulated_time=NOW)
    wu = WorkunitFactory(app=AppFactory(project=project, name="w1_einstein"), transition_time=NOW - 10)
    ResultFactory(workunit=wu, server_state=ServerState.IN_PROGRESS, report_deadline=NOW - 5)
    return project


@pytest.fixture
def demo_due():
    """A demo workunit due for the transitioner, its result in progress past its deadline."""
    wu = WorkunitFactory(app=AppFactory(name="demo_app"), transition_time=NOW - 10)
    return ResultFactory(workunit=wu, server_state=ServerState.IN_PROGRESS, report_deadline=NOW - 5)


def test_run_daemon_passes_over_the_project_it_names_only(world, demo_due):
    out = io.StringIO()
    call_command("run_daemon", "transitioner", "--once", "--project", "world-1", stdout=out)
    assert out.getvalue().strip() == "transitioner: 1"
    assert Result.objects.filter(project=world).first().server_state == ServerState.OVER  # timed out
    demo_due.refresh_from_db()
    assert demo_due.server_state == ServerState.IN_PROGRESS
    assert set(DaemonStatus.objects.values_list("project__slug", "name")) == {("world-1", "transitioner")}


def test_run_daemon_refuses_an_unknown_project_and_changes_nothing(demo_due):
    with pytest.raises(CommandError, match="unknown project 'nowhere'; the projects are: demo") as error:
        call_command("run_daemon", "transitioner", "--once", "--project", "nowhere")
    assert error.value.returncode == 2
    assert not DaemonStatus.objects.exists()
    assert Result.objects.get().server_state == ServerState.IN_PROGRESS


def test_the_periodic_job_passes_over_live_projects_at_their_clock_and_leaves_worlds_alone(world, demo_due):
    other = ProjectFactory(slug="another", name="Another live project")
    done = run_all_daemons(now=NOW)
    assert set(done) == {"demo", "another"}
    assert done["demo"]["transitioner"] == 1
    assert Result.objects.get(project=world).server_state == ServerState.IN_PROGRESS
    assert not DaemonStatus.objects.filter(project=world).exists()
    assert (
        DaemonStatus.objects.filter(project=other).count() == DaemonStatus.objects.filter(project__slug="demo").count()
    )


def test_projects_page_lists_each_project_with_its_kind_hosts_and_work_in_flight(client, world, demo_due):
    HostFactory(project=world)
    page = client.get("/projects/").content.decode()
    assert "Demo project" in page and "A world" in page
    assert "World" in page and "Live" in page
    assert "/projects/world-1/status/" in page


def test_no_page_of_one_project_shows_a_row_of_another(client, world, demo_due):
    world_wu = Workunit.objects.get(project=world)
    world_result = Result.objects.get(project=world)
    assert client.get(f"/projects/world-1/workunits/{world_wu.pk}/").status_code == 200
    assert client.get(f"/projects/demo/workunits/{world_wu.pk}/").status_code == 404
    assert client.get(f"/project/workunits/{world_wu.pk}/").status_code == 404
    assert client.get(f"/project/results/{world_result.pk}/").status_code == 404
    listing = client.get("/projects/world-1/workunits/").content.decode()
    assert world_wu.name in listing and demo_due.workunit.name not in listing
    demo_listing = client.get("/project/workunits/").content.decode()
    assert demo_due.workunit.name in demo_listing and world_wu.name not in demo_listing
    status = client.get("/projects/world-1/status.json").json()
    assert [app["name"] for app in status["apps"]] == ["w1_einstein"]
    assert client.get("/projects/nowhere/workunits/").status_code == 404


def test_each_project_has_a_configuration_page_of_its_own_config_xml(client, world):
    Project.objects.filter(pk=world.pk).update(
        config_xml="<boinc><config><homogeneous_redundancy>2</homogeneous_redundancy></config></boinc>"
    )
    page = client.get("/projects/world-1/config/").content.decode()
    assert "homogeneous_redundancy" in page and "2 (coarse)" in page and "&lt;boinc&gt;" in page
    # the demo's row, which migration 0022 makes, is gone after a transactional test's flush
    Project.demo()
    demo = client.get("/projects/demo/config/").content.decode()
    assert "0 (off)" in demo and "None of its own" in demo
    assert client.get("/projects/nowhere/config/").status_code == 404


def test_each_projects_pages_tell_clients_that_projects_master_url(client):
    science = ProjectFactory(slug="science", name="Science")
    for path, master in [
        ("/projects/science/status/", 'href="/projects/science/boinc/"'),
        ("/projects/science/workunits/", 'href="/projects/science/boinc/"'),
        ("/projects/demo/status/", 'href="/boinc/"'),
        ("/project/status/", 'href="/boinc/"'),
    ]:
        page = client.get(path).content.decode()
        footer = page[page.index('<footer class="bottom">') :]
        assert master in footer, path
    assert science.master_path() == "/projects/science/boinc/"
    assert Project.demo().master_path() == "/boinc/"


@pytest.mark.database
def test_a_volunteer_has_one_credit_row_per_project_in_a_team_of_that_project():
    other = ProjectFactory()
    ann = UserFactory(username="ann")
    UserCredit.objects.create(project=Project.demo(), user=ann, total_credit=1.0)
    UserCredit.objects.create(project=other, user=ann, total_credit=2.0, team=TeamFactory(project=other))
    assert sorted(ann.credits.values_list("total_credit", flat=True)) == [1.0, 2.0]
    with pytest.raises(IntegrityError), transaction.atomic():
        UserCredit.objects.create(project=other, user=ann)
    stray = UserCredit(project=Project.demo(), user=UserFactory(), team=TeamFactory(project=other))
    with pytest.raises(ValidationError, match="another project"):
        stray.full_clean()
