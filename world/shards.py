"""A world advanced by several RQ workers at once: its hosts split into shards, one simulated
slice at a time, with a barrier between slices.

A slice is the stretch between two daemon rounds. The round runs as one job (the
*coordinator*: a Simulation holding the daemon rounds and no hosts); it then enqueues one job
per shard, each of which runs its own hosts' events up to the next round
(``Simulation.run_shard``) with a random generator, counters and event heap of its own. Each
shard job counts itself done on a Redis counter for the slice; the job that brings the count
to the number of shards enqueues the next round. So every request of a slice is made before
the round that follows it, as in the single chain, and the requests of one slice reach the
scheduler from several processes at once, as real clients' do: the scheduler and the daemons
are safe with several instances (DESIGN.md "Stack"), and the world's cushion generator takes
the app's row lock (``Simulation.generate``).

With more than one shard the outcome for a seed is not the single chain's: the shards draw from
generators of their own and their requests reach the back end in whatever order the workers
run them (one shard runs the chain's work phase, round by round, as the chain does). What holds is
every invariant of the world's summary (world.report). The rounds do not skip ahead while the
world drains (``Coordinator.quiet_until``): a host of another shard may report in the meantime.

States and the shards' reports are pickled in Redis under ``boincweb:shards:<run>:``; the
run's ``status`` key ends ``finished`` (the summary is then under ``summary``), ``stopped``
(every event up to ``stop_at`` ran; the benchmark times a world's work phase this way) or
``failed`` (a job raised; its error is under ``error`` and the run goes no further: a shard's
requests are not repeatable, so a failed slice is not run again).
"""

import copy
import heapq
import json
import math
import pickle
import random
from dataclasses import fields
from typing import Any, NamedTuple, cast

import django_rq
from redis import Redis
from rq.queue import Queue

from world.engine_host import EngineHost
from world.jobs import unsynced_commits
from world.report import summary
from world.simulation import DAEMONS, END, Counters, SimHost, Simulation

QUEUE = "default"
# A round and a shard's slice of a large world take minutes; RQ's default is 3.
JOB_TIMEOUT = 3600
# Kept this long after the last write, so that a run nobody reads back does not stay for ever.
KEY_SECONDS = 7 * 86400


class Report(NamedTuple):
    """What a shard tells the next round: its counters and how many of its hosts are active."""

    counters: Counters
    active_hosts: int


class Coordinator(Simulation):
    """The daemon rounds of a sharded world, with its shards' latest reports (``reports``)."""

    reports: list[Report]
    stop_at: float | None
    slice: int

    def totals(self) -> Counters:
        return add_counters([self.counters, *(r.counters for r in self.reports)])

    def active_hosts(self) -> int:
        return sum(r.active_hosts for r in self.reports)

    def quiet_until(self) -> float:
        """No round is left out while draining: a host of another shard may report meanwhile."""
        return 0.0


def add_counters(parts: list[Counters]) -> Counters:
    total = Counters()
    for f in fields(Counters):
        setattr(total, f.name, sum(getattr(part, f.name) for part in parts))
    return total


def report(shard: Simulation) -> Report:
    active = sum(1 for index in shard.host_index.values() if shard.hosts[index].active)
    active += sum(1 for h in shard.engine_hosts if h is not None and h.active)
    return Report(shard.counters, active)


def split(sim: Simulation, n: int) -> tuple[Coordinator, list[Simulation]]:
    """The coordinator and ``n`` shards of a world set up (``sim.setup()``) and not yet run.

    Host ``i`` goes to shard ``i % n``, with its events, and so does the ``k``-th engine host
    (world.engine_host) for ``k % n``; the daemon rounds and the end stay with
    the coordinator. Each shard draws from a generator of its own, seeded from the world's seed
    and the shard's number; a world of one shard draws from the world's own, and so makes the
    single chain's requests in the chain's order. The other shards' hosts are None in a
    shard's ``hosts``: only its own are named by its events and ``host_index``.
    """
    if n < 1:
        raise ValueError(f"a world needs at least one shard, not {n}")
    if sim.settings.live_app:
        raise ValueError("a live world runs on the wall clock in one chain; it is not sharded")
    shards = []
    for i in range(n):
        shard = copy.copy(sim)
        shard.hosts = cast(list[SimHost], [h if h.index % n == i else None for h in sim.hosts])
        shard.host_index = {host_id: index for host_id, index in sim.host_index.items() if index % n == i}
        # engine hosts (world.engine_host) by their place among the engine hosts, which their
        # events name, as a simple host's name its index
        shard.engine_hosts = cast(list[EngineHost], [h if k % n == i else None for k, h in enumerate(sim.engine_hosts)])
        shard.heap = [e for e in sim.heap if e[1] not in (DAEMONS, END) and e[4][0] % n == i]
        heapq.heapify(shard.heap)  # what is left of a heap's array is not one
        shard.rng = sim.rng if n == 1 else random.Random(f"{sim.settings.seed}:shard:{i}:{n}")
        shard.counters = Counters()
        shard.samples = []
        shard.wrong_checksums, shard.wrong_results, shard.abandoned = set(), set(), set()
        shards.append(shard)
    coordinator = Coordinator.__new__(Coordinator)
    coordinator.__dict__.update(copy.copy(sim.__dict__))
    coordinator.hosts, coordinator.host_index, coordinator.engine_hosts = [], {}, []
    coordinator.heap = [e for e in sim.heap if e[1] in (DAEMONS, END)]
    heapq.heapify(coordinator.heap)
    coordinator.reports = [report(shard) for shard in shards]
    coordinator.stop_at = None
    coordinator.slice = 0
    return coordinator, shards


def merge(coordinator: Coordinator, shards: list[Simulation]) -> Simulation:
    """One Simulation with the coordinator's rounds and samples and every shard's hosts and
    records, for the world's summary."""
    whole = Simulation.__new__(Simulation)
    whole.__dict__.update({k: v for k, v in coordinator.__dict__.items() if k not in ("reports", "stop_at", "slice")})
    whole.hosts = [next(s.hosts[i] for s in shards if s.hosts[i] is not None) for i in range(len(shards[0].hosts))]
    whole.host_index = {host_id: index for s in shards for host_id, index in s.host_index.items()}
    whole.engine_hosts = [
        next(s.engine_hosts[k] for s in shards if s.engine_hosts[k] is not None)
        for k in range(len(shards[0].engine_hosts))
    ]
    whole.heap = []
    whole.counters = add_counters([coordinator.counters, *(s.counters for s in shards)])
    whole.wrong_checksums = set().union(*(s.wrong_checksums for s in shards))
    whole.wrong_results = set().union(*(s.wrong_results for s in shards))
    whole.abandoned = set().union(*(s.abandoned for s in shards))
    return whole


# --- Redis keys -----------------------------------------------------------------------------


def key(run: str, name: str) -> str:
    return f"boincweb:shards:{run}:{name}"


def put(redis: Redis, run: str, name: str, value: object) -> None:
    redis.set(key(run, name), pickle.dumps(value), ex=KEY_SECONDS)


def get(redis: Redis, run: str, name: str) -> Any:
    data = redis.get(key(run, name))
    if data is None:
        raise LookupError(f"sharded world {run!r} has no {name!r} in Redis")
    return pickle.loads(cast(bytes, data))


def status(redis: Redis, run: str) -> str:
    value = redis.get(key(run, "status"))
    return cast(bytes, value).decode() if value else ""


def run_summary(redis: Redis, run: str) -> dict[str, Any]:
    return json.loads(cast(bytes, redis.get(key(run, "summary"))))


# --- jobs -----------------------------------------------------------------------------------


def start(sim: Simulation, shards: int, *, run: str, stop_at: float | None = None, queue: Queue | None = None) -> None:
    """Split a world set up (``sim.setup()``) into ``shards`` and enqueue its first round; it
    runs to its end, or up to and with ``stop_at`` (simulated seconds)."""
    queue = queue or django_rq.get_queue(QUEUE)
    coordinator, parts = split(sim, shards)
    coordinator.stop_at = stop_at
    redis = queue.connection
    for i, shard in enumerate(parts):
        put(redis, run, f"shard:{i}", shard)
    put(redis, run, "coordinator", coordinator)
    redis.set(key(run, "status"), "running", ex=KEY_SECONDS)
    queue.enqueue(advance_round, run, len(parts), job_timeout=JOB_TIMEOUT)


def failing(redis: Redis, run: str, exc: BaseException) -> None:
    redis.set(key(run, "error"), repr(exc), ex=KEY_SECONDS)
    redis.set(key(run, "status"), "failed", ex=KEY_SECONDS)


def advance_round(run: str, n: int) -> float | None:
    """The coordinator's job: the daemon round due, then the shards' jobs for the slice up to
    the next one. Returns the simulated time of the round, None when the run is over.

    With ``stop_at``, the last slice runs the hosts' events up to and at ``stop_at`` after the
    round there (or the last before it), as the chain's ``run_until(stop_at)`` does, and the
    run ends ``stopped`` without another round."""
    queue = django_rq.get_queue(QUEUE)
    redis = queue.connection
    if status(redis, run) != "running":
        return None
    try:
        coordinator: Coordinator = get(redis, run, "coordinator")
        if coordinator.slice:
            coordinator.reports = [get(redis, run, f"report:{i}") for i in range(n)]
        if coordinator.stop_at is not None and coordinator.t >= coordinator.stop_at:
            put(redis, run, "coordinator", coordinator)
            redis.set(key(run, "status"), "stopped", ex=KEY_SECONDS)
            return None
        at = coordinator.heap[0][0]
        with unsynced_commits():
            coordinator.run_until(at)
        if coordinator.finished:
            whole = merge(coordinator, [get(redis, run, f"shard:{i}") for i in range(n)])
            redis.set(key(run, "summary"), json.dumps(summary(whole)), ex=KEY_SECONDS)
            put(redis, run, "coordinator", coordinator)
            redis.set(key(run, "status"), "finished", ex=KEY_SECONDS)
            return None
        following = coordinator.heap[0][0]
        if coordinator.stop_at is not None and following > coordinator.stop_at:
            following = math.nextafter(coordinator.stop_at, math.inf)
            coordinator.t = coordinator.stop_at
        coordinator.slice += 1
        put(redis, run, "coordinator", coordinator)
        for i in range(n):
            queue.enqueue(
                advance_shard,
                run,
                n,
                i,
                coordinator.slice,
                at,
                following,
                coordinator.draining,
                job_timeout=JOB_TIMEOUT,
            )
        return at
    except Exception as exc:
        failing(redis, run, exc)
        raise


def advance_shard(run: str, n: int, index: int, slice_: int, t_start: float, t_end: float, draining: bool) -> int:
    """One shard's hosts from the round at ``t_start`` to the one at ``t_end``; the last shard
    of the slice to finish enqueues that round. Returns the events processed."""
    queue = django_rq.get_queue(QUEUE)
    redis = queue.connection
    if status(redis, run) != "running":
        return 0
    try:
        shard: Simulation = get(redis, run, f"shard:{index}")
        with unsynced_commits():
            processed = shard.run_shard(t_start, t_end, draining=draining)
        put(redis, run, f"shard:{index}", shard)
        put(redis, run, f"report:{index}", report(shard))
    except Exception as exc:
        failing(redis, run, exc)
        raise
    done = key(run, f"slice:{slice_}")
    if redis.incr(done) == n:
        redis.delete(done)
        queue.enqueue(advance_round, run, n, job_timeout=JOB_TIMEOUT)
    else:
        redis.expire(done, KEY_SECONDS)
    return processed
