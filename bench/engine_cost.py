"""The lab's cost estimate against the engine's measured time (scheduling/engine/cost.py).

    .venv/bin/python bench/engine_cost.py [--cases 30] [--seed 2] [--cap 15]

Draws random scenarios (1-64 CPUs, 0-4 GPUs, 1-40 projects of 1-3 apps, jobs of 2 minutes
to 30 hours, buffers and time slices of several sizes, hosts on part of the time), runs each
for 6 hours to 2 days of simulated time, and prints the estimate, the CPU seconds the run took
and their ratio; a run is cut at --cap CPU seconds and counted as at least that. At the end,
the ratios' quantiles: the share of runs the estimate under- and overrates, and by how much.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scheduling.engine import run  # noqa: E402
from scheduling.engine.cost import estimate  # noqa: E402
from scheduling.engine.scenario import (  # noqa: E402
    App,
    AppVersion,
    Availability,
    GpuType,
    Host,
    Prefs,
    Project,
    Scenario,
    ScenarioError,
)


def random_scenario(rng: random.Random) -> Scenario:
    gpus = (GpuType("NVIDIA", rng.choice([1, 2, 4]), rng.choice([5e10, 2e11, 1e12])),) if rng.random() < 0.4 else ()
    projects = []
    for i in range(rng.choice([1, 2, 3, 5, 10, 20, 40])):
        apps = []
        for a in range(rng.choice([1, 1, 2, 3])):
            fpops = 10 ** rng.uniform(-1.5, 1.5) * 3600e9
            versions = [AppVersion(avg_ncpus=1.0, flops=1e9)]
            if gpus and rng.random() < 0.5:
                versions.append(
                    AppVersion(avg_ncpus=0.5, flops=gpus[0].peak_flops * 0.2, gpu_type="NVIDIA", gpu_usage=1.0)
                )
            apps.append(
                App(
                    name=f"a{a}",
                    versions=tuple(versions),
                    fpops_est=fpops,
                    fpops_std_dev=fpops / 10,
                    latency_bound=max(fpops / 1e9 * rng.uniform(2, 20), 86400),
                )
            )
        projects.append(Project(name=f"P{i}", resource_share=rng.choice([50, 100, 200]), apps=tuple(apps)))

    def availability():
        return Availability(rng.choice([1, 1, 0.9, 0.6]), rng.choice([600, 3600, 14400]))

    host = Host(
        ncpus=rng.choice([1, 2, 4, 8, 16, 32, 64]),
        cpu_flops=1e9,
        gpus=gpus,
        on=availability(),
        active=availability(),
        gpu_active=availability(),
    )
    prefs = Prefs(
        work_buf_min_days=rng.choice([0.01, 0.1, 0.5, 1]),
        work_buf_additional_days=rng.choice([0, 0.25, 0.5, 2]),
        cpu_scheduling_period_minutes=rng.choice([10, 60, 60, 120]),
    )
    return Scenario(host=host, projects=tuple(projects), prefs=prefs)


class Cut(Exception):
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--cap", type=float, default=15.0, help="CPU seconds a run may take (default 15)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ratios = []
    print(f"{'CPUs':>4} {'GPUs':>4} {'projects':>8} {'days':>5} {'estimate s':>10} {'measured s':>10} {'ratio':>6}")
    done = 0
    while done < args.cases:
        try:
            scenario = random_scenario(rng)
        except ScenarioError:  # a job under a second on a fast GPU: outside the limits
            continue
        done += 1
        days = rng.choice([0.25, 0.5, 1, 2])
        est = estimate(scenario, days * 86400).seconds
        start = time.process_time()

        def progress(_fraction):
            # called only by this iteration's run(), so `start` is this iteration's
            if time.process_time() - start > args.cap:  # noqa: B023
                raise Cut

        cut = False
        try:
            run(scenario, duration=days * 86400, policy=rng.choice(["boinc7", "boinc5"]), progress=progress)
        except Cut:
            cut = True
        spent = time.process_time() - start
        ratios.append(spent / est)
        print(
            f"{scenario.host.ncpus:>4} {sum(g.count for g in scenario.host.gpus):>4} {len(scenario.projects):>8} "
            f"{days:>5g} {est:>10.2f} {spent:>10.2f}{'+' if cut else ' '} {spent / est:>6.2f}",
            flush=True,
        )
    ratios.sort()

    def quantile(q):
        return ratios[round(q * (len(ratios) - 1))]

    print(
        f"measured / estimate: min {ratios[0]:.2f}, 10% {quantile(0.1):.2f}, median {quantile(0.5):.2f}, "
        f"90% {quantile(0.9):.2f}, max {ratios[-1]:.2f} ({len(ratios)} runs; + marks a run cut at --cap)"
    )
    print(f"estimate at least the measured time in {sum(r <= 1 for r in ratios)} of {len(ratios)} runs")


if __name__ == "__main__":
    main()
