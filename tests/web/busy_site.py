"""A site after real activity, for the crawler and the browser-console tests.

A small volunteer world has run a simulated day against the project (every daemon has made
its passes, hosts have fetched, computed, failed and reported), a live project other than the
demo has been made as an admin makes one (``manage.py make_project``) and given work by the
periodic passes, the lab holds a scenario with two finished runs, and there is a staff user and
a volunteer.
"""

import atexit
import fcntl
import io
import json
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.management import call_command
from django.db import connection
from django.templatetags.static import static
from factory.django import DjangoModelFactory

from backend.daemons import daemon_names
from backend.jobs import run_all_daemons
from backend.models import DaemonStatus, Host, Result, UserCredit, Workunit
from scheduling.jobs import run_simulation
from scheduling.models import Run
from tests import factories
from tests.factories import RunFactory, StoredScenarioFactory, TeamFactory, UserFactory, WorldFactory, demo_project
from world import jobs
from world.models import World

DAY = 86400
STAFF = ("crawler-staff", "pw-crawler-staff-1")
# the live project beside the demo: its pages, master page, account page and preferences
LIVE = "science"


@dataclass
class BusySite:
    staff: AbstractBaseUser
    world: World
    runs: list

    @staticmethod
    def icon_url():
        return static("img/favicon.svg")

    def sample_paths(self):
        """One page of each kind, with the rows the world made."""
        wu = Workunit.objects.filter(results__isnull=False).order_by("id").first()
        result = Result.objects.exclude(host=None).order_by("id").first()
        host = Host.objects.order_by("id").first()
        run = self.runs[0]
        return [
            "/",
            "/lab/",
            f"/lab/{run.scenario_id}/",
            f"/lab/runs/{run.pk}/",
            f"/lab/compare/?runs={','.join(str(r.pk) for r in self.runs)}",
            f"/lab/compare/?runs={run.pk}",
            "/project/status/",
            "/project/workunits/",
            "/projects/",
            # the world's rows, on its project's pages
            f"/projects/{wu.project.slug}/status/",
            f"/projects/{wu.project.slug}/workunits/{wu.pk}/",
            f"/projects/{result.project.slug}/results/{result.pk}/",
            f"/projects/{host.project.slug}/hosts/",
            f"/projects/{host.project.slug}/hosts/{host.pk}/",
            f"/projects/{host.project.slug}/hosts/{host.pk}/prefs/",
            f"/projects/{host.project.slug}/users/{host.owner_id}/",
            "/project/worlds/",
            f"/project/worlds/{self.world.pk}/",
            f"/project/worlds/compare/?worlds={self.world.pk - 1},{self.world.pk}",
            f"/project/worlds/{self.world.pk}/engine/{self.world.hosts}/",
            f"/project/worlds/attach/{run.scenario_id}/",
            "/boinc/",
            # the live project's
            f"/projects/{LIVE}/status/",
            f"/projects/{LIVE}/boinc/",
            f"/projects/{LIVE}/boinc/account/",
            f"/projects/{LIVE}/boinc/prefs/",
        ]


def build_busy_site(settings, tmp_path):
    """Fill the test database with the busy site; ``settings`` is pytest-django's fixture (the
    project's files go under ``tmp_path``).

    The site is built once per test run and copied after that: the first test of the run to ask
    (on any worker) builds it and keeps a copy of the database and of the files (``Copies``);
    every later one gets that copy, the rows with the same ids, the files under its own
    ``tmp_path``. Five modules walk it, and building it costs a simulated day of two worlds and
    two lab runs; a copy is a file copy. Only the SQLite test database is copied (a backup of the
    whole file; the pass on PostgreSQL builds the site afresh)."""
    point_at(settings, tmp_path)
    copies = Copies.of_run(tmp_path)
    if copies is not None and copies.ready():
        return copies.restore(tmp_path)
    site = build_into(settings, tmp_path)
    if copies is not None:
        copies.save_once(site, tmp_path)
    return site


def point_at(settings, tmp_path):
    settings.BOINCWEB_DATA_DIR = tmp_path
    settings.DOWNLOAD_DIR = tmp_path / "download"
    settings.UPLOAD_DIR = tmp_path / "upload"


class Copies:
    """The built site's copy, shared by the run's workers: ``db.sqlite3`` (a backup of the test
    database), ``files/`` (its data directory) and ``site.json`` (the ids BusySite names), in a
    directory beside the workers' temporary directories. A worker that finds no copy builds the
    site itself rather than wait for another's (the other core is free while it builds); the
    first to finish keeps its copy, under a file lock, and the copy counts only once whole."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    @classmethod
    def of_run(cls, tmp_path: Path) -> "Copies | None":
        """The copies of this run: beside pytest-xdist's ``popen-gwN`` directories (a run on
        several workers) or in a directory of this process's own; None where the test database
        is not SQLite's."""
        if connection.vendor != "sqlite":
            return None
        for parent in Path(tmp_path).parents:
            if parent.name.startswith("popen-gw"):
                return cls(parent.parent / "busy-site-copy")
        global _PROCESS_COPIES
        if _PROCESS_COPIES is None:
            _PROCESS_COPIES = Path(tempfile.mkdtemp(prefix="boincweb-busy-site-"))
            atexit.register(shutil.rmtree, _PROCESS_COPIES, ignore_errors=True)
        return cls(_PROCESS_COPIES)

    def ready(self) -> bool:
        return (self.root / "site.json").exists()

    def save_once(self, site: "BusySite", tmp_path: Path) -> None:
        with open(self.root / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not self.ready():
                    self.save(site, tmp_path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def save(self, site: "BusySite", tmp_path: Path) -> None:
        connection.ensure_connection()
        backup = sqlite3.connect(self.root / "db.sqlite3")
        try:
            connection.connection.backup(backup)
        finally:
            backup.close()
        shutil.copytree(tmp_path, self.root / "files", dirs_exist_ok=True)
        ids = {"staff": site.staff.pk, "world": site.world.pk, "runs": [run.pk for run in site.runs]}
        (self.root / "site.json").write_text(json.dumps(ids))  # last: the copy is whole

    def restore(self, tmp_path: Path) -> "BusySite":
        connection.ensure_connection()
        kept = sqlite3.connect(self.root / "db.sqlite3")
        try:
            kept.backup(connection.connection)
        finally:
            kept.close()
        shutil.copytree(self.root / "files", tmp_path, dirs_exist_ok=True)
        # the factories' sequences of this process may be behind those of the process that built
        # the rows: names drawn from here on must not meet the copied rows' names
        for factory_class in vars(factories).values():
            if isinstance(factory_class, type) and issubclass(factory_class, DjangoModelFactory):
                factory_class.reset_sequence(100_000, force=True)
        ids = json.loads((self.root / "site.json").read_text())
        return BusySite(
            get_user_model().objects.get(pk=ids["staff"]),
            World.objects.get(pk=ids["world"]),
            [Run.objects.get(pk=pk) for pk in ids["runs"]],
        )


_PROCESS_COPIES: Path | None = None


def build_into(settings, tmp_path):
    """Build the busy site in the test database, its files under ``tmp_path``."""
    staff = UserFactory(username=STAFF[0], password=STAFF[1], is_staff=True, is_superuser=True)
    # a live project beside the demo, made from the command line before the worlds, so that it
    # comes before them on /projects/ (the crawl takes a few URLs per route); the periodic
    # passes below fill its app with work
    call_command(
        "make_project", LIVE, "--name", "Science at home", "--app", "fold", "--unsent-target", "4", stdout=io.StringIO()
    )
    # a plain world and its locality partner on one seed, so the worlds page links to their
    # comparison
    for name, locality in [("crawled-locality", True), ("crawled", False)]:
        world = WorldFactory(
            name=name,
            hosts=6,
            days=1,
            seed=5,
            locality=locality,
            status=World.Status.RUNNING,
            settings={
                "file_nbytes": 4096,
                "workunits_per_file": 10,
                "job_gflop": 3.0 * 3600,
                "error_rate": 0.05,
                "daemon_interval": 3600.0,
                # engine hosts have pages of their own (world.engine_pages)
                "engine_hosts": [{"count": 2, "policy": "boinc7"}],
            },
        )
        with jobs.unsynced_commits():
            sim = jobs.create_simulation(world)
            sim.run_until(sim.t + DAY)
            jobs.store(world.pk, sim, status=World.Status.PAUSED)
    # a team, with the first host's owner in it, so that the team pages are linked
    host = Host.objects.order_by("id").first()
    team = TeamFactory(name="crawlers", project=host.project)
    UserCredit.objects.update_or_create(user=host.owner, project=host.project, defaults={"team": team})
    # and twice more by the wall clock, as make run's periodic job does, so that the status
    # page shows every daemon running and the queues' history
    for _ in range(2):
        run_all_daemons()
    assert DaemonStatus.objects.filter(project=demo_project(), passes__gt=0).count() == len(daemon_names())
    assert Workunit.objects.filter(project__slug=LIVE).exists()
    # the demo project beside the worlds, with a team of its own, so that its pages (the old
    # /project/ paths) have rows to link; made after the daemon passes, so that each of its
    # workunits has its results
    call_command("seed_demo", "--workunits", "6", "--hosts", "2", stdout=io.StringIO())
    demo_host = Host.objects.filter(project=demo_project()).first()
    UserCredit.objects.update_or_create(
        user=demo_host.owner, project=demo_project(), defaults={"team": TeamFactory(name="demo crawlers")}
    )
    scenario = StoredScenarioFactory(owner=staff)
    runs = []
    for policy in ("boinc7", "boinc5"):
        run = RunFactory(scenario=scenario, policy=policy, duration=2 * 3600.0)
        assert run_simulation(run.pk) == "done"
        runs.append(run)
    world.refresh_from_db()
    return BusySite(staff, world, runs)
