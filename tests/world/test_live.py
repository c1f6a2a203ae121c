"""The live demo (world.live): a world volunteering for seed_demo's app on the wall clock."""

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from backend.daemons import daemon_names, run_pass
from backend.models import App, Host, Outcome, Project, Result, ServerState, ValidateState, Workunit
from world import jobs, live
from world.models import World, WorldSample

pytestmark = pytest.mark.django_db(transaction=True)

BASE_DIR = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000


@pytest.fixture
def demo_project():
    call_command("seed_demo", "--workunits", "20", stdout=io.StringIO())
    return App.objects.get(name=live.DEMO_APP)


def run_for(world, seconds, *, every=5):
    """Step the live world and pass every daemon each ``every`` wall seconds, from T0."""
    for wall in range(T0 + every, T0 + seconds + 1, every):
        live.step(world.pk, wall=wall)
        for name in daemon_names():
            run_pass(name, project=Project.demo(), now=wall)


def test_the_demo_hosts_get_report_and_validate_the_demo_apps_work_within_a_minute(demo_project, redis_client):
    wus_before = Workunit.objects.count()
    world = live.start_demo(now=T0)
    run_for(world, 60)
    results = Result.objects.filter(app=demo_project)
    assert results.filter(server_state=ServerState.IN_PROGRESS).exists()
    assert results.filter(server_state=ServerState.OVER, outcome=Outcome.SUCCESS).exists()
    assert results.filter(validate_state=ValidateState.VALID).exists()
    # the hosts worked for the demo app only, on its own platform: no world app, no data files
    assert list(App.objects.values_list("name", flat=True)) == [live.DEMO_APP]
    hosts = Host.objects.filter(domain_name__startswith=f"w{world.pk}-host")
    assert hosts.count() == live.DEMO_HOSTS
    assert set(hosts.values_list("platform", flat=True)) == {"x86_64-pc-linux-gnu"}
    assert set(results.exclude(host=None).values_list("host__domain_name", flat=True)) <= set(
        hosts.values_list("domain_name", flat=True)
    )
    world.refresh_from_db()
    assert world.clock == 60 and world.status == World.Status.RUNNING
    assert world.summary["jobs_reported"] > 0
    # samples every daemon_interval, the last showing the reported work
    samples = list(WorldSample.objects.filter(world=world).order_by("t"))
    assert [s.t for s in samples] == [float(t) for t in range(0, 61, 5)]
    assert samples[-1].success > 0 and samples[-1].rpcs == world.summary["rpcs"]
    assert Workunit.objects.count() >= wus_before


def test_the_project_work_generator_keeps_the_demo_from_running_dry(demo_project, redis_client):
    world = live.start_demo(now=T0)
    run_for(world, 120, every=10)
    app = App.objects.get(pk=demo_project.pk)
    # 20 seeded workunits (40 results) are fewer than 2 minutes of the hosts' work
    assert Workunit.objects.filter(app=app).count() > 20
    assert Result.objects.filter(app=app, server_state=ServerState.IN_PROGRESS).exists()
    assert Result.objects.filter(app=app, server_state__lte=ServerState.UNSENT).exists()


def test_a_new_demo_ends_the_earlier_one(demo_project, redis_client):
    first = live.start_demo(now=T0)
    second = live.start_demo(now=T0 + 100)
    first.refresh_from_db()
    assert first.status == World.Status.FINISHED and first.state is None
    assert second.status == World.Status.RUNNING
    assert live.step(first.pk, wall=T0 + 110) is None


def test_a_paused_live_world_does_not_move_and_resumes_without_replaying_the_gap(demo_project, redis_client):
    world = live.start_demo(now=T0)
    live.step(world.pk, wall=T0 + 10)
    jobs.pause(world.pk)
    assert live.step(world.pk, wall=T0 + 20) is None
    World.objects.filter(pk=world.pk).update(status=World.Status.RUNNING)
    sent_before = set(Result.objects.exclude(sent_time=0).values_list("sent_time", flat=True))
    assert live.step(world.pk, wall=T0 + 3600) == 10  # its clock carries on from where it stood
    world.refresh_from_db()
    sim = jobs.load(world)
    assert sim.now() == T0 + 3600
    # nothing was sent back-dated into the hour the world stood still
    sent_after = set(Result.objects.exclude(sent_time=0).values_list("sent_time", flat=True))
    assert all(t <= T0 + 10 or t >= T0 + 3600 for t in sent_after - sent_before)


def test_a_live_world_needs_its_app(db):
    with pytest.raises(ValueError, match="no app named 'example_app' to volunteer for"):
        live.start_demo(now=T0)


def test_the_live_demo_command_waits_without_volunteers_when_the_demo_is_off(tmp_path):
    env = {**os.environ, "BOINCWEB_DEMO": "0", "DATABASE_URL": f"sqlite:///{tmp_path}/unused.sqlite3"}
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "live_demo"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "the live demo is off (BOINCWEB_DEMO=0)"
        time.sleep(0.5)
        assert proc.poll() is None, "it must keep running beside make run's other processes"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
