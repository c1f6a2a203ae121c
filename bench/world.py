"""Volunteer world benchmark (issues 5 and 20; DESIGN.md "Performance targets"): a population of
hosts driving every back-end daemon for a stretch of simulated time, on the configured database
(PostgreSQL via DATABASE_URL for the figures docs/performance.md states).

    DATABASE_URL=postgres://... REDIS_URL=redis://.../5 .venv/bin/python bench/world.py
        [--hosts 10000] [--days 1] [--seed 1] [--locality] [--kind simple] [--workers 1]

Prints simulated seconds per wall second, RPCs per second and results per second (results sent
to hosts and reported back, per wall second), with the world's own figures. Only the work phase
is timed (``--days`` of simulated time, up to and with the events at its end: the last daemon
round and the reports of the hosts it starts draining); the drain that finishes every workunit
is not run.

``--workers 1`` runs the world in this process, in one chain (world.simulation). ``--workers N``
with N > 1 splits the hosts into N shards (world.shards) and starts N RQ worker processes
(``manage.py rqworker``) against REDIS_URL and DATABASE_URL, which run the daemon rounds and
the shards' slices; give them a Redis database no other workers serve. ``--kind`` names the
hosts' kind (``KINDS``: the world settings each kind runs with): simple, or engine (hosts driven by
the client engine, world.engine_host).
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")
# A project runs its daemons with DEBUG off (with it on, Django keeps and formats every
# statement); the bench's RQ workers inherit these.
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-" + secrets.token_urlsafe(40))

import django  # noqa: E402

django.setup()

import django_rq  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from rq import Worker  # noqa: E402

from world import shards  # noqa: E402
from world.jobs import unsynced_commits  # noqa: E402
from world.simulation import Counters, Simulation, WorldSettings  # noqa: E402

BASE = Path(__file__).resolve().parent.parent
# The world settings each kind of host runs with.
KINDS: dict[str, Callable[[int], dict[str, Any]]] = {
    "simple": lambda n: {"hosts": n},
    # hosts driven by the client engine (world.engine_host), boinc7, drawn as the simple ones are
    "engine": lambda n: {"hosts": 0, "engine_hosts": [{"count": n, "policy": "boinc7"}]},
}


# PostgreSQL's autovacuum defaults: a table is vacuumed once its dead rows pass 50 + 20 % of
# its rows, analyzed once the rows changed since its last ANALYZE pass 50 + 10 %.
VACUUM_THRESHOLD, VACUUM_SCALE = 50, 0.2
ANALYZE_THRESHOLD, ANALYZE_SCALE = 50, 0.1
AUTOVACUUM_NAPTIME = 10.0  # seconds between looks (autovacuum's default is 60)


def autovacuum_stand_in(stop: threading.Event) -> None:
    """Vacuum and analyze the tables autovacuum would, every AUTOVACUUM_NAPTIME seconds, on a
    server that has autovacuum off (this one has, to keep other benchmarks repeatable). Without
    it the planner never learns how the tables grow (it plans a hash join over every file for
    one workunit's inputs, a sequential scan for a few workunits' results) and every update
    leaves a dead row that later scans step over, so a world's queries slow down as its tables
    fill: a cost that no running project pays. Runs on its own connection, in a thread."""
    try:
        while not stop.wait(AUTOVACUUM_NAPTIME):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT s.relname, s.n_dead_tup > %s + %s * greatest(c.reltuples, 0),"
                    " s.n_mod_since_analyze > %s + %s * greatest(c.reltuples, 0)"
                    " FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid",
                    [VACUUM_THRESHOLD, VACUUM_SCALE, ANALYZE_THRESHOLD, ANALYZE_SCALE],
                )
                for table, vacuum, analyze in cursor.fetchall():
                    if vacuum or analyze:
                        verb = "VACUUM ANALYZE" if vacuum else "ANALYZE"
                        cursor.execute(f"{verb} {connection.ops.quote_name(table)}")
    finally:
        connection.close()


def autovacuum_is_off() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return cursor.fetchone()[0] == "off"


def run_in_one_chain(sim: Simulation) -> tuple[float, Counters]:
    """The work phase in this process; its wall seconds and the world's counters."""
    with unsynced_commits():
        began = time.perf_counter()
        sim.run_until(sim.work_end)
        return time.perf_counter() - began, sim.counters


def run_sharded(sim: Simulation, workers: int) -> tuple[float, Counters]:
    """The work phase by ``workers`` RQ worker processes, one shard each (world.shards); its
    wall seconds, from the first round enqueued to the last one run, and the world's counters.
    The workers are started, and seen to wait on the queue, before the clock starts."""
    queue = django_rq.get_queue(shards.QUEUE)
    redis = queue.connection
    run = f"bench-{uuid.uuid4().hex[:8]}"
    logs = Path(tempfile.mkdtemp(prefix="bench-world-"))
    processes = [
        subprocess.Popen(
            [sys.executable, str(BASE / "manage.py"), "rqworker", shards.QUEUE],
            cwd=BASE,
            stdout=subprocess.DEVNULL,
            stderr=open(logs / f"worker{i}.log", "w"),
        )
        for i in range(workers)
    ]
    try:
        while len(Worker.all(queue=queue)) < workers:
            if any(p.poll() is not None for p in processes):
                sys.exit(f"an RQ worker exited at start; see {logs}")
            time.sleep(0.1)
        began = time.perf_counter()
        shards.start(sim, workers, run=run, stop_at=sim.work_end, queue=queue)
        while shards.status(redis, run) == "running":
            time.sleep(0.05)
        wall = time.perf_counter() - began
    finally:
        for p in processes:
            p.terminate()
        for p in processes:
            p.wait(timeout=60)
    if shards.status(redis, run) != "stopped":
        sys.exit(f"the sharded world failed: {redis.get(shards.key(run, 'error'))!r}; see {logs}")
    coordinator = shards.get(redis, run, "coordinator")
    sim.t = coordinator.t
    return wall, coordinator.totals()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--locality", action="store_true")
    parser.add_argument("--kind", choices=sorted(KINDS), default="simple", help="the hosts' kind")
    parser.add_argument("--workers", type=int, choices=range(1, 65), metavar="N", default=1)
    args = parser.parse_args(argv)
    call_command("migrate", verbosity=0)
    settings = WorldSettings.from_dict(
        dict(days=args.days, seed=args.seed, locality=args.locality, **KINDS[args.kind](args.hosts))
    )
    sim = Simulation(settings, prefix=f"bench{int(time.time())}")
    stop = threading.Event()
    if autovacuum_is_off():
        threading.Thread(target=autovacuum_stand_in, args=(stop,), daemon=True).start()
    with unsynced_commits():
        began = time.perf_counter()
        sim.setup()
        setup_seconds = time.perf_counter() - began
    load_before = os.getloadavg()
    try:
        wall, c = run_in_one_chain(sim) if args.workers == 1 else run_sharded(sim, args.workers)
    finally:
        stop.set()
    figures = {
        "database": connection.vendor,
        "hosts": args.hosts,
        "kind": args.kind,
        "workers": args.workers,
        "simulated_seconds": sim.t,
        "wall_seconds": round(wall, 1),
        "setup_seconds": round(setup_seconds, 1),
        "simulated_seconds_per_wall_second": round(sim.t / wall, 1),
        "rpcs_per_second": round(c.rpcs / wall, 1),
        "results_sent_per_second": round(c.jobs_received / wall, 1),
        "results_reported_per_second": round(c.jobs_reported / wall, 1),
        "rpcs": c.rpcs,
        "jobs_received": c.jobs_received,
        "jobs_reported": c.jobs_reported,
        "daemon_rounds": c.daemon_rounds,
        "bytes_downloaded": c.bytes_downloaded,
        "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
