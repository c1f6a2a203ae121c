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
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from world.jobs import unsynced_sqlite  # noqa: E402
from world.simulation import Simulation, WorldSettings  # noqa: E402


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
    with unsynced_sqlite():
        began = time.perf_counter()
        sim.setup()
        setup_seconds = time.perf_counter() - began
        began = time.perf_counter()
        sim.run_until(sim.work_end)
        wall = time.perf_counter() - began
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
