"""RQ jobs that advance a world: one job runs one slice of simulated time and chains the next.

A world runs in the background this way while its page watches it (DESIGN.md "How data
flows" 2). The slice is ``speedup × SLICE_WALL_SECONDS`` simulated seconds; the next job is
enqueued so that the world keeps to its speed-up factor when the machine is fast enough, and
runs flat out when it is not. Pausing sets the status; the job in flight stores its state and
chains nothing; resuming enqueues a job again. Slicing does not change the outcome: daemon
rounds and host actions are events of one heap, so a world run in slices ends exactly as one
run in one go (same seed, same outcome).

One chain per world, one slice at a time, with any number of workers: each start gives the
chain a new token in Redis, and a job of an older chain (a slice still queued when the world was
paused and resumed) ends without running; a slice runs holding the world's Redis lock, and a
job that finds it held (the old chain's slice still in flight) tries again a second later.

A world names the job of its next slice (``World.job_id``) before enqueueing it, so a page can
tell a world whose chain broke, as the lab tells a run whose job died (``check_world``): the
work horse killed, the job failed outside the slice's own error handling, or Redis emptied. The
world is then marked failed with the reason and its lock released, and staff may resume it from
its last stored slice.
"""

import pickle
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import django_rq
from django.db import connection, transaction
from django.utils import timezone
from redis import Redis
from redis.exceptions import LockNotOwnedError
from rq.queue import Queue

from backend.models import Project
from boincweb.lost_jobs import job_problem
from world import engine_records
from world.engine_host import engine_figures
from world.models import World, WorldSample
from world.report import summary
from world.simulation import Simulation, WorldSettings

SLICE_WALL_SECONDS = 2.0
QUEUE = "default"
# How long a slice may hold its world's lock before Redis drops it (a worker killed mid-slice).
LOCK_SECONDS = 600
RETRY_SECONDS = 1.0
# Seconds a live world may lag the wall clock before its clock is moved on (``slice_end``).
LIVE_MAX_LAG = 30.0
# A world's job is named before it is enqueued (at the commit of the transaction that started
# the world); until then it is missing from Redis, so a missing job counts as lost only this
# long after it was named.
LOST_AFTER = timedelta(seconds=30)
# The states staff may start a world from: a failed world resumes from its last stored slice.
STARTABLE = [World.Status.CREATED, World.Status.PAUSED, World.Status.FAILED]


def world_settings(world: World) -> WorldSettings:
    values = dict(world.settings or {})
    values.update(hosts=world.hosts, days=world.days, seed=world.seed, locality=world.locality)
    return WorldSettings.from_dict(values)


def create_simulation(world: World) -> Simulation:
    """Set up the world's population and workload; the state is stored with the world, in the
    same transaction, so a slice that dies during its set-up (its work horse killed) leaves no
    app, hosts or files behind and a resumed world sets up again from nothing."""
    settings = world_settings(world)
    with transaction.atomic():
        if world.project_id is None and not settings.live_app:
            # the world's own project, on the world's clock (DESIGN.md "Projects")
            world.project = Project.objects.create(
                name=world.name or f"World {world.pk}",
                slug=f"world-{world.pk}",
                kind=Project.Kind.WORLD,
                simulated_time=settings.start_time,
            )
        sim = Simulation(settings, prefix=world.prefix, project_id=world.project_id)
        sim.setup()
        World.objects.filter(pk=world.pk).update(
            app_id=sim.app_id,
            project_id=sim.project_id,
            start_time=sim.settings.start_time,
            state=pickle.dumps(sim),
        )
    return sim


def load(world: World) -> Simulation:
    return pickle.loads(bytes(world.state))  # type: ignore[arg-type]  # called for a world with a state


def store(world_id: int, sim: Simulation, *, status: str | None = None) -> None:
    """Save the simulation's state and figures, the samples it took since the last store, and
    its engine hosts' records (world.engine_records)."""
    WorldSample.objects.bulk_create(WorldSample(world_id=world_id, **sample._asdict()) for sample in sim.take_samples())
    engine_records.store(world_id, sim, final=sim.finished or status is not None)
    fields: dict[str, Any] = dict(state=pickle.dumps(sim), clock=sim.t, summary=light_summary(sim))
    if sim.finished:
        fields.update(summary=summary(sim), status=World.Status.FINISHED, state=None)
    elif status:
        fields["status"] = status
    World.objects.filter(pk=world_id).update(**fields)


def light_summary(sim: Simulation) -> dict[str, Any]:
    c = sim.counters
    return {
        "simulated_seconds": round(sim.t, 1),
        "rpcs": c.rpcs,
        "bytes_downloaded": c.bytes_downloaded,
        "jobs_received": c.jobs_received,
        "jobs_reported": c.jobs_reported,
        "draining": sim.draining,
        "engine": engine_figures(sim.engine_hosts),
    }


def run_in_process(world: World, progress: Callable[[Simulation], object] | None = None) -> dict[str, Any]:
    """Run a world to its end in this process; return its summary."""
    with unsynced_commits():
        sim = create_simulation(world)
        sim.run(progress)
        store(world.pk, sim)
    world.refresh_from_db()
    return world.summary


@contextmanager
def unsynced_commits() -> Iterator[None]:
    """Stop waiting for the disk at each commit for the block, then restore the connection's
    setting, so that whatever else this process does keeps its durability: a simulation's
    rows are worth no fsync, and a run is several times faster. On SQLite ``PRAGMA
    synchronous=OFF``; on PostgreSQL ``synchronous_commit`` off, which never corrupts the
    database: a crash loses only the last commits, in order, as if the run had stopped a
    moment earlier."""
    if connection.vendor not in ("sqlite", "postgresql") or connection.in_atomic_block:
        # inside a transaction the block commits nothing: the caller's commit is its own
        # business (and SQLite refuses to change the setting there)
        yield
        return
    sqlite = connection.vendor == "sqlite"
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous" if sqlite else "SHOW synchronous_commit")
        previous = cursor.fetchone()[0]
        cursor.execute("PRAGMA synchronous=OFF" if sqlite else "SET synchronous_commit TO off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if sqlite:
                cursor.execute(f"PRAGMA synchronous={int(previous)}")
            else:
                cursor.execute("SELECT set_config('synchronous_commit', %s, false)", [previous])


def chain_key(world_id: int) -> str:
    return f"boincweb:world:{world_id}:chain"


def lock_key(world_id: int) -> str:
    return f"boincweb:world:{world_id}:lock"


def new_job_id(world_id: int) -> str:
    return f"world-{world_id}-{uuid.uuid4().hex[:12]}"


def name_job(world_id: int, job_id: str) -> None:
    World.objects.filter(pk=world_id).update(job_id=job_id, job_since=timezone.now())


def enqueue_slice(
    queue: Queue, world_id: int, token: str | None, *, delay: float | None = None, chain: bool = True
) -> None:
    """Name the world's next slice job, then enqueue it (in ``delay`` seconds)."""
    job_id = new_job_id(world_id)
    name_job(world_id, job_id)
    if delay is None:
        queue.enqueue(advance_world, world_id, token, chain, job_id=job_id)
    else:
        queue.enqueue_in(timedelta(seconds=delay), advance_world, world_id, token, chain, job_id=job_id)


def start(world_id: int) -> bool:
    """Mark the world running and enqueue the first slice of a new chain when the caller's
    transaction commits. A failed world starts again from its last stored slice.

    If Redis refuses the job, the world goes back to the state it was in and the Redis error
    is raised, so that nothing is left "running" that no job will take.
    """
    before = World.objects.filter(pk=world_id).values("status", "error", "job_id").first()
    job_id = new_job_id(world_id)
    updated = World.objects.filter(pk=world_id, status__in=STARTABLE).update(
        status=World.Status.RUNNING, error="", job_id=job_id, job_since=timezone.now()
    )
    if updated:
        assert before is not None  # the row the update found
        token = uuid.uuid4().hex

        def enqueue() -> None:
            queue = django_rq.get_queue(QUEUE)
            try:
                queue.connection.set(chain_key(world_id), token)
                queue.enqueue(advance_world, world_id, token, job_id=job_id)
            except Exception:
                World.objects.filter(pk=world_id, job_id=job_id).update(**before)
                raise

        transaction.on_commit(enqueue)
    return bool(updated)


def pause(world_id: int) -> bool:
    return bool(World.objects.filter(pk=world_id, status=World.Status.RUNNING).update(status=World.Status.PAUSED))


def check_world(world: World, *, now: datetime | None = None) -> bool:
    """Mark a running world failed if the job of its next slice can no longer run it, with
    the reason, and release the world's lock that job may have held; True if it did.

    A world without a named job (the live demo, driven by its own process) is not judged."""
    if world.status != World.Status.RUNNING or not world.job_id:
        return False
    now = timezone.now() if now is None else now
    queue = django_rq.get_queue(QUEUE)
    missing_is_lost = world.job_since is None or now - world.job_since >= LOST_AFTER
    problem = job_problem(queue, world.job_id, missing_is_lost=missing_is_lost)
    if problem is None:
        return False
    reason = f"{problem} Staff may resume the world from its last stored slice."
    if not world.mark_failed(reason, job_id=world.job_id):
        return False
    # The job is over, so whatever held the lock in its name is gone: free the world now
    # rather than when the lock expires.
    queue.connection.delete(lock_key(world.pk))
    world.status, world.error = World.Status.FAILED, reason
    return True


def advance_world(world_id: int, token: str | None = None, chain: bool = True) -> float | None:
    """One slice of simulated time; chains the next slice while the world runs.

    Returns the world's clock after the slice, or None when the job ran nothing: its chain
    was superseded, the world is not running, or another slice holds the world (then the job
    is enqueued again in a second).
    """
    queue = django_rq.get_queue(QUEUE)
    redis = queue.connection
    if superseded(redis, world_id, token):
        return None
    lock = redis.lock(lock_key(world_id), timeout=LOCK_SECONDS, blocking=False)
    if not lock.acquire():
        enqueue_slice(queue, world_id, token, delay=RETRY_SECONDS, chain=chain)
        return None
    try:
        return run_slice(world_id, queue, token, chain)
    finally:
        try:
            lock.release()
        except LockNotOwnedError:
            pass  # released by check_world when this job was judged lost


def superseded(redis: Redis, world_id: int, token: str | None) -> bool:
    """Whether a newer start gave the world another chain than ``token``'s."""
    current = redis.get(chain_key(world_id))
    # RQ's connection answers bytes (it does not decode responses)
    return token is not None and current is not None and current.decode() != token  # type: ignore[union-attr]


def slice_end(sim: Simulation, speedup: float, *, wall: float | None = None) -> float:
    """Where the next slice ends: ``speedup`` × SLICE_WALL_SECONDS on, or for a live world the
    wall clock (``wall``, Unix seconds; default now).

    A live world that fell more than LIVE_MAX_LAG behind the wall clock (it was paused, or
    nothing drove it while ``make run`` was stopped) does not replay the gap at once with
    back-dated requests: its clock is moved on, so its hosts carry on from where they were.
    """
    if not sim.settings.live_app:
        return sim.t + max(speedup, 1.0) * SLICE_WALL_SECONDS
    wall = time.time() if wall is None else wall
    lag = wall - sim.settings.start_time - sim.t
    if lag > LIVE_MAX_LAG:
        sim.settings = replace(sim.settings, start_time=int(sim.settings.start_time + lag))
    return wall - sim.settings.start_time


def run_slice(world_id: int, queue: Queue, token: str | None, chain: bool) -> float | None:
    began = time.monotonic()
    world = World.objects.filter(pk=world_id).first()
    if world is None or world.status != World.Status.RUNNING:
        return None  # paused, finished, or deleted meanwhile (world.deletion)
    try:
        with unsynced_commits():
            sim = load(world) if world.state else create_simulation(world)
            sim.run_until(slice_end(sim, world.speedup))
            if sim.t >= sim.end and not sim.finished:
                sim.run()
    except Exception as exc:
        World.objects.filter(pk=world_id).update(status=World.Status.FAILED, error=repr(exc))
        raise
    if superseded(queue.connection, world_id, token):
        return None  # resumed meanwhile: the new chain goes on from the last stored slice
    store(world_id, sim)
    still_running = World.objects.filter(pk=world_id, status=World.Status.RUNNING).exists()
    if chain and still_running and not sim.finished:
        wait = max(SLICE_WALL_SECONDS - (time.monotonic() - began), 0.0)
        enqueue_slice(queue, world_id, token, delay=wait if wait > 0.05 else None)
    return sim.t
