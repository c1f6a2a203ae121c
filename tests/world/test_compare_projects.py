"""A comparison is two projects (DESIGN.md "Projects"): the plain and the locality world a
comparison starts (or the two server settings of a lab host attached twice) run on one seed,
each in a project of its own, and the comparison page's figures are each project's rows."""

import django_rq
import pytest
from django.db.models import Sum
from django.urls import reverse

from backend.models import Host, Project, Result, ServerState, ValidateState
from boincweb.human import number
from tests.factories import StoredScenarioFactory, UserFactory
from tests.pages import parse
from tests.world.test_project_isolation import cross_project_references, rows_per_table
from tests.world.test_world import SMALL_CUSHION, run_queue
from world import jobs
from world.models import World, WorldSample

pytestmark = pytest.mark.django_db(transaction=True)

# Small and quick: a quarter of a simulated day for three hosts, in few slices.
COMPARE = {"hosts": 3, "days": 0.25, "seed": 12, "speedup": 200000}
ATTACH = {
    "engine_hosts": 1,
    "simple_hosts": 2,
    "policy": "boinc7",
    "days": 0.25,
    "seed": 3,
    "speedup": 3600,
    "resource_share": 100,
}


def test_a_comparison_runs_two_worlds_each_in_its_own_project_and_its_page_shows_each_projects_rows(
    client, redis_client
):
    client.force_login(UserFactory(username="grace", is_staff=True))
    response = client.post(reverse("worlds:compare_start"), COMPARE)
    assert response.status_code == 302
    plain, local = worlds = list(World.objects.order_by("pk"))
    # before their first slices run: a small cushion, so that the drain is short (SMALL_CUSHION)
    World.objects.update(settings=SMALL_CUSHION)
    queue = django_rq.get_queue(jobs.QUEUE)
    run_queue(queue, lambda: not World.objects.filter(status=World.Status.RUNNING).exists(), chains=2)
    for world in worlds:
        world.refresh_from_db()
        assert world.status == World.Status.FINISHED, world.error
    assert (plain.locality, local.locality) == (False, True)
    assert (plain.seed, plain.hosts, plain.days) == (local.seed, local.hosts, local.days)

    # two projects, each a world's, holding that world's app, hosts and work and nothing else
    projects = [w.project for w in worlds]
    assert len({p.pk for p in projects}) == 2
    assert all(p.kind == Project.Kind.WORLD for p in projects)
    for world, project in zip(worlds, projects):
        assert world.app.project_id == project.pk
        assert cross_project_references(project) == {}
        rows = rows_per_table(project)
        assert rows["App"] == 1 and rows["Host"] == COMPARE["hosts"] and rows["Result"] > 0
    owners = [set(Host.objects.filter(project=p).values_list("owner_id", flat=True)) for p in projects]
    assert not owners[0] & owners[1]

    # the page's figures, world by world, are its project's rows
    page = parse(client.get(reverse("worlds:compare") + f"?worlds={plain.pk},{local.pk}").content.decode())
    table = {
        row.find("td").get_text(strip=True): [td.get_text(strip=True) for td in row.find_all("td")[1:]]
        for row in page.find(attrs={"data-testid": "compare-figures"}).find_all("tr")
        if row.find("td")
    }
    for column, project in enumerate(projects):
        results = Result.objects.filter(project=project)
        assert table["jobs sent"][column] == str(results.exclude(sent_time=0).count())
        assert table["jobs reported"][column] == str(results.exclude(received_time=0).count())
        credit = results.aggregate(total=Sum("granted_credit"))["total"] or 0.0
        assert table["credit granted"][column] == number(credit)
    for world, project in zip(worlds, projects):
        last = WorldSample.objects.filter(world=world).order_by("-t").first()
        results = Result.objects.filter(project=project)
        assert last.over == results.filter(server_state=ServerState.OVER).count()
        assert last.valid == results.filter(validate_state=ValidateState.VALID).count()
    assert table["scheduling"] == ["plain", "locality"]


def test_a_comparison_of_two_server_settings_is_two_projects_each_with_its_own_settings(client, redis_client):
    """A lab host attached twice (world.views.world_attach), deadlines of 72 and 24 hours: after
    each world's first slice, each holds its own project, app and hosts."""
    client.force_login(UserFactory(username="grace", is_staff=True))
    stored = StoredScenarioFactory(preset="seed-002-cpu-and-gpu")
    form = {
        **ATTACH,
        "compare": "on",
        "delay_bound_hours_a": 72,
        "delay_bound_hours_b": 24,
    }
    assert client.post(reverse("worlds:attach", args=[stored.pk]), form).status_code == 302
    worlds = list(World.objects.order_by("pk"))
    assert len(worlds) == 2
    django_rq.get_worker(jobs.QUEUE).work(burst=True, max_jobs=2)
    for world in worlds:
        world.refresh_from_db()
        assert world.project is not None and world.clock > 0, world.error
    projects = [w.project for w in worlds]
    assert projects[0].pk != projects[1].pk
    for project, hours in zip(projects, (72, 24)):
        assert cross_project_references(project) == {}
        assert [app.delay_bound for app in project.apps.all()] == [hours * 3600]
        rows = rows_per_table(project)
        assert rows["Host"] == ATTACH["simple_hosts"] + ATTACH["engine_hosts"] and rows["Result"] > 0
