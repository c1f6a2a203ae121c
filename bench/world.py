"""Volunteer world benchmark (issue 5; DESIGN.md "Performance targets"): a population of
hosts driving every back-end daemon for a stretch of simulated time, on the configured database
(PostgreSQL via DATABASE_URL for the figures the README states).

    DATABASE_URL=postgres://... .venv/bin/python bench/world.py [--hosts 10000] [--days 1]
        [--seed 1] [--locality]

Prints simulated seconds per wall second and results per second (results sent to hosts and
reported back, per wall second), with the world's own figures. Only the work phase is timed
(``--days`` of simulated time); the drain that finishes every workunit is not run.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from world.jobs import unsynced_sqlite  # noqa: E402
from world.simulation import Simulation, WorldSettings  # noqa: E402

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--locality", action="store_true")
    args = parser.parse_args(argv)
    call_command("migrate", verbosity=0)
    sim = Simulation(
        WorldSettings(hosts=args.hosts, days=args.days, seed=args.seed, locality=args.locality),
        prefix=f"bench{int(time.time())}",
    )
    stop = threading.Event()
    if autovacuum_is_off():
        threading.Thread(target=autovacuum_stand_in, args=(stop,), daemon=True).start()
    with unsynced_sqlite():
        began = time.perf_counter()
        sim.setup()
        setup_seconds = time.perf_counter() - began
        began = time.perf_counter()
        sim.run_until(sim.work_end)
        wall = time.perf_counter() - began
    stop.set()
    c = sim.counters
    figures = {
        "database": connection.vendor,
        "hosts": args.hosts,
        "simulated_seconds": sim.t,
        "wall_seconds": round(wall, 1),
        "setup_seconds": round(setup_seconds, 1),
        "simulated_seconds_per_wall_second": round(sim.t / wall, 1),
        "results_sent_per_second": round(c.jobs_received / wall, 1),
        "results_reported_per_second": round(c.jobs_reported / wall, 1),
        "rpcs_per_second": round(c.rpcs / wall, 1),
        "rpcs": c.rpcs,
        "jobs_received": c.jobs_received,
        "jobs_reported": c.jobs_reported,
        "daemon_rounds": c.daemon_rounds,
        "bytes_downloaded": c.bytes_downloaded,
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
