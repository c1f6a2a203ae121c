"""Client engine benchmark (issue 4; DESIGN.md "Performance targets"): prints wall time and
peak memory of the emulator for the standard scenario over 1, 10 and 100 simulated days, and
for a 16-CPU, 4-GPU host with 20 projects over 10 days.

    .venv/bin/python bench/engine.py [--policy boinc7] [--compat intended]

Wall time is measured on a plain run; peak memory on a second run under tracemalloc (which
slows Python down, so it is not timed). Targets on a 2-core machine: standard 10 days <= 1 s,
100 days <= 8 s; big host 10 days <= 10 s.

With BCE_SIM pointing at BOINC's client emulator (bench/differential.py says how to build
it), the standard scenario over 100 days and the big host over 10 days are also written as
client_state.xml (differential.host_from_scenario), with scenarios/client_state's 4-CPU,
1-GPU, 2-project host over 100 days, and run as whole processes, BCE and the engine in
alternation (`--repeat`, default twice); it prints the best wall time, CPU time (user +
system) and peak RSS of each and their ratios (DESIGN.md targets: <= 1.0x and <= 0.1x BCE's
wall time, peak memory no more than BCE's). BCE writes its timeline and logs as it goes, so
on a busy disk its wall time is more than its CPU time; both are shown. `--root DIR` times
the engine of another tree (e.g. `git archive <rev> | tar -x -C DIR`) against the same BCE
runs, to measure a change; `--bce-only` skips the in-process table. `--against cuda` adds
issue 12's 20-project host with a CPU and a CUDA app in every project (`cuda_host`), once per
job-length fraction of `--cuda-fractions`: the shorter the jobs, the more are queued.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scheduling.engine import RunResult, load_scenario, run  # noqa: E402
from scheduling.engine.scenario import (  # noqa: E402
    App,
    AppVersion,
    Availability,
    GpuType,
    Host,
    Prefs,
    Project,
    Scenario,
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
            versions.append(AppVersion(avg_ncpus=0.5, flops=40e9, gpu_type="NVIDIA", gpu_usage=1.0, plan_class="cuda"))
        fpops = hours * 3600 * cpu
        app = App(
            name=f"app{i}",
            versions=tuple(versions),
            latency_bound=max(2.0, hours / 2) * DAY,
            fpops_est=fpops,
            fpops_std_dev=fpops / 10,
            checkpoint_period=600,
            resume_cost=30,
        )
        projects.append(
            Project(
                name=f"P{i:02d}",
                resource_share=float(50 + 25 * (i % 5)),
                apps=(app,),
                available=Availability(0.9, 3600),
            )
        )
    host = Host(
        ncpus=16,
        cpu_flops=cpu,
        gpus=(GpuType("NVIDIA", 4, 200e9),),
        on=Availability(0.7, 3600),
        active=Availability(0.9, 3600),
        gpu_active=Availability(0.8, 3600),
    )
    return Scenario(
        host=host,
        projects=tuple(projects),
        prefs=Prefs(work_buf_min_days=0.1, work_buf_additional_days=0.5),
        name="big_host",
    )


def cuda_host(runtime_fraction: float) -> Scenario:
    """Issue 12's 20-project host: 16 CPUs at 4 GFLOPS, 4 NVIDIA GPUs, every project with a CPU
    app and a CUDA app, latency bounds from 3 hours to 8 days in geometric steps, each job's
    estimated run time `runtime_fraction` of its latency bound (at most a day). Smaller
    fractions mean more, shorter jobs queued, which is where BCE's cost grows fastest."""
    low, high = math.log(3 * 3600.0), math.log(8 * DAY)
    projects = []
    for i in range(20):
        latency = math.exp(low + i * (high - low) / 19)
        runtime = min(latency * runtime_fraction, DAY)
        apps = []
        for name, version in (
            ("cpu", AppVersion(avg_ncpus=1.0, flops=4e9)),
            ("cuda", AppVersion(avg_ncpus=0.5, flops=40e9, gpu_type="NVIDIA", gpu_usage=1.0, plan_class="cuda")),
        ):
            fpops = runtime * version.flops
            apps.append(
                App(name=name, versions=(version,), latency_bound=latency, fpops_est=fpops, fpops_std_dev=fpops / 10)
            )
        projects.append(Project(name=f"P{i:02d}", resource_share=float(50 + 25 * (i % 5)), apps=tuple(apps)))
    host = Host(
        ncpus=16,
        cpu_flops=4e9,
        gpus=(GpuType("NVIDIA", 4, 200e9),),
        on=Availability(0.7, 3600),
        active=Availability(0.9, 3600),
        gpu_active=Availability(0.8, 3600),
    )
    return Scenario(
        host=host,
        projects=tuple(projects),
        prefs=Prefs(work_buf_min_days=0.1, work_buf_additional_days=0.5),
        name=f"cuda_host_{runtime_fraction:g}",
    )


def measure(scenario, days: float, policy: str, compat: str) -> tuple[float, float, RunResult]:
    start = time.perf_counter()
    result = run(scenario, policy=policy, duration=days * DAY, compat=compat)
    wall = time.perf_counter() - start
    tracemalloc.start()
    run(scenario, policy=policy, duration=days * DAY, compat=compat)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return wall, peak / 1e6, result


def _differential():
    spec = importlib.util.spec_from_file_location("differential", os.path.join(ROOT, "bench", "differential.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpu_timed(cmd: list[str], cwd: str, log: str) -> tuple[float, float, float]:
    """A whole process: (wall s, user + system CPU s, peak RSS MB)."""
    start = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        with open(log) as fh:
            raise SystemExit(f"{cmd[0]} failed: {fh.read()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def against_bce(
    sim: str, policy: str, compat: str, root: str, repeat: int, only: list[str], cuda_fractions: list[float]
) -> None:
    """Whole processes on the same client_state.xml, in alternation (DESIGN.md); the engine of
    the tree `root` (this one, or an older revision's to measure a change)."""
    diff = _differential()
    standard = load_scenario(os.path.join(ROOT, "scenarios", "standard.json"))
    # scenarios/client_state is BOINC's own format already: BCE reads the files as they are
    client_state = os.path.join(ROOT, "scenarios", "client_state")
    print(f"\nagainst BCE ({sim}), whole processes, best of {repeat} in alternation, engine of {root}")
    print(
        f"{'scenario':<13} {'days':>5} {'engine s':>9} {'BCE s':>7} {'ratio':>6} {'engine CPU':>11} {'BCE CPU':>8} "
        f"{'ratio':>6} {'engine MB':>10} {'BCE MB':>7} {'ratio':>6}"
    )
    hosts = [
        ("standard", standard, 100, 1.0),
        ("client_state", client_state, 100, 1.0),
        ("big host", big_host(), 10, 0.1),
    ]
    hosts += [(f"cuda {fraction:g}", cuda_host(fraction), 10, 0.1) for fraction in cuda_fractions]
    for name, scenario, days, target in hosts:
        if name.split()[0] not in only:
            continue
        with tempfile.TemporaryDirectory() as case:
            if isinstance(scenario, str):
                shutil.copytree(scenario, case, dirs_exist_ok=True)
            else:
                diff.write_case(case, diff.host_from_scenario(scenario))
            out = os.path.join(case, "bce")
            os.makedirs(out)
            code = (
                "import sys; sys.path.insert(0, %r); from scheduling.engine import load_scenario, run; "
                "run(load_scenario(%r), policy=%r, compat=%r, duration=%r)" % (root, case, policy, compat, days * DAY)
            )
            eng, bce = [], []
            for _ in range(repeat):
                eng.append(_cpu_timed([sys.executable, "-c", code], ROOT, os.path.join(case, "engine.stderr")))
                bce.append(
                    _cpu_timed(diff.bce_command(sim, case, out, days * DAY), out, os.path.join(case, "bce.stderr"))
                )
        (ew, ec, em), (bw, bc, bm) = min(eng), min(bce)
        print(
            f"{name:<13} {days:>5} {ew:>9.2f} {bw:>7.2f} {ew / bw:>6.2f} {ec:>11.2f} {bc:>8.2f} {ec / bc:>6.2f} "
            f"{em:>10.1f} {bm:>7.1f} {em / bm:>6.2f}" + ("" if ew / bw <= target else f"  (target <= {target}x)"),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="boinc7")
    parser.add_argument("--compat", default="intended")
    parser.add_argument("--root", default=ROOT, help="the tree whose engine runs against BCE (default this one)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each side against BCE (the best is shown)")
    parser.add_argument("--bce-only", action="store_true", help="only the runs against BCE")
    parser.add_argument(
        "--against",
        default="standard,client_state,big",
        help="the hosts run against BCE, of standard, client_state, big, cuda",
    )
    parser.add_argument(
        "--cuda-fractions",
        default="0.1,0.01",
        help="for the cuda hosts (issue 12's): job run times as fractions of the latency bound",
    )
    args = parser.parse_args()
    try:
        fractions = [float(f) for f in args.cuda_fractions.split(",")]
    except ValueError:
        parser.error(f"--cuda-fractions: {args.cuda_fractions!r} is not a comma-separated list of numbers")
    if not all(0 < f <= 1 for f in fractions):
        parser.error("--cuda-fractions: each fraction must be above 0 and at most 1")
    unknown = set(args.against.split(",")) - {"standard", "client_state", "big", "cuda"}
    if unknown:
        parser.error(f"--against: unknown host {', '.join(sorted(unknown))} (known: standard, client_state, big, cuda)")
    if not args.bce_only:
        standard = load_scenario(os.path.join(ROOT, "scenarios", "standard.json"))
        cases = [
            ("standard", standard, 1, None),
            ("standard", standard, 10, 1.0),
            ("standard", standard, 100, 8.0),
            ("big host", big_host(), 10, 10.0),
        ]
        print(f"policy {args.policy}, compat {args.compat}")
        print(
            f"{'scenario':<10} {'days':>5} {'wall s':>8} {'target':>7} "
            f"{'peak MB':>8} {'events':>8} {'slices':>7} {'jobs':>6}"
        )
        for name, scenario, days, target in cases:
            wall, peak, result = measure(scenario, days, args.policy, args.compat)
            jobs = sum(p.jobs_completed for p in result.projects)
            mark = "" if target is None else (f"{target:>6.0f}s" + ("" if wall <= target else " MISSED"))
            print(
                f"{name:<10} {days:>5} {wall:>8.3f} {mark:>7} {peak:>8.1f} {result.events:>8} "
                f"{len(result.slices):>7} {jobs:>6}"
            )
    if os.environ.get("BCE_SIM"):
        against_bce(
            os.environ["BCE_SIM"],
            args.policy,
            args.compat,
            os.path.abspath(args.root),
            args.repeat,
            args.against.split(","),
            fractions,
        )


if __name__ == "__main__":
    main()
