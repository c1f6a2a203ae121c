"""A world whose slice job is lost is marked failed with the reason, its lock released, and
staff resume it, as the lab does with a run whose job died (world.jobs.check_world)."""

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import django_rq
import pytest
from django.test import Client
from django.utils import timezone
from rq.exceptions import NoSuchJobError

from tests.factories import UserFactory, WorldFactory
from tests.web.serving import BASE, MANAGE, child_env
from tests.world.test_world import SMALL_CUSHION, run_queue
from world import jobs
from world.models import World

# What a work horse killed mid-slice leaves behind is what the database's transactions kept.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


@pytest.fixture
def staff():
    client = Client()
    client.force_login(UserFactory(username="ops", is_staff=True))
    return client


@pytest.fixture
def volunteer():
    client = Client()
    client.force_login(UserFactory(username="ada"))
    return client


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.02)
    return value


def children(pid):
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_a_killed_work_horse_leaves_the_world_failed_unlocked_and_resumable_by_staff(
    redis_client, staff, volunteer, data_dirs, tmp_path
):
    # A slice is 10800 × 2 simulated seconds (world.jobs.SLICE_WALL_SECONDS): the horse dies in the
    # first quarter day whatever the cushion, and the cushion of 8 (SMALL_CUSHION) leaves the
    # resumed chain a drain of hours rather than days of slices to reach its end.
    world = WorldFactory(name="doomed", hosts=12, days=0.5, seed=3, speedup=10800, settings=SMALL_CUSHION)
    assert jobs.start(world.pk)
    job_id = World.objects.get(pk=world.pk).job_id
    worker = subprocess.Popen(
        [*MANAGE, "rqworker", jobs.QUEUE],
        cwd=BASE,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "worker.log", "w"),
        env=child_env(BOINCWEB_DATA_DIR=data_dirs, LOG_LEVEL="WARNING"),
    )
    try:
        # the slice holds the world's lock; its work horse dies mid-slice
        wait_for(lambda: redis_client.exists(jobs.lock_key(world.pk)), 120, "slice started")
        horse = wait_for(lambda: children(worker.pid), 10, "work horse")[0]
        os.kill(horse, signal.SIGKILL)
        queue = django_rq.get_queue(jobs.QUEUE)
        wait_for(lambda: queue.fetch_job(job_id).get_status() == "failed", 60, "failed job")
        # what the issue found: still "running", and the lock held for another ten minutes
        assert World.objects.get(pk=world.pk).status == World.Status.RUNNING
        assert redis_client.ttl(jobs.lock_key(world.pk)) > 60

        page = Client().get(f"/project/worlds/{world.pk}/")
        failed = World.objects.get(pk=world.pk)
        assert failed.status == World.Status.FAILED
        assert "Its job failed: Work-horse terminated unexpectedly" in failed.error
        assert "Staff may resume the world" in failed.error
        assert b"Work-horse terminated unexpectedly" in page.content
        assert b'data-testid="resume"' not in page.content  # anonymous
        assert not redis_client.exists(jobs.lock_key(world.pk))
        assert b"Resume from the last stored slice" in staff.get(f"/project/worlds/{world.pk}/").content

        assert volunteer.post(f"/project/worlds/{world.pk}/resume/").status_code == 403
        assert World.objects.get(pk=world.pk).status == World.Status.FAILED
        assert staff.post(f"/project/worlds/{world.pk}/resume/").status_code == 302
        resumed = World.objects.get(pk=world.pk)
        assert (resumed.status, resumed.error) == (World.Status.RUNNING, "")
        assert resumed.job_id != job_id
        # the same worker, still alive, runs the new chain to the end (the test moves a
        # slice enqueued for later to the queue, as the scheduler would at its time)
        scheduled = queue.scheduled_job_registry

        def ended():
            for later in scheduled.get_job_ids():
                try:
                    scheduled.requeue(later)
                except NoSuchJobError:
                    pass  # the worker's own scheduler moved it and the worker ran it first
            return World.objects.get(pk=world.pk).status != World.Status.RUNNING

        wait_for(ended, 600, "end of the resumed world")
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    done = World.objects.get(pk=world.pk)
    assert done.status == World.Status.FINISHED, done.error
    assert all(done.summary["invariants"].values())


def test_a_job_gone_from_redis_fails_the_world_after_a_grace_and_staff_resume_it(redis_client, staff):
    world = WorldFactory(name="lost", hosts=4, days=0.25, seed=1, speedup=14400, settings=SMALL_CUSHION)
    assert jobs.start(world.pk)
    queue = django_rq.get_queue(jobs.QUEUE)
    job_id = World.objects.get(pk=world.pk).job_id
    # Redis loses the queue and the job, but a dead slice's lock is still there
    queue.fetch_job(job_id).delete()
    queue.empty()
    assert redis_client.set(jobs.lock_key(world.pk), "dead-slice", ex=jobs.LOCK_SECONDS)

    # just named (an enqueue waiting for its transaction to commit): not judged yet
    assert Client().get("/project/worlds/").status_code == 200
    assert World.objects.get(pk=world.pk).status == World.Status.RUNNING
    World.objects.filter(pk=world.pk).update(job_since=timezone.now() - jobs.LOST_AFTER - timedelta(seconds=1))

    page = Client().get("/project/worlds/")
    failed = World.objects.get(pk=world.pk)
    assert failed.status == World.Status.FAILED
    assert failed.error.startswith("Its job is no longer in the queue")
    assert b"Its job is no longer in the queue" in page.content
    assert not redis_client.exists(jobs.lock_key(world.pk))

    assert staff.post(f"/project/worlds/{world.pk}/resume/").status_code == 302
    run_queue(queue, lambda: World.objects.get(pk=world.pk).status != World.Status.RUNNING)
    done = World.objects.get(pk=world.pk)
    assert done.status == World.Status.FINISHED, done.error
    assert all(done.summary["invariants"].values())


def test_a_world_whose_job_waits_or_runs_is_left_alone(redis_client):
    world = WorldFactory(name="fine", hosts=4, days=0.25, seed=1, speedup=3600, settings=SMALL_CUSHION)
    assert jobs.start(world.pk)
    World.objects.filter(pk=world.pk).update(job_since=timezone.now() - timedelta(hours=1))
    assert not jobs.check_world(World.objects.get(pk=world.pk))  # queued
    django_rq.get_worker(jobs.QUEUE).work(burst=True, max_jobs=1)
    running = World.objects.get(pk=world.pk)
    assert running.clock > 0 and running.job_id
    assert not jobs.check_world(running)  # its next slice is queued or scheduled
    assert World.objects.get(pk=world.pk).status == World.Status.RUNNING
