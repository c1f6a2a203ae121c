"""Client engine benchmark (issues 4 and 33; DESIGN.md "Performance targets"): prints CPU time
and peak memory of the emulator for the standard scenario over 1, 10 and 100 simulated days,
and for a 16-CPU, 4-GPU host with 20 projects over 10 days; then the start-up of
`python -m scheduling.engine` (60 simulated seconds: CPU time, peak RSS and, with
`--instructions`, instructions; issue 33's targets <= 200 M instructions and <= 30 MB).

    .venv/bin/python bench/engine.py [--policy boinc7] [--compat intended] [--instructions DAYS]
    BCE_SIM=/path/to/sim .venv/bin/python bench/engine.py --bce-only [--against client_state,big]

CPU time (not wall time, which a shared machine's load inflates) is measured on a plain run;
peak memory on a second run under tracemalloc (which slows Python down, so it is not timed).
Targets on a 2-core machine: standard 10 days <= 1 s, 100 days <= 8 s; big host 10 days <= 10 s.

With BCE_SIM pointing at BOINC's client emulator (bench/differential.py says how to build
it), scenarios/client_state's 4-CPU, 1-GPU, 2-project host over 100 days and the big host over
10 days (written as client_state.xml by differential.host_from_scenario) are run as whole
processes, BCE and then the engine (`python -m scheduling.engine`) in each compat mode of
`--bce-compat`, in alternation, `--repeat` times (default 3): it prints the median CPU time
(user + system) and peak RSS of each and the ratios (issue 33's targets: engine CPU <= 1.0x
BCE's, peak RSS <= BCE's + 10 MB). Peak RSS is GNU time's (/usr/bin/time), since a process
forked from this one starts with this one's memory as its peak. With `--instructions DAYS`,
valgrind's cachegrind counts both programs' instructions over DAYS simulated days less a
60-second run, so that start-up is left out. `--root DIR` times the engine of another tree
(e.g. `git archive <rev> | tar -x -C DIR`) against the same BCE runs, to measure a change;
`--before DIR` runs a second tree's engine in every round as well, just before `--root`'s,
so that the two sides of a change and BCE carry the same load.
`--against standard` adds scenarios/standard.json's 100 days, `--against cuda` issue 12's
20-project host with a CPU and a CUDA app in every project (`cuda_host`), once per job-length
fraction of `--cuda-fractions`: the shorter the jobs, the more are queued.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import re
import shutil
import statistics
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
    """(CPU seconds of a plain run, peak MB of a second one under tracemalloc, the result)."""
    start = time.process_time()
    result = run(scenario, policy=policy, duration=days * DAY, compat=compat)
    wall = time.process_time() - start
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


# GNU time: a process forked from this one starts with this one's resident memory as its
# peak (Linux carries a process's peak RSS over fork and exec), so the peak of a program is
# read from a small process that starts it, which /usr/bin/time is
GNU_TIME = "/usr/bin/time"


def _cpu_timed(cmd: list[str], cwd: str, log: str) -> tuple[float, float, float]:
    """A whole process: (wall s, user + system CPU s, peak RSS MB), through GNU time."""
    if not os.access(GNU_TIME, os.X_OK):
        raise SystemExit(f"{GNU_TIME} (GNU time) is needed to measure the peak memory of a program")
    report = log + ".time"
    start = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.run(
            [GNU_TIME, "-f", "%U %S %M", "-o", report, *cmd], cwd=cwd, stdout=subprocess.DEVNULL, stderr=err
        )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        with open(log) as fh:
            raise SystemExit(f"{cmd[0]} failed: {fh.read()[-2000:]}")
    with open(report) as fh:
        user, system, peak_kb = fh.read().split()[-3:]
    return wall, float(user) + float(system), float(peak_kb) / 1024.0


def _instructions(cmd: list[str], cwd: str, log: str) -> int:
    """Instructions a whole process executes (valgrind's cachegrind, no cache simulation)."""
    full = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *cmd]
    with open(log, "w") as err:
        proc = subprocess.run(full, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
    with open(log) as fh:
        text = fh.read()
    found = re.search(r"I\s+refs:\s+([\d,]+)", text)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"valgrind {cmd[0]} failed: {text[-2000:]}")
    return int(found.group(1).replace(",", ""))


def engine_command(root: str, case: str, policy: str, compat: str, seconds: float) -> list[str]:
    """The engine as a whole process without Django (python -m scheduling.engine)."""
    return [
        sys.executable,
        "-m",
        "scheduling.engine",
        case,
        "--policy",
        policy,
        "--compat",
        compat,
        "--duration",
        f"{seconds:.0f}",
    ]


def _cases(only: list[str], cuda_fractions: list[float]) -> list[tuple[str, str | Scenario, float]]:
    """(name, scenario or client_state directory, days) of the hosts run against BCE."""
    # scenarios/client_state is BOINC's own format already: BCE reads the files as they are
    hosts: list[tuple[str, str | Scenario, float]] = [
        ("client_state", os.path.join(ROOT, "scenarios", "client_state"), 100),
        ("big host", big_host(), 10),
        ("standard", load_scenario(os.path.join(ROOT, "scenarios", "standard.json")), 100),
    ]
    hosts += [(f"cuda {fraction:g}", cuda_host(fraction), 10) for fraction in cuda_fractions]
    return [h for h in hosts if h[0].split()[0] in only]


def _write(case: str, scenario) -> None:
    if isinstance(scenario, str):
        shutil.copytree(scenario, case, dirs_exist_ok=True)
    else:
        _differential().write_case(case, _differential().host_from_scenario(scenario))


def against_bce(
    sim: str,
    policy: str,
    compats: list[str],
    root: str,
    repeat: int,
    only: list[str],
    cuda_fractions: list[float],
    instructions: float | None,
    before: str | None = None,
) -> None:
    """Whole processes on the same client_state.xml, in alternation (BCE, then the engine in
    each compat mode), `repeat` times: the median CPU seconds (user + system) and peak RSS
    of each, and the ratios (issue 33's targets: engine CPU <= 1.0x BCE's, peak RSS <= BCE's
    + 10 MB). With `instructions` (days), cachegrind's instruction counts over that many
    simulated days less a 60-second run of the same program, so that start-up is left out.
    The engine of the tree `root` (this one, or an older revision's to measure a change);
    with `before`, another tree's engine as well, run just before `root`'s in each round,
    so that a change is measured side by side with BCE under the same load (its rows say
    "before" and the last column is root's CPU time over its)."""
    import scheduling.engine as engine_module

    core = getattr(engine_module, "CORE", "python")
    trees = [("before", before), ("", root)] if before else [("", root)]
    print(
        f"\nagainst BCE ({sim}), whole processes, median of {repeat} in alternation, engine of {root} "
        f"({core} core), policy {policy}" + (f"; before: engine of {before}" if before else "")
    )
    head = (
        f"{'host':<13} {'days':>4} {'compat':<15} {'engine CPU s':>12} {'BCE CPU s':>9} {'ratio':>6} "
        f"{'engine MB':>9} {'BCE MB':>7} {'+MB':>6}"
    )
    if instructions:
        head += f" {'engine M instr':>14} {'BCE M instr':>11} {'ratio':>6}"
    if before:
        head += f" {'after/before':>12}"
    print(head)
    for name, scenario, days in _cases(only, cuda_fractions):
        with tempfile.TemporaryDirectory() as case:
            _write(case, scenario)
            out = os.path.join(case, "bce")
            os.makedirs(out)
            bce: list[tuple[float, float, float]] = []
            eng: dict[tuple[str, str], list[tuple[float, float, float]]] = {
                (c, label): [] for c in compats for label, _tree in trees
            }
            for _ in range(repeat):
                bce.append(_cpu_timed(_bce(sim, case, out, days * DAY), out, os.path.join(case, "bce.stderr")))
                for compat in compats:
                    for label, tree in trees:
                        cmd = engine_command(tree, case, policy, compat, days * DAY)
                        eng[(compat, label)].append(_cpu_timed(cmd, tree, os.path.join(case, "engine.stderr")))
            bc = statistics.median(b[1] for b in bce)
            bm = statistics.median(b[2] for b in bce)
            counts: dict[str, int] = {}
            if instructions:
                counts["bce"] = _net_instructions(
                    lambda s, o=out: _bce(sim, case, o, s), out, os.path.join(case, "bce.vg"), instructions
                )
            for compat, label in eng:
                ec = statistics.median(e[1] for e in eng[(compat, label)])
                em = statistics.median(e[2] for e in eng[(compat, label)])
                shown = f"{compat} {label}".strip()
                line = (
                    f"{name:<13} {days:>4g} {shown:<15} {ec:>12.2f} {bc:>9.2f} {ec / bc:>6.2f} "
                    f"{em:>9.1f} {bm:>7.1f} {em - bm:>+6.1f}"
                )
                if instructions and not label:
                    n = _net_instructions(
                        lambda s, c=compat: engine_command(root, case, policy, c, s),
                        root,
                        os.path.join(case, "engine.vg"),
                        instructions,
                    )
                    line += f" {n / 1e6:>14,.0f} {counts['bce'] / 1e6:>11,.0f} {n / counts['bce']:>6.2f}"
                if before and not label:
                    old = statistics.median(e[1] for e in eng[(compat, "before")])
                    line += f" {ec / old:>12.2f}"
                print(line, flush=True)


def _bce(sim: str, case: str, out: str, seconds: float) -> list[str]:
    return _differential().bce_command(sim, case, out, seconds)


def _net_instructions(command, cwd: str, log: str, days: float) -> int:
    """Instructions of `days` simulated days less those of a 60-second run (start-up)."""
    return _instructions(command(days * DAY), cwd, log) - _instructions(command(60.0), cwd, log)


def startup(root: str, instructions: bool) -> None:
    """`python -m scheduling.engine` for 60 simulated seconds: peak RSS and, with valgrind,
    instructions (issue 33's targets: <= 200 M instructions, <= 30 MB)."""
    import scheduling.engine as engine_module

    print(f"\nstart-up: python -m scheduling.engine for 60 simulated seconds ({engine_module.CORE} core)")
    print(f"{'scenario':<16} {'CPU s':>6} {'peak MB':>8}" + (f" {'M instr':>8}" if instructions else ""))
    for name in ("client_state", "standard.json"):
        cmd = engine_command(root, os.path.join(ROOT, "scenarios", name), "boinc7", "intended", 60.0)
        with tempfile.TemporaryDirectory() as tmp:
            runs = [_cpu_timed(cmd, root, os.path.join(tmp, "log")) for _ in range(3)]
            cpu, peak = statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs)
            line = f"{name:<16} {cpu:>6.2f} {peak:>8.1f}"
            if instructions:
                line += f" {_instructions(cmd, root, os.path.join(tmp, 'vg')) / 1e6:>8,.0f}"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="boinc7")
    parser.add_argument("--compat", default="intended", help="of the in-process table")
    parser.add_argument("--root", default=ROOT, help="the tree whose engine runs against BCE (default this one)")
    parser.add_argument(
        "--before",
        metavar="DIR",
        help="another tree (the revision before a change) whose engine runs before --root's in every round",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side against BCE (the median is shown)")
    parser.add_argument("--bce-only", action="store_true", help="only the runs against BCE")
    parser.add_argument(
        "--against",
        default="client_state,big",
        help="the hosts run against BCE, of client_state, big, standard, cuda",
    )
    parser.add_argument(
        "--bce-compat", default="bce,intended", help="the engine's compat modes run against BCE (comma-separated)"
    )
    parser.add_argument(
        "--instructions",
        type=float,
        metavar="DAYS",
        help="also count instructions with valgrind over DAYS simulated days less a 60-second run",
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
    compats = args.bce_compat.split(",")
    if not compats or set(compats) - {"bce", "intended"}:
        parser.error(f"--bce-compat: {args.bce_compat!r} is not a comma-separated list of bce, intended")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.instructions is not None and not (0 < args.instructions <= 100):
        parser.error("--instructions: DAYS must be above 0 and at most 100")
    if args.instructions and not shutil.which("valgrind"):
        parser.error("--instructions needs valgrind on the PATH")
    if not args.bce_only:
        standard = load_scenario(os.path.join(ROOT, "scenarios", "standard.json"))
        cases = [
            ("standard", standard, 1, None),
            ("standard", standard, 10, 1.0),
            ("standard", standard, 100, 8.0),
            ("big host", big_host(), 10, 10.0),
        ]
        import scheduling.engine as engine_module

        print(f"policy {args.policy}, compat {args.compat}, {engine_module.CORE} core")
        print(
            f"{'scenario':<10} {'days':>5} {'CPU s':>8} {'target':>7} "
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
        startup(os.path.abspath(args.root), bool(args.instructions))
    if os.environ.get("BCE_SIM"):
        against_bce(
            os.environ["BCE_SIM"],
            args.policy,
            compats,
            os.path.abspath(args.root),
            args.repeat,
            args.against.split(","),
            fractions,
            args.instructions,
            os.path.abspath(args.before) if args.before else None,
        )


if __name__ == "__main__":
    main()
