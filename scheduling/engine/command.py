"""The `simulate` command line (DESIGN.md, "Command-line contracts"), shared by
`manage.py simulate` and `python -m scheduling.engine` (__main__.py), which runs it without
Django: a lab run or a script pays only for the engine.

`add_arguments(parser)` declares the flags on an argparse parser; `execute(opts)` checks
them, runs and returns what to print; a bad argument, one beyond the engine's limits or a
malformed scenario raises `CommandFailure` with a one-line message (exit code 2).
"""

from __future__ import annotations

import json
import os

from . import COMPAT_MODES, CORE, POLICIES, ScenarioError, load_scenario, run
from .scenario import check_run
from .units import parse_duration


class CommandFailure(Exception):
    """A one-line error of the command line: the caller prints it and exits with code 2."""


def add_arguments(parser) -> None:
    parser.add_argument("scenario")
    parser.add_argument("--policy", choices=list(POLICIES), default="boinc7")
    parser.add_argument("--duration", default="10d", help="seconds, or a number with s/m/h/d (default 10d)")
    parser.add_argument("--delta", type=float, default=60.0, help="decision step in seconds (default 60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compat", choices=list(COMPAT_MODES), default="intended")
    parser.add_argument("--existing-jobs-only", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", metavar="DIR")


def execute(opts: dict) -> str:
    """Run the simulation `opts` (the parsed flags, by their dest names) describes, write
    `--out`'s files and return the text to print: the summary as one JSON object with the
    core that ran (`"core": "compiled" | "python"`) under `--json`, the text report otherwise."""
    try:
        duration = parse_duration(opts["duration"])
    except ValueError as exc:
        raise CommandFailure(str(exc)) from None
    if not opts["delta"] > 0:
        raise CommandFailure("--delta must be positive")
    try:
        check_run(duration=duration, delta=opts["delta"])
    except ScenarioError as exc:
        raise CommandFailure(str(exc)) from None
    out = opts["out"]
    if out and os.path.exists(out) and not os.path.isdir(out):
        raise CommandFailure(f"--out {out}: exists and is not a directory")
    path = opts["scenario"]
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        raise CommandFailure(f"{path}: {exc}" if not str(exc).startswith(path) else str(exc)) from None
    try:
        result = run(
            scenario,
            policy=opts["policy"],
            duration=duration,
            delta=opts["delta"],
            seed=opts["seed"],
            compat=opts["compat"],
            existing_jobs_only=opts["existing_jobs_only"],
            # the series go only to --out's run.json: without it they are not kept
            series=bool(out),
        )
    except ValueError as exc:  # ScenarioError among them
        raise CommandFailure(str(exc)) from None
    if out:
        try:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "results.dat"), "w") as fh:
                fh.write(result.results_dat_line() + "\n")
            with open(os.path.join(out, "results.txt"), "w") as fh:
                fh.write(text(result))
            with open(os.path.join(out, "run.json"), "w") as fh:
                json.dump(result.to_dict(), fh)
        except OSError as exc:
            raise CommandFailure(f"--out {out}: {exc.strerror or exc}") from None
    if opts["json"]:
        data = result.summary()
        data["core"] = CORE
        return json.dumps(data)
    return text(result)


def text(result) -> str:
    """The text report: the figures of merit, each project's totals, results.dat's line."""
    f = result.figures
    lines = [
        f"scenario {result.scenario}  policy {result.policy}  compat {result.compat}  "
        f"seed {result.seed}  duration {result.duration:.0f} s",
        f"wasted fraction {f.wasted_fraction:.4f}",
        f"idle fraction   {f.idle_fraction:.4f}",
        f"share violation {f.share_violation:.4f}",
        f"monotony        {f.monotony:.4f}",
        f"RPCs per job    {f.rpcs_per_job:.4f}",
        "",
        f"{'project':<16} {'share':>8} {'used GFLOP':>14} {'wasted GFLOP':>13} {'met':>5} {'missed':>6} {'done':>5}",
    ]
    for p in result.projects:
        lines.append(
            f"{p.name:<16} {p.resource_share:>8g} {p.flops_used / 1e9:>14.0f} "
            f"{p.flops_wasted / 1e9:>13.0f} {p.deadlines_met:>5} {p.deadlines_missed:>6} "
            f"{p.jobs_completed:>5}"
        )
    lines.append(result.results_dat_line())
    return "\n".join(lines) + "\n"
