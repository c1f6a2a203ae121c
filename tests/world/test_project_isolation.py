"""Projects side by side (DESIGN.md "Projects", issue 32's "Done when"): a world's daemons, at a
clock 200 days ahead of the demo's, leave every row of the demo project as the demo alone
leaves it; ``manage.py world`` beside ``seed_demo`` changes no demo workunit or result, and the
demo's pages show none of the world's apps; two worlds sharded over two RQ workers side by side
leave each the rows it leaves alone."""

import hashlib
import io
from typing import Any

import django_rq
import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import models

from backend.daemons import credit, daemon_names, run_pass
from backend.models import LifecycleEvent, Project, Result, ServerState, Workunit
from protocol.models import AppVersionFile
from tests.factories import (
    NOW,
    AppFactory,
    AppVersionFactory,
    HostFactory,
    ResultFactory,
    UserFactory,
    WorkunitFactory,
)
from tests.world.test_shards import wait_for_end, workers
from world import shards
from world.models import World
from world.simulation import Simulation, WorldSettings

pytestmark = pytest.mark.django_db(transaction=True)

DAY = 86400
HOURS = 24
AHEAD = 200 * DAY

# every table of a project's rows, AppVersionFile included (protocol's)
MODELS: list[Any] = [*apps.get_app_config("backend").get_models(), AppVersionFile]
PROJECT_TABLES = [
    model for model in MODELS if any(f.name == "project" for f in model._meta.fields) and model is not Project
]


def checksums(project: Project) -> dict[str, str]:
    """Per table, a digest of the project's rows by their values: ids and the ids of other rows
    left out (rows made in another order get other ids) and the wall-clock timestamps too."""
    digests = {}
    for model in PROJECT_TABLES:
        names = [
            f.attname
            for f in model._meta.fields
            if not f.primary_key and not f.is_relation and not isinstance(f, models.DateTimeField)
        ]
        values = model.objects.filter(project=project).values_list(*names)
        if model is LifecycleEvent:
            values = [event_by_name(row, names) for row in values]
        rows = sorted(repr(row) for row in values)
        digests[model.__name__] = hashlib.sha256("\n".join(rows).encode()).hexdigest() + f" ({len(rows)} rows)"
    return digests


def event_by_name(row: tuple, names: list[str]) -> tuple:
    """A lifecycle event's values with a canonical result named rather than numbered: the
    validator's event holds the result's id in ``new``, and results made while two worlds run
    at once take ids in whichever order their transitioners ran."""
    values = dict(zip(names, row, strict=True))
    if values["field"] == "canonical_result":
        names_by_id = dict(Result.objects.filter(id__in=[values["old"], values["new"]]).values_list("id", "name"))
        values["old"], values["new"] = names_by_id.get(values["old"]), names_by_id.get(values["new"])
    return tuple(values.values())


def rows_per_table(project: Project) -> dict[str, int]:
    """The project's rows per table, the empty tables left out."""
    counts = {model.__name__: model.objects.filter(project=project).count() for model in PROJECT_TABLES}
    return {name: n for name, n in counts.items() if n}


def cross_project_references(project: Project) -> dict[str, int]:
    """Per foreign key from one project table to another (and a workunit's input files), the
    project's rows that refer to a row of another project; {} when there are none."""
    found = {}
    for model in PROJECT_TABLES:
        for f in model._meta.fields:
            if f.many_to_one or f.one_to_one:
                if f.related_model not in PROJECT_TABLES:
                    continue
                rows = model.objects.filter(project=project, **{f"{f.name}__isnull": False})
                n = rows.exclude(**{f"{f.name}__project": project}).count()
                if n:
                    found[f"{model.__name__}.{f.name}"] = n
    links = Workunit.input_files.through.objects.filter(workunit__project=project).exclude(file__project=project)
    if links.exists():
        found["Workunit.input_files"] = links.count()
    return found


def demo_project_rows() -> Project:
    """A demo project of fixed names and times: an app whose work generator keeps 4 results
    unsent, three hosts, and workunits whose results are unsent, in progress (due in a day,
    so a transitioner at a later clock would time them out) or reported."""
    demo = Project.demo()
    app = AppFactory(project=demo, name="demo_app", unsent_target=4, min_quorum=1, target_nresults=1)
    AppVersionFactory(app=app)
    hosts = [
        HostFactory(project=demo, owner=UserFactory(username=f"demo-volunteer{i}"), domain_name=f"demo-host{i}")
        for i in range(3)
    ]
    for i in range(9):
        wu = WorkunitFactory(app=app, name=f"demo_wu{i}", transition_time=NOW + 3600 * (i + 1))
        state = (ServerState.UNSENT, ServerState.IN_PROGRESS, ServerState.IN_PROGRESS)[i % 3]
        host = hosts[i % 3] if state == ServerState.IN_PROGRESS else None
        ResultFactory(
            workunit=wu,
            name=f"demo_wu{i}_0",
            server_state=state,
            host=host,
            sent_time=NOW if host else 0,
            report_deadline=NOW + DAY + 3600 * i if host else 0,
        )
    return demo


def run_day(world: Simulation | None) -> dict[str, str]:
    """The demo's daemons every hour of a day at its clock, and with ``world`` the world's
    rounds for the same hours at its own clock; the demo's checksums at the end."""
    credit._last_av_update.clear()  # this process's update times, as a fresh daemon has them
    demo = demo_project_rows()
    if world is not None:
        world.setup()
    for hour in range(1, HOURS + 1):
        for name in daemon_names():
            run_pass(name, project=demo, now=NOW + hour * 3600)
        if world is not None:
            world.run_until(hour * 3600.0)
    return checksums(demo)


@pytest.fixture
def files(settings, tmp_path):
    settings.BOINCWEB_DATA_DIR = tmp_path
    settings.DOWNLOAD_DIR = tmp_path / "download"
    settings.UPLOAD_DIR = tmp_path / "upload"


def test_a_world_200_days_ahead_leaves_every_demo_row_as_the_demo_alone_leaves_it(files):
    alone = run_day(None)
    call_command("flush", interactive=False, verbosity=0)
    world = Simulation(WorldSettings(hosts=8, days=1, seed=3, start_time=NOW + AHEAD), prefix="iso")
    beside = run_day(world)
    assert beside == alone
    # the world did work of its own meanwhile, at its own clock, in its own project
    project = Project.objects.get(pk=world.project_id)
    assert project.kind == Project.Kind.WORLD and project.simulated_time >= NOW + AHEAD
    assert Result.objects.filter(project=project, server_state=ServerState.OVER).exists()
    assert not Result.objects.filter(project=project).exclude(app__project=project).exists()
    demo = Project.demo()
    assert Result.objects.filter(project=demo, server_state=ServerState.IN_PROGRESS).count() == 6


def test_seed_demo_then_a_world_changes_no_demo_workunit_or_result(files, client):
    call_command("seed_demo", "--workunits", "30", "--hosts", "3", stdout=io.StringIO())
    demo = Project.demo()

    def demo_rows():
        return (
            list(Workunit.objects.filter(project=demo).order_by("id").values()),
            list(Result.objects.filter(project=demo).order_by("id").values()),
        )

    before = demo_rows()
    call_command("world", "--hosts", "20", "--days", "1", stdout=io.StringIO())
    assert demo_rows() == before
    world = World.objects.get()
    assert world.project.kind == Project.Kind.WORLD
    assert Workunit.objects.filter(project=world.project).exists()
    for path in ("/", "/project/status/", f"/projects/{demo.slug}/status/"):
        page = client.get(path)
        assert page.status_code == 200
        assert world.app.name not in page.content.decode()
    assert "example_app" in client.get("/project/status/").content.decode()
    assert world.app.name in client.get(f"/projects/{world.project.slug}/status/").content.decode()
    assert world.app.name not in client.get("/project/status.json").content.decode()
    assert client.get("/projects/no-such-project/status/").status_code == 404


# Two worlds sharded over RQ workers (world.shards), small: a few hosts, hourly rounds, deadlines
# of a few hours, a cushion of 8 unsent results (tests/world/test_world.py: SMALL_CUSHION), run up
# to and with the round at STOP_AT (a sharded world's drain skips no round, so its end is days of
# rounds away): half a day of work and of its drain, results timed out and sent again among it.
SHARDED: dict[str, Any] = dict(
    hosts=4, days=0.25, cushion=8, delay_bound=3 * 3600, daemon_interval=3600.0, error_rate=0.05
)
STOP_AT = 12 * 3600.0
# One shard per world: a world of several shards makes its requests in whatever order the workers
# run them, so even alone it leaves other rows each time (world.shards); one shard makes the
# single chain's requests in its order, and the two worlds' jobs still spread over both workers.
SHARDS = 1
WORLDS = (("iso-a", 21), ("iso-b", 22))


def set_up_worlds() -> dict[str, Simulation]:
    """Both worlds set up on an emptied database, its id sequences started again, in the same
    order each time, so that their rows have the same ids each time (a scheduler's lifecycle
    event names the host it sent a result to by id, a credit history row its volunteer). A
    transactional test leaves the sequences where the tests before it left them."""
    call_command("flush", interactive=False, verbosity=0)
    sims = {}
    for prefix, seed in WORLDS:
        sims[prefix] = Simulation(WorldSettings(seed=seed, **SHARDED), prefix=prefix)
        sims[prefix].setup()
    return sims


def sharded_rows(sim: Simulation) -> dict[str, str]:
    return checksums(Project.objects.get(pk=sim.project_id))


@pytest.mark.database  # several processes write at once: database-specific
def test_two_sharded_worlds_side_by_side_leave_each_the_rows_it_leaves_alone(redis_client, data_dirs, tmp_path):
    credit._last_av_update.clear()  # as the workers' fresh processes have it
    alone = {}
    for prefix, _ in WORLDS:
        sim = set_up_worlds()[prefix]  # the other one set up, and left alone
        shards.start(sim, SHARDS, run=f"alone-{prefix}", stop_at=STOP_AT)
        django_rq.get_worker(shards.QUEUE).work(burst=True)
        assert shards.status(redis_client, f"alone-{prefix}") == "stopped"
        alone[prefix] = sharded_rows(sim)
    redis_client.delete(*redis_client.keys("rq:*"))  # the alone runs' job registries

    sims = set_up_worlds()
    for prefix, sim in sims.items():
        shards.start(sim, SHARDS, run=f"beside-{prefix}", stop_at=STOP_AT)
    running = workers(2, tmp_path, data_dirs)
    try:
        for prefix in sims:
            ended = wait_for_end(redis_client, f"beside-{prefix}", 300)
            assert ended == "stopped", redis_client.get(shards.key(f"beside-{prefix}", "error"))
    finally:
        for worker in running:
            worker.terminate()
        for worker in running:
            worker.wait(timeout=60)
    for prefix, sim in sims.items():
        assert sharded_rows(sim) == alone[prefix], prefix
        assert cross_project_references(Project.objects.get(pk=sim.project_id)) == {}
    # they ran at once, over both workers
    queue = django_rq.get_queue(shards.QUEUE)
    ran = [queue.fetch_job(job_id) for job_id in queue.finished_job_registry.get_job_ids()]
    spans = {
        prefix: [(job.started_at, job.ended_at) for job in ran if job.args[0] == f"beside-{prefix}"]
        for prefix, _ in WORLDS
    }
    (a, b) = spans.values()
    assert min(s for s, _ in a) < max(e for _, e in b) and min(s for s, _ in b) < max(e for _, e in a)
    assert len({job.worker_name for job in ran}) == 2
