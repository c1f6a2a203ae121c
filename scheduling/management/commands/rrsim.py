"""`manage.py rrsim SCENARIO`: the round-robin simulation of a scenario's state
(DESIGN.md, "Command-line contracts"; reference/client.md §6.4, reference/debt-era.md §4)."""

from __future__ import annotations

import json

from scheduling.engine import COMPAT_MODES, rr_snapshot

from . import EngineCommand


class Command(EngineCommand):
    help = "Show the round-robin simulation (shortfall, idle instances, saturated time, deadline misses)."

    def add_arguments(self, parser):
        parser.add_argument("scenario")
        parser.add_argument("--policy", choices=["boinc7", "boinc5"], default="boinc7")
        parser.add_argument("--at", type=float, default=0.0, help="seconds into the run (default 0)")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--compat", choices=list(COMPAT_MODES), default="intended")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        if opts["at"] < 0:
            self.fail("--at must not be negative")
        self.check_run(at=opts["at"])
        scenario = self.load(opts["scenario"])
        snap = self.engine(
            rr_snapshot, scenario, policy=opts["policy"], at=opts["at"], seed=opts["seed"], compat=opts["compat"]
        )
        if opts["json"]:
            self.stdout.write(json.dumps(snap))
            return
        lines = [f"round-robin simulation at {snap['time']:.0f} s ({snap['policy']})"]
        for name, r in snap["resources"].items():
            lines.append(
                f"{name:<10} shortfall {r['shortfall']:.0f}  idle now {r['nidle_now']:g}  "
                f"saturated {r['saturated_time']:.0f} s  busy {r['busy_time']:.0f} s"
            )
        for p in snap["projects"]:
            lines.append(
                f"project {p['name']:<12} shortfall {p['shortfall']:.0f}  deadlines missed {p['deadlines_missed']}"
            )
        for j in snap["jobs"]:
            miss = "  MISSES DEADLINE" if j["deadline_miss"] else ""
            lines.append(f"  {j['name']:<24} {j['project']:<12} finishes at {j['projected_finish']:.0f} s{miss}")
        lines.append(f"total_shortfall {snap['total_shortfall']:.0f}")
        self.stdout.write("\n".join(lines))
