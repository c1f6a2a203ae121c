"""RQ jobs of the scheduling lab, and queueing that never leaves a row nothing will take.

`queue_problem()` says why jobs cannot be queued now (Redis not reachable); a view asks it
before it creates anything. `enqueue_on_commit()` queues a job once the caller's transaction
commits and, should Redis go away in between, hands the reason to a callback instead of
failing after the rows are written. Neither is tied to the lab: any page that starts work can
use them.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import django_rq
import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from boincweb import lost_jobs
from scheduling import engine
from scheduling.engine.scenario import ScenarioError
from scheduling.models import Run

PROGRESS_EVERY = 0.5  # seconds of wall time between progress writes
PARTIAL_EVERY = 1.0  # seconds of wall time, at least, between stores of the partial records
PARTIAL_CHUNKS = 100  # the engine hands over its records every 1 % of simulated time
SERIES = ("slices", "rec", "buffers", "rpcs", "decisions", "host_periods")
QUEUE = "engine"
# The job is enqueued when the transaction that created the run commits; until then a poll
# finds no job, so a queued run is called lost only this long after it was created.
LOST_AFTER = timedelta(seconds=30)


def simulate(
    scenario, *, policy: str, duration: float, delta: float, seed: int, compat: str, progress=None, partial=None
) -> dict:
    """Run the engine; `RunResult.to_dict()`. `partial(chunk)` gets the engine's RecordChunks."""
    return engine.run(
        scenario,
        policy=policy,
        duration=duration,
        delta=delta,
        seed=seed,
        compat=compat,
        progress=progress,
        partial=partial,
        partial_interval=duration / PARTIAL_CHUNKS if partial else None,
    ).to_dict()


class PartialRecords:
    """The records of a run still going, grown from the engine's RecordChunks and stored on
    the run now and then, so the run page draws its charts growing while it goes.

    The stored object has the keys of `RunResult.to_dict()` the charts read, with `partial`
    True and `time` the simulated time reached; slices and host periods still open are
    included, cut at `time`. A store costs more as the records grow, so the next one waits
    at least four times as long as the last took.
    """

    def __init__(self, run: Run, scenario, clock=time.monotonic):
        self.run = run
        self.clock = clock
        resources = {"cpu": {"instances": scenario.n_usable_cpus}}
        resources.update({g.name: {"instances": g.count} for g in scenario.host.gpus})
        self.data: dict[str, Any] = {
            "partial": True,
            "time": 0.0,
            "policy": run.policy,
            "duration": run.duration,
            "resources": resources,
            "projects": [{"name": p.name} for p in scenario.projects],
        }
        self.data.update({name: [] for name in SERIES})
        self.next_store = clock() + PARTIAL_EVERY

    def __call__(self, chunk) -> None:
        data = self.data
        for name in SERIES:
            data[name].extend(r._asdict() for r in getattr(chunk, name))
        if chunk.last or self.clock() < self.next_store:
            return
        started = self.clock()
        stored = dict(
            data,
            time=chunk.time,
            slices=data["slices"] + [s._asdict() for s in chunk.open_slices],
            host_periods=data["host_periods"] + [h._asdict() for h in chunk.open_host_periods],
        )
        self.run.set_partial(chunk.time / self.run.duration, stored)
        took = self.clock() - started
        self.next_store = self.clock() + max(PARTIAL_EVERY, 4 * took)


PROJECT_AFTER = 0.1  # of the budget: computing after which a run's own speed is projected


class OverBudget(Exception):
    """A run over the lab's budget by its measured speed: args (fraction done, seconds spent)."""


def stop_after() -> float:
    """Seconds of computing a run may take: twice the budget its estimate was held to before
    it was queued (LAB_RUN_BUDGET_SECONDS, scheduling/engine/cost.py)."""
    return 2.0 * settings.LAB_RUN_BUDGET_SECONDS


def over_budget(spent: float, fraction: float, limit: float) -> bool:
    """Whether a run that has computed for `spent` seconds to reach `fraction` of its simulated
    time is over `limit`: spent already, or, once it has computed for PROJECT_AFTER of the
    budget, heading there at its measured speed. The estimate before the run is rough; this is
    the engine's own speed on this scenario, so a run the estimate misjudged cannot hold a
    worker until the job timeout."""
    if spent > limit:
        return True
    return spent > PROJECT_AFTER * limit / 2 and fraction > 0 and spent / fraction > limit


def run_simulation(run_id: int) -> str:
    """Run the engine for Run `run_id`, storing progress and partial records as it goes and
    the records at the end.

    A run that is no longer queued (already taken by another worker, or finished) is left
    alone; any error in the scenario or the engine is stored on the run as its message, and
    a run still going after `stop_after()` seconds of computing is stopped and failed.
    """
    run = Run.objects.select_related("scenario").filter(pk=run_id).first()
    if run is None or not run.mark_running(timezone.now()):
        return "skipped"
    last = [0.0]
    started = time.process_time()
    limit = stop_after()

    def progress(fraction: float) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            run.set_progress(fraction)
        spent = time.process_time() - started
        if over_budget(spent, fraction, limit):
            raise OverBudget(fraction, spent)

    try:
        engine.get_policy(run.policy)
    except ValueError as exc:
        run.mark_failed(timezone.now(), f"The run cannot start: {exc}.")
        return "failed"
    try:
        scenario = run.engine_scenario()
        records = simulate(
            scenario,
            policy=run.policy,
            duration=run.duration,
            delta=run.delta,
            seed=run.seed,
            compat=run.compat,
            progress=progress,
            partial=PartialRecords(run, scenario),
        )
    except ScenarioError as exc:
        run.mark_failed(timezone.now(), f"The scenario is not valid: {exc}")
        return "failed"
    except OverBudget as exc:
        fraction, spent = exc.args
        projected = f"about {spent / fraction:.0f} s" if fraction > 0 else "longer still"
        run.mark_failed(
            timezone.now(),
            (
                f"Stopped after {spent:.0f} s of computing, at {fraction:.0%} of the simulated time: at that speed "
                f"the run would take {projected}, over twice the lab's budget of {settings.LAB_RUN_BUDGET_SECONDS} s "
                "a run (LAB_RUN_BUDGET_SECONDS). A shorter duration, fewer CPUs or projects, or longer jobs make it "
                "cheaper."
            ),
        )
        return "failed"
    except Exception as exc:  # the page must show the failure, whatever it was
        run.mark_failed(timezone.now(), f"The engine failed: {type(exc).__name__}: {exc}")
        return "failed"
    summary = {k: v for k, v in records.items() if k not in SERIES}
    run.mark_done(timezone.now(), summary, records)
    return "done"


REDIS_TIMEOUT = 2.0  # seconds a check or an enqueue waits on Redis before calling it unreachable


def _redis(queue: str) -> redis.Redis:
    """A client of RQ queue `queue`'s Redis that gives up after REDIS_TIMEOUT."""
    return redis.Redis.from_url(
        settings.RQ_QUEUES[queue]["URL"], socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
    )


def queue_problem(queue: str = QUEUE) -> str | None:
    """Why a job cannot be put on RQ queue `queue` now (its Redis does not answer), in words
    for the page; None when it can. A view asks before it creates the rows a job would take."""
    client = _redis(queue)
    try:
        client.ping()
    except (redis.exceptions.RedisError, OSError) as exc:
        return (
            f"Redis is not reachable ({exc}), so nothing can be queued; nothing was started. Try again once it is back."
        )
    finally:
        client.close()
    return None


def enqueue_on_commit(queue: str, func, *args, job_id: str, on_failure) -> None:
    """Queue `func(*args)` on `queue` under `job_id` once the current transaction commits
    (at once outside one); if Redis does not take it, `on_failure(reason)` is called instead of
    raising, so the rows the transaction wrote can be marked with the reason rather than left
    waiting for a job that does not exist."""

    def enqueue():
        client = _redis(queue)
        try:
            django_rq.get_queue(queue, connection=client, commit_mode="auto").enqueue(func, *args, job_id=job_id)
        except (redis.exceptions.RedisError, OSError) as exc:
            on_failure(f"Redis did not take its job ({exc}); start the run again once Redis is back.")
        finally:
            client.close()

    transaction.on_commit(enqueue)


def enqueue_run(run: Run) -> None:
    """Queue the engine job of a new run under the job id stored on it, once the caller's
    transaction commits; a run Redis does not take is failed with the reason."""
    run.job_id = run.job_id or f"lab-run-{run.pk}-{uuid.uuid4().hex[:12]}"
    Run.objects.filter(pk=run.pk).update(job_id=run.job_id)
    run_id = run.pk
    enqueue_on_commit(
        QUEUE,
        run_simulation,
        run_id,
        job_id=run.job_id,
        on_failure=lambda reason: Run(pk=run_id).mark_failed(timezone.now(), reason),
    )


def job_problem(run: Run, *, now) -> str | None:
    """Why the RQ job of a queued or running run can no longer finish it, or None while it can
    (boincweb/lost_jobs.py judges the job). A run without a stored job id (made by hand) is not
    judged; a queued run's job missing from Redis is given LOST_AFTER to appear."""
    if run.is_over or not run.job_id:
        return None
    young = run.status == Run.Status.QUEUED and now - run.created < LOST_AFTER
    return lost_jobs.job_problem(
        django_rq.get_queue(QUEUE), run.job_id, missing_is_lost=not young, work="the run", again="; start the run again"
    )


def check_job(run: Run, *, now) -> bool:
    """Mark the run failed if its job can no longer finish it (`job_problem`); True if it did.

    Compare-and-set: a run the job finished meanwhile keeps its result."""
    problem = job_problem(run, now=now)
    if problem is None or not run.mark_failed(now, problem):
        return False
    run.refresh_from_db()
    return True
