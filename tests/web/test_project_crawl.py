"""Nothing crosses from one project to another on the pages (issue 32's "Done when"): after the
demo, two worlds and a comparison have run, a crawl of every page reachable from ``/`` and
``/projects/``, as an anonymous visitor and as staff, finds no 5xx, and no page of a project
(``/projects/<slug>/...``, and the demo's old ``/project/...`` paths) names another project's
apps, hosts, workunits or results.

Every name is unique to its project: the demo's are ``seed_demo``'s (``example_app``,
``volunteer-host-<n>``, ``demo_<n>``), a world's start with its prefix (``w<id>``)."""

import io
import re
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from backend.jobs import run_all_daemons
from backend.models import App, Host, Project, Result, Workunit
from tests.factories import UserFactory, WorldFactory
from tests.shared_rows import shared_rows
from tests.web.test_crawler import crawl, pattern
from world import jobs
from world.forms import CompareForm
from world.models import World

# The module's tests read the rows built once (shared_rows), each in a transaction rolled back.
pytestmark = pytest.mark.django_db

HOUR = 3600.0
# Small worlds with a small cushion (tests/world/test_world.py: SMALL_CUSHION), some errors.
WORLD = {"cushion": 8, "error_rate": 0.1, "daemon_interval": HOUR}
# URLs per pattern and project: the crawl reaches each project's pages of every kind.
PER_PATTERN_AND_PROJECT = 2
STAFF = "project-crawler"
# What a name may be made of, as a run of characters on a page.
TOKEN = re.compile(r"[A-Za-z0-9_.\-]+")


def run_world(world, hours):
    """Set the world up and run it ``hours`` of simulated time, stored paused (world.jobs)."""
    with jobs.unsynced_commits():
        sim = jobs.create_simulation(world)
        sim.run_until(hours * HOUR)
        jobs.store(world.pk, sim, status=World.Status.PAUSED)


def build(data_dir):
    with override_settings(
        BOINCWEB_DATA_DIR=data_dir, DOWNLOAD_DIR=data_dir / "download", UPLOAD_DIR=data_dir / "upload"
    ):
        UserFactory(username=STAFF, is_staff=True)
        call_command("seed_demo", "--workunits", "8", "--hosts", "3", stdout=io.StringIO())
        for name, seed in (("first", 31), ("second", 32)):
            run_world(WorldFactory(name=name, hosts=5, days=0.5, seed=seed, settings=WORLD), 8)
        form = CompareForm({"hosts": 4, "days": 0.5, "seed": 33, "speedup": 3600})
        assert form.is_valid(), form.errors
        for world in form.save_pair():
            World.objects.filter(pk=world.pk).update(settings=WORLD)
            world.refresh_from_db()
            run_world(world, 8)
        for _ in range(2):  # the demo's daemons, as make run's periodic job passes them
            run_all_daemons()


@pytest.fixture(scope="module")
def site(django_db_setup, django_db_blocker, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("data")
    yield from shared_rows(django_db_blocker, lambda: build(data_dir))


def names_by_project():
    """slug -> the names of the project's apps, hosts, workunits and results."""
    names = {}
    for project in Project.objects.all():
        names[project.slug] = set()
        for model, field in ((App, "name"), (Host, "domain_name"), (Workunit, "name"), (Result, "name")):
            names[project.slug] |= set(model.objects.filter(project=project).values_list(field, flat=True))
    return names


def project_of(url):
    """The slug of the project whose page ``url`` is, or None: ``/projects/<slug>/...``, and the
    demo's old ``/project/...`` paths (but the worlds', ``/project/worlds/``)."""
    path = urlsplit(url).path
    parts = path.split("/")
    if path.startswith("/projects/") and len(parts) > 3 and parts[2] != "worlds":
        return parts[2]
    if path.startswith("/project/") and not path.startswith("/project/worlds/"):
        return Project.DEMO_SLUG
    return None


def words(text):
    """Every run of name characters on a page, with its ends trimmed of punctuation and its
    parts between dots (a name followed by an extension or a full stop)."""
    found = set()
    for token in TOKEN.findall(text):
        found.add(token)
        found.add(token.strip(".-"))
        found.update(token.split("."))
    return found


def test_no_page_of_a_project_names_another_projects_rows_and_none_fails(site):
    names = names_by_project()
    assert len(names) == 5  # the demo, two worlds and the two sides of the comparison
    assert all(names.values())
    others = {slug: set().union(*(n for s, n in names.items() if s != slug)) for slug in names}
    leaks, own_seen, failures = [], set(), []

    def check(url, htmx, response, body):
        slug = project_of(url)
        if slug is None or response.status_code != 200:
            return
        on_page = words(body.decode(errors="replace"))
        if on_page & names.get(slug, set()):
            own_seen.add(slug)
        leaked = on_page & others.get(slug, set())
        if leaked:
            leaks.append(f"{url}{' (htmx)' if htmx else ''}: {sorted(leaked)[:5]}")

    def bucket(url):
        return pattern(url), project_of(url)

    anonymous, staff = Client(raise_request_exception=False), Client(raise_request_exception=False)
    staff.force_login(UserFactory._meta.model.objects.get(username=STAFF))
    crawled = {}
    for who, client in (("anonymous", anonymous), ("staff", staff)):
        visited, failed = crawl(
            client, starts=("/", "/projects/"), bucket=bucket, per_pattern=PER_PATTERN_AND_PROJECT, on_page=check
        )
        crawled[who] = visited
        failures += [f"{who}: {line}" for line in failed]
    print(f"\ncrawled {len(crawled['anonymous'])} URLs as an anonymous visitor and {len(crawled['staff'])} as staff")
    assert not failures, "\n".join(failures)
    assert not leaks, "pages naming another project's rows:\n" + "\n".join(leaks)
    # the check read every project's pages, which show their own rows
    assert own_seen == set(names)
    reached = {project_of(url) for visited in crawled.values() for url, _ in visited}
    assert set(names) <= reached
