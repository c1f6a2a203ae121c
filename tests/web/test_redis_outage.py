"""With Redis stopped, every page answers with a message instead of a 500, the POSTs that would
enqueue a job create nothing and say why, and the worker's scheduler comes back with Redis
(boincweb.redis_outage, boincweb.worker)."""

import subprocess
import time
from collections import Counter, deque
from datetime import timedelta

import django_rq
import pytest
import redis
from django.conf import settings as django_settings
from django.db import transaction
from django.test import Client, override_settings
from rq import Worker as RQWorker

from backend.models import Host, Workunit
from boincweb import embedded_redis
from scheduling.models import Run
from tests.factories import RunFactory, WorldFactory
from tests.shared_rows import shared_rows
from tests.web.busy_site import build_busy_site
from tests.web.serving import BASE, MANAGE, child_env
from tests.web.test_crawler import NOT_CRAWLED, Links, internal, pattern, site_routes
from world import jobs
from world.models import World
from world.views import start_new

# Transactional: the POSTs under test enqueue on commit. The walk of every page only reads, and
# runs in a transaction rolled back over the busy site built once for the module (shared_rows),
# before the transactional tests (pytest-django runs those last); the POSTs' test is the first
# of those, and the tables are emptied after it as after any transactional test.
pytestmark = pytest.mark.django_db(transaction=True)

OUTAGE = b"Redis is not reachable"
PER_PATTERN = 2


def point_at(settings, url):
    settings.REDIS_URL = url
    settings.RQ_QUEUES = {name: {**queue, "URL": url} for name, queue in settings.RQ_QUEUES.items()}


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own, on a Unix socket, that the test may stop."""
    socket_path = tmp_path / "redis.sock"
    server = {"process": embedded_redis.start(socket_path)}

    def restart():
        server["process"] = embedded_redis.start(socket_path)

    yield f"unix://{socket_path}", server, restart
    embedded_redis.stop(server["process"])


@pytest.fixture
def stop_redis(settings, own_redis):
    """Point the settings at this test's own Redis, then stop it."""

    def stop():
        url, server, _ = own_redis
        point_at(settings, url)
        assert redis.Redis.from_url(url).ping()
        embedded_redis.stop(server["process"])

    return stop


@pytest.fixture(scope="module")
def busy_site(django_db_setup, django_db_blocker, tmp_path_factory):
    """The busy site's rows, built once for the module, its files in a directory of its own."""
    data_dir = tmp_path_factory.mktemp("busy-site")
    with override_settings(BOINCWEB_DATA_DIR=data_dir):
        yield from shared_rows(django_db_blocker, lambda: build_busy_site(django_settings, data_dir))


@pytest.fixture
def site_without_redis(busy_site, redis_client, stop_redis):
    """The busy site, with work in flight that the pages judge through Redis (a lab run and a
    world waiting on their jobs), and then its Redis stopped."""
    site = busy_site
    RunFactory(scenario=site.runs[0].scenario, job_id="lab-run-waiting")
    World.objects.filter(pk=site.world.pk).update(status=World.Status.RUNNING, job_id="world-waiting")
    stop_redis()
    return site


def walk(client, start):
    """Every page reachable from ``start`` by links and htmx URLs, a few per URL pattern:
    {(url, htmx): response}."""
    queue = deque((url, False) for url in start)
    queue.extend((url, True) for url in start)
    per_pattern, seen = Counter(), {}
    while queue:
        url, htmx = queue.popleft()
        bucket = (pattern(url), htmx)
        if (url, htmx) in seen or per_pattern[bucket] >= PER_PATTERN:
            continue
        per_pattern[bucket] += 1
        response = client.get(url, **({"HTTP_HX_REQUEST": "true"} if htmx else {}))
        seen[(url, htmx)] = response
        if response.status_code in (301, 302):
            target = internal(url, response["Location"])
            if target:
                queue.append((target, False))
        if not response.get("Content-Type", "").startswith("text/html") or response.streaming:
            continue
        parser = Links()
        parser.feed(response.content.decode())
        queue.extend((t, False) for t in (internal(url, h) for h in parser.links) if t)
        queue.extend((t, True) for t in (internal(url, h) for h in parser.htmx) if t)
    return seen


def rows():
    statuses = World.objects.order_by("pk").values_list("status", flat=True)
    return World.objects.count(), list(statuses), Run.objects.count()


@pytest.mark.django_db
def test_with_redis_stopped_every_page_answers_with_a_message_and_never_a_500(site_without_redis):
    site = site_without_redis
    anonymous, staff = Client(raise_request_exception=False), Client(raise_request_exception=False)
    staff.force_login(site.staff)
    waiting = Run.objects.get(job_id="lab-run-waiting")
    # the pages of the work in flight first, before the walk's quota per pattern is used up,
    # and the pages only the scenario's page links to (it needs Redis for its waiting run)
    scenario = f"/lab/{waiting.scenario_id}/"
    start = [
        f"/lab/runs/{waiting.pk}/",
        f"/lab/compare/?runs={site.runs[0].pk},{waiting.pk}",
        "/django-rq/",
        "/admin/",
        scenario + "edit/",
        scenario + "scenario.txt",
        scenario + "scenario.json",
        scenario + "client_state.zip",
    ] + site.sample_paths()
    failures, outage_pages, reached = [], set(), set()
    for who, client in [("anonymous", anonymous), ("staff", staff)]:
        for (url, htmx), response in walk(client, start).items():
            reached.add(pattern(url)[0])
            where = f"{who}: {url}{' (htmx)' if htmx else ''}"
            if response.status_code == 503:
                body = response.content
                if OUTAGE not in body or (not htmx and b"<h1>Redis not reachable</h1>" not in body):
                    failures.append(f"{where}: a 503 without the message")
                outage_pages.add(pattern(url)[0])
            elif response.status_code >= 500:
                failures.append(f"{where}: {response.status_code}")
    assert not failures, "\n".join(failures)
    # the pages that need Redis said so
    assert {"lab/<int:pk>/", "lab/runs/<int:pk>/", "lab/compare/", "django-rq/"} <= outage_pages, outage_pages
    # and the walk went everywhere the crawler goes
    missed = sorted(
        set(site_routes()) - reached - set(NOT_CRAWLED) - {"lab/runs/<int:pk>.json", "lab/runs/<int:pk>.csv"}
    )
    assert not missed, f"not reached: {missed}"

    # the pages that read only the database still work, and say Redis is down where it matters
    home = anonymous.get("/")
    assert home.status_code == 200 and b"not reachable" in home.content
    assert anonymous.get("/project/status/").status_code == 200
    assert anonymous.get("/project/workunits/").status_code == 200
    for url in [
        "/project/worlds/",
        f"/project/worlds/{site.world.pk}/",
        f"/project/worlds/compare/?worlds={site.world.pk - 1},{site.world.pk}",
    ]:
        page = anonymous.get(url)
        assert page.status_code == 200 and OUTAGE in page.content, url
        assert b"whether the jobs behind it still run cannot be" in page.content
    # an htmx poll gets the notice alone, which base.html shows above the page
    poll = staff.get(f"/lab/runs/{waiting.pk}/", HTTP_HX_REQUEST="true")
    assert poll.status_code == 503 and poll["Retry-After"] == "30"
    assert OUTAGE in poll.content and b"<html" not in poll.content
    assert b'id="service-notice"' in anonymous.get("/").content


def test_with_redis_stopped_posts_that_enqueue_create_nothing_and_say_why(site_without_redis):
    site = site_without_redis
    staff = Client(raise_request_exception=False)
    staff.force_login(site.staff)
    paused = WorldFactory(name="paused", hosts=3, days=1, status=World.Status.PAUSED)
    failed = WorldFactory(name="failed", hosts=3, days=1, status=World.Status.FAILED, error="Its job failed: boom")
    before = rows()
    scenario = site.runs[0].scenario_id
    posts = [
        ("/project/worlds/new/", {"name": "x", "hosts": 3, "days": 1, "seed": 1, "speedup": 3600}),
        ("/project/worlds/compare/new/", {"hosts": 3, "days": 1, "seed": 1, "speedup": 3600}),
        (f"/project/worlds/{paused.pk}/resume/", {}),
        (
            f"/project/worlds/attach/{scenario}/",
            {
                "engine_hosts": 2,
                "simple_hosts": 0,
                "policy": "boinc7",
                "days": 1,
                "seed": 1,
                "speedup": 3600,
                "resource_share": 100,
            },
        ),
        (f"/project/worlds/{failed.pk}/resume/", {}),
        (
            f"/lab/{scenario}/runs/",
            {"policy": "boinc7", "duration": "1h", "seed": 1, "compat": "intended", "delta": 60},
        ),
        (
            f"/lab/{scenario}/compare/",
            {"policies": ["boinc5", "boinc7"], "duration": "1h", "seed": 1, "compat": "intended"},
        ),
    ]
    for url, data in posts:
        response = staff.post(url, data)
        assert response.status_code == 503, (url, response.status_code)
        assert OUTAGE in response.content and b"nothing was created or changed" in response.content
        assert rows() == before, url
        htmx = staff.post(url, data, HTTP_HX_REQUEST="true")
        assert htmx.status_code == 503 and b"<html" not in htmx.content
    assert World.objects.get(pk=failed.pk).error == "Its job failed: boom"

    # the project's own POSTs need no Redis and work
    wu = Workunit.objects.filter(error_mask=0).first()
    url = f"/projects/{wu.project.slug}/workunits/actions/transition/"
    assert staff.post(url, {"id": [wu.pk]}).status_code < 500
    host = Host.objects.first()
    prefs = staff.get(f"/projects/{host.project.slug}/hosts/{host.pk}/prefs/")
    assert prefs.status_code == 200
    # the anonymous and the non-staff get their usual answers, not the outage
    assert Client().post("/project/worlds/new/", {}).status_code == 302


def test_a_world_start_that_loses_redis_at_its_enqueue_is_undone(stop_redis):
    stop_redis()
    paused = WorldFactory(name="paused", hosts=3, days=1, status=World.Status.PAUSED)
    with pytest.raises(redis.exceptions.ConnectionError):
        with transaction.atomic():
            jobs.start(paused.pk)
    assert World.objects.get(pk=paused.pk).status == World.Status.PAUSED
    count = World.objects.count()
    with pytest.raises(redis.exceptions.ConnectionError):
        start_new(lambda: [WorldFactory(name="new", hosts=3, days=1)])
    assert World.objects.count() == count


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.2)


def test_the_workers_scheduler_and_registration_come_back_with_redis(settings, own_redis, tmp_path):
    url, server, restart = own_redis
    point_at(settings, url)
    log = open(tmp_path / "worker.log", "w+")
    worker = subprocess.Popen(
        [*MANAGE, "rqworker", "default", "--with-scheduler"],
        cwd=BASE,
        env=child_env(REDIS_URL=url),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        connection = redis.Redis.from_url(url)
        wait_for(lambda: RQWorker.all(connection=connection), 120, "worker")
        queue = django_rq.get_queue("default")
        job = queue.enqueue_in(timedelta(seconds=1), "os.getpid")
        wait_for(lambda: job.get_status(refresh=True) == "finished", 60, "scheduled job")

        embedded_redis.stop(server["process"])
        time.sleep(8)  # the scheduler's and the worker's passes meet the outage
        restart()
        wait_for(lambda: RQWorker.all(connection=redis.Redis.from_url(url)), 30, "worker registered again")
        queue = django_rq.get_queue("default")
        job = queue.enqueue_in(timedelta(seconds=1), "os.getpid")
        # rq alone: the scheduler process died with the connection and came back only at the
        # worker's maintenance pass, ten minutes later
        wait_for(lambda: job.get_status(refresh=True) == "finished", 45, "scheduled job after the outage")
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.seek(0)
        output = log.read()
        log.close()
    assert "Traceback" not in output, output
