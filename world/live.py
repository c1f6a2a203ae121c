"""The live demo: a small volunteer world that keeps the demo project busy on the wall clock.

``make run`` starts it (the Procfile's ``demo``: ``manage.py live_demo``) unless
``BOINCWEB_DEMO=0``. It is an ordinary world (``world.simulation``) with ``live_app`` set to
``seed_demo``'s app: a few simulated hosts ask the project's real scheduler for that app's
work, compute it in real time (some 10 s a job, ``seed_demo.DEMO_APP_SIZES``), fail now and
then (crashes, lost jobs, one host that returns wrong answers half the time) and report. The
project's own daemons, run by the cron every few seconds, do the rest: the transitioner,
validator, assimilator and file deleter carry the reported work on, and the work generator
keeps the app's ``unsent_target`` results on hand so the hosts never run dry.

The world is driven here, one slice a second up to the wall clock, by the process that runs
``drive``, not by the RQ worker, which stays free for the daemons' passes and the lab's runs.
A slice holds the world's Redis lock as the RQ slices do, so the worlds page's pause and resume
work on it too.
"""

import time
from collections.abc import Callable

import django_rq
from django.db import transaction

from world import jobs
from world.models import World

DEMO_APP = "example_app"
DEMO_NAME = "live demo"
# WorldSettings of the demo population: small, short-buffered, quick to report and to retry.
DEMO_SETTINGS = {
    "live_app": DEMO_APP,
    "drain_days": 0.0,
    "ncpus_choices": [1, 2, 4],
    "ncpus_weights": [0.3, 0.5, 0.2],
    "gpu_fraction": 0.25,
    "gpu_gflops": 6.0,
    "on_frac_min": 0.8,
    "mean_on_period": 900.0,
    "error_rate": 0.04,
    "no_reply_rate": 0.02,
    "wrong_output_fraction": 0.15,
    "wrong_output_rate": 0.5,
    "leave_per_day": 0.0,
    "join_per_day": 0.0,
    "work_buf_min_days": 20 / 86400,
    "work_buf_additional_days": 20 / 86400,
    "report_delay": 5.0,
    "backoff_min": 30.0,
    "first_rpc_within": 2.0,
    "daemon_interval": 5.0,
}
DEMO_HOSTS = 8
DEMO_DAYS = 365.0
TICK_SECONDS = 1.0


def start_demo(*, hosts: int = DEMO_HOSTS, seed: int = 1, now: float | None = None) -> World:
    """Create, set up and mark running a new live demo world whose clock starts at ``now``
    (Unix seconds; default the wall clock); return it.

    Earlier live worlds are marked finished first: their hosts vanish with whatever they held,
    and the transitioner times those jobs out and sends them again to the new hosts.
    """
    now = int(time.time() if now is None else now)
    with transaction.atomic():
        World.objects.filter(
            settings__live_app=DEMO_APP,
            status__in=[World.Status.CREATED, World.Status.RUNNING, World.Status.PAUSED],
        ).update(status=World.Status.FINISHED, state=None)
        world = World.objects.create(
            name=DEMO_NAME,
            seed=seed,
            hosts=hosts,
            days=DEMO_DAYS,
            speedup=1.0,
            settings={**DEMO_SETTINGS, "start_time": now},
            status=World.Status.RUNNING,
        )
        jobs.create_simulation(world)
    world.refresh_from_db()
    return world


def step(world_id: int, *, wall: float | None = None) -> float | None:
    """Advance live world ``world_id`` to the wall clock (``wall``, Unix seconds; default now)
    and store it, holding the world's lock. Returns its clock, or None when it is not running
    or another slice holds it."""
    redis = django_rq.get_queue(jobs.QUEUE).connection
    lock = redis.lock(jobs.lock_key(world_id), timeout=jobs.LOCK_SECONDS, blocking=False)
    if not lock.acquire():
        return None
    try:
        world = World.objects.get(pk=world_id)
        if world.status != World.Status.RUNNING or not world.state:
            return None
        sim = jobs.load(world)
        try:
            sim.run_until(jobs.slice_end(sim, world.speedup, wall=wall))
        except Exception as exc:
            World.objects.filter(pk=world_id).update(status=World.Status.FAILED, error=repr(exc))
            raise
        jobs.store(world_id, sim)
        return sim.t
    finally:
        lock.release()


def drive(world_id: int, *, should_stop: Callable[[], bool] = lambda: False, tick: float = TICK_SECONDS) -> None:
    """Step the world every ``tick`` wall seconds until ``should_stop()`` or it finishes."""
    while not should_stop():
        began = time.monotonic()
        step(world_id)
        if (
            not World.objects.filter(pk=world_id)
            .exclude(status__in=[World.Status.FINISHED, World.Status.FAILED])
            .exists()
        ):
            return
        time.sleep(max(tick - (time.monotonic() - began), 0.05))
