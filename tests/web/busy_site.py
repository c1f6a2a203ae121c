"""A site after real activity, for the crawler and the browser-console tests.

A small volunteer world has run a simulated day against the project (every daemon has made
its passes, hosts have fetched, computed, failed and reported), a live project other than the
demo has been made as an admin makes one (``manage.py make_project``) and given work by the
periodic passes, the lab holds a scenario with two finished runs, and there is a staff user and
a volunteer.
"""

import io
from dataclasses import dataclass

from django.core.management import call_command
from django.templatetags.static import static

from backend.daemons import daemon_names
from backend.jobs import run_all_daemons
from backend.models import DaemonStatus, Host, Result, UserCredit, Workunit
from scheduling.jobs import run_simulation
from tests.factories import RunFactory, StoredScenarioFactory, TeamFactory, UserFactory, WorldFactory, demo_project
from world import jobs
from world.models import World

DAY = 86400
STAFF = ("crawler-staff", "pw-crawler-staff-1")
# the live project beside the demo: its pages, master page, account page and preferences
LIVE = "science"


@dataclass
class BusySite:
    staff: object
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
    """Fill the test database; ``settings`` is pytest-django's fixture (the project's files go
    under ``tmp_path``)."""
    settings.BOINCWEB_DATA_DIR = tmp_path
    settings.DOWNLOAD_DIR = tmp_path / "download"
    settings.UPLOAD_DIR = tmp_path / "upload"
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
