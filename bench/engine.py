"""Client engine benchmark (issue 4; DESIGN.md "Performance targets"): prints wall time and
peak memory of the emulator for the standard scenario over 1, 10 and 100 simulated days, and
for a 16-CPU, 4-GPU host with 20 projects over 10 days.

    .venv/bin/python bench/engine.py [--policy boinc7] [--compat intended]

Wall time is measured on a plain run; peak memory on a second run under tracemalloc (which
slows Python down, so it is not timed). Targets on a 2-core machine: standard 10 days <= 1 s,
100 days <= 8 s; big host 10 days <= 10 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scheduling.engine import load_scenario, run  # noqa: E402
from scheduling.engine.scenario import (  # noqa: E402
    App, AppVersion, Availability, GpuType, Host, Prefs, Project, Scenario,
)

DAY = 86400.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def big_host() -> Scenario:
    """16 CPUs at 4 GFLOPS, 4 NVIDIA GPUs, 20 projects; every fourth project has a GPU
    version; CPU job lengths spread from 30 minutes to 12 hours."""
    cpu = 4e9
    projects = []
    for i in range(20):
        hours = 0.5 + i * (12.0 - 0.5) / 19
        versions = [AppVersion(avg_ncpus=1.0, flops=cpu)]
        if i % 4 == 0:
            versions.append(AppVersion(avg_ncpus=0.5, flops=40e9, gpu_type="NVIDIA", gpu_usage=1.0,
                                       plan_class="cuda"))
        fpops = hours * 3600 * cpu
        app = App(name=f"app{i}", versions=tuple(versions), latency_bound=max(2.0, hours / 2) * DAY,
                  fpops_est=fpops, fpops_std_dev=fpops / 10, checkpoint_period=600, resume_cost=30)
        projects.append(Project(name=f"P{i:02d}", resource_share=float(50 + 25 * (i % 5)), apps=(app,),
                                available=Availability(0.9, 3600)))
    host = Host(ncpus=16, cpu_flops=cpu, gpus=(GpuType("NVIDIA", 4, 200e9),),
                on=Availability(0.7, 3600), active=Availability(0.9, 3600), gpu_active=Availability(0.8, 3600))
    return Scenario(host=host, projects=tuple(projects),
                    prefs=Prefs(work_buf_min_days=0.1, work_buf_additional_days=0.5), name="big_host")


def measure(scenario, days: float, policy: str, compat: str) -> tuple[float, float, object]:
    start = time.perf_counter()
    result = run(scenario, policy=policy, duration=days * DAY, compat=compat)
    wall = time.perf_counter() - start
    tracemalloc.start()
    run(scenario, policy=policy, duration=days * DAY, compat=compat)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return wall, peak / 1e6, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="boinc7")
    parser.add_argument("--compat", default="intended")
    args = parser.parse_args()
    standard = load_scenario(os.path.join(ROOT, "scenarios", "standard.json"))
    cases = [("standard", standard, 1, None), ("standard", standard, 10, 1.0), ("standard", standard, 100, 8.0),
             ("big host", big_host(), 10, 10.0)]
    print(f"policy {args.policy}, compat {args.compat}")
    print(f"{'scenario':<10} {'days':>5} {'wall s':>8} {'target':>7} {'peak MB':>8} {'events':>8} {'slices':>7} {'jobs':>6}")
    for name, scenario, days, target in cases:
        wall, peak, result = measure(scenario, days, args.policy, args.compat)
        jobs = sum(p.jobs_completed for p in result.projects)
        mark = "" if target is None else (f"{target:>6.0f}s" + ("" if wall <= target else " MISSED"))
        print(f"{name:<10} {days:>5} {wall:>8.3f} {mark:>7} {peak:>8.1f} {result.events:>8} "
              f"{len(result.slices):>7} {jobs:>6}")


if __name__ == "__main__":
    main()
