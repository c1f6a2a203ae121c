"""The pages of a world's engine hosts (issue 20, both sides on one screen): after a world with
engine hosts has run, each engine host's page draws the engine's charts and links every slice
of the world's jobs to its result and workunit, and the workunit page links back."""

import json

import pytest
from bs4 import BeautifulSoup
from django.urls import reverse

from backend.models import Result
from tests.factories import WorldFactory
from tests.shared_rows import shared_rows
from world import engine_records, jobs
from world.models import EngineHostRun, EngineRecordChunk, World

# Each test reads the one world the module builds (shared_rows), inside a transaction of its
# own that is rolled back.
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def sliced_world(django_db_setup, django_db_blocker):
    """A small world with engine hosts run to its end in slices, stored after each as its RQ
    chain stores it (world.jobs); (the World row, the simulation at its end). Built once for
    the module's tests, which only read it."""

    def build():
        world = WorldFactory(
            hosts=2,
            days=0.5,
            seed=3,
            settings={"engine_hosts": [{"count": 2, "policy": "boinc7"}, {"count": 1, "policy": "boinc5"}]},
        )
        sim = jobs.create_simulation(world)
        while not sim.finished:
            sim.run_until(sim.t + 5 * 3600)
            jobs.store(world.pk, sim)
        world.refresh_from_db()
        return world, sim

    yield from shared_rows(django_db_blocker, build)


@pytest.fixture
def engine_world(sliced_world):
    return sliced_world[0]


def project_slug(world):
    """The slug of the world's project, whose pages show its rows."""
    return World.objects.get(pk=world.pk).project.slug


def figure(soup, element_id):
    return json.loads(soup.find("script", id=element_id).string)


def test_each_engine_host_keeps_its_records_in_chunks_put_end_to_end(sliced_world):
    world, sim = sliced_world
    runs = list(EngineHostRun.objects.filter(world=world))
    assert [r.policy for r in runs] == ["boinc7", "boinc7", "boinc5"]
    for run, host in zip(runs, sim.engine_hosts):
        assert EngineRecordChunk.objects.filter(run=run).count() >= 5
        stored = engine_records.records(run)
        # the stored records leave the run, which keeps only what came after the last store
        assert not host.em.rpc_events and not host.em.slices
        # every RPC of every project, in time order across the chunks, as the run counted them
        times = [e["time"] for e in stored["rpcs"]]
        assert times == sorted(times) and times
        for p in host.em.projects:
            assert sum(e["project"] == p.name for e in stored["rpcs"]) == p.rpcs + p.rpc_failures
        # no two slices on one lane at once, and none after the world's end
        lanes = {}
        for s in stored["slices"]:
            lanes.setdefault((s["resource"], s["instance"]), []).append((s["start"], s["end"]))
        for spans in lanes.values():
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert max(s["end"] for s in stored["slices"]) <= sim.finished_at
        assert stored["time"] == sim.t and not stored["partial"]


def test_the_world_page_lists_its_engine_hosts(client, engine_world):
    soup = BeautifulSoup(client.get(reverse("worlds:detail", args=[engine_world.pk])).content, "html.parser")
    links = soup.select("[data-testid=engine-host-link]")
    assert len(links) == 3
    assert links[0]["href"] == reverse("worlds:engine_host", args=[engine_world.pk, 2])


def test_an_engine_hosts_page_links_its_slices_to_results_and_workunits(client, engine_world):
    run = EngineHostRun.objects.filter(world=engine_world).first()
    response = client.get(reverse("worlds:engine_host", args=[engine_world.pk, run.index]))
    assert response.status_code == 200
    soup = BeautifulSoup(response.content, "html.parser")
    gantt = figure(soup, "engine-gantt")
    links = [url for trace in gantt["data"] for url in trace.get("customdata", [])]
    assert links, "the world's jobs' bars carry their result pages"
    first = Result.objects.get(pk=int(links[0].rstrip("/").rsplit("/", 1)[1]))
    assert first.host_id == run.host_id
    for name in ("engine-rec", "engine-buffer"):
        assert figure(soup, name)["data"]
    rows = soup.select("[data-testid=slices] [data-testid=workunit-link]")
    assert rows and rows[0]["href"].startswith(f"/projects/{project_slug(engine_world)}/workunits/")
    assert soup.select("[data-testid=rpcs] tr")[1:], "its RPCs are listed"


def test_a_workunit_computed_on_an_engine_host_links_back_to_its_slices(client, engine_world):
    run = EngineHostRun.objects.filter(world=engine_world).first()
    result = Result.objects.filter(host_id=run.host_id, elapsed_time__gt=0).first()
    soup = BeautifulSoup(
        client.get(reverse("projects:workunit_detail", args=[project_slug(engine_world), result.workunit_id])).content,
        "html.parser",
    )
    back = [a["href"] for a in soup.select("[data-testid=result-link]")]
    page = reverse("worlds:engine_host", args=[engine_world.pk, run.index])
    assert f"{page}?job={result.name}#slices" in back
    chosen = BeautifulSoup(client.get(page, {"job": result.name}).content, "html.parser")
    assert chosen.select("[data-testid=chosen-slice]"), "the result's own slices come first"


def test_an_unknown_engine_host_is_a_404(client, engine_world):
    assert client.get(reverse("worlds:engine_host", args=[engine_world.pk, 99])).status_code == 404
