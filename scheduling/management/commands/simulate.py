"""`manage.py simulate SCENARIO`: run the client emulator (DESIGN.md, "Command-line contracts").

`--json` prints the run's summary as one JSON object; `--out DIR` writes BOINC's
`results.dat` line, `results.txt` and the whole run as `run.json`.
"""

from __future__ import annotations

import json
import os

from scheduling.engine import COMPAT_MODES, POLICIES, run
from scheduling.engine.units import parse_duration

from . import EngineCommand


class Command(EngineCommand):
    help = "Run the client scheduling emulator on a scenario (P(C, D, R) .txt, client_state.xml directory or .json)."

    def add_arguments(self, parser):
        parser.add_argument("scenario")
        parser.add_argument("--policy", choices=list(POLICIES), default="boinc7")
        parser.add_argument("--duration", default="10d", help="seconds, or a number with s/m/h/d (default 10d)")
        parser.add_argument("--delta", type=float, default=60.0, help="decision step in seconds (default 60)")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--compat", choices=list(COMPAT_MODES), default="intended")
        parser.add_argument("--existing-jobs-only", action="store_true")
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--out", metavar="DIR")

    def handle(self, *args, **opts):
        try:
            duration = parse_duration(opts["duration"])
        except ValueError as exc:
            self.fail(str(exc))
        if not opts["delta"] > 0:
            self.fail("--delta must be positive")
        self.check_run(duration=duration, delta=opts["delta"])
        out = opts["out"]
        if out and os.path.exists(out) and not os.path.isdir(out):
            self.fail(f"--out {out}: exists and is not a directory")
        scenario = self.load(opts["scenario"])
        result = self.engine(
            run,
            scenario,
            policy=opts["policy"],
            duration=duration,
            delta=opts["delta"],
            seed=opts["seed"],
            compat=opts["compat"],
            existing_jobs_only=opts["existing_jobs_only"],
        )
        if out:
            try:
                os.makedirs(out, exist_ok=True)
                with open(os.path.join(out, "results.dat"), "w") as fh:
                    fh.write(result.results_dat_line() + "\n")
                with open(os.path.join(out, "results.txt"), "w") as fh:
                    fh.write(self.text(result))
                with open(os.path.join(out, "run.json"), "w") as fh:
                    json.dump(result.to_dict(), fh)
            except OSError as exc:
                self.fail(f"--out {out}: {exc.strerror or exc}")
        if opts["json"]:
            self.stdout.write(json.dumps(result.summary()))
        else:
            self.stdout.write(self.text(result), ending="")

    @staticmethod
    def text(result) -> str:
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
            f"{'project':<16} {'share':>8} {'used GFLOP':>14} {'wasted GFLOP':>13} "
            f"{'met':>5} {'missed':>6} {'done':>5}",
        ]
        for p in result.projects:
            lines.append(
                f"{p.name:<16} {p.resource_share:>8g} {p.flops_used / 1e9:>14.0f} "
                f"{p.flops_wasted / 1e9:>13.0f} {p.deadlines_met:>5} {p.deadlines_missed:>6} "
                f"{p.jobs_completed:>5}"
            )
        lines.append(result.results_dat_line())
        return "\n".join(lines) + "\n"
