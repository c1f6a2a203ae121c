"""Whether two versions of the client engine decide the same: runs a fixed set of scenarios and
prints, per case, a digest of everything the run recorded (figures of merit, projects, time
slices, REC and buffer samples, RPCs, decisions, host periods) and of round-robin snapshots.

    .venv/bin/python bench/engine_identity.py --save var/identity-new.json
    .venv/bin/python bench/engine_identity.py --root /path/to/older/tree --save var/identity-old.json
    .venv/bin/python bench/engine_identity.py --compare var/identity-old.json

`--core python|compiled` chooses the engine's core (BOINCWEB_ENGINE_CORE, scheduling/engine/
_core.py), so the compiled core is checked against the pure-Python one:

    .venv/bin/python bench/engine_identity.py --core python --save var/identity-python.json
    .venv/bin/python bench/engine_identity.py --core compiled --compare var/identity-python.json

`--root` imports the engine from another tree (e.g. `git archive <rev> | tar -x -C dir`), so a
change meant to be only faster can be checked against the revision before it; `--compare`
runs this tree and exits 1 when any case's digest differs, naming the series that differ.
The cases: every lab preset with its policies, the files of scenarios/ with every policy,
bench/engine.py's 20-project host, and random hosts from bench/differential.py's generator,
each under `--compat intended` and `--compat bce`. Wall time and event counts are printed
but not compared.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import random
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
DAY = 86400.0
SERIES = ("figures", "projects", "slices", "rec", "buffers", "rpcs", "decisions", "host_periods")


def _module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases(root: str, random_cases: int, days: float):
    """(name, scenario, policy, duration, snapshot times) for every case."""
    from scheduling.engine import load_scenario
    from scheduling.presets import PRESETS

    diff = _module("differential", os.path.join(HERE, "differential.py"))
    engine_bench = _module("engine_bench", os.path.join(HERE, "engine.py"))
    for preset in PRESETS:
        for policy in preset.policies:
            yield f"preset {preset.slug} {policy}", preset.build(), policy, preset.duration, ()
    scen = os.path.join(root, "scenarios")
    for name in sorted(os.listdir(scen)):
        scenario = load_scenario(os.path.join(scen, name))
        for policy in ("boinc7", "boinc5", "wrr", "fifo"):
            span = days * DAY if policy == "boinc7" else min(days, 2.0) * DAY
            yield f"scenarios/{name} {policy}", scenario, policy, span, (0.0, 3600.0, DAY)
    yield "big host boinc7", engine_bench.big_host(), "boinc7", min(days, 3.0) * DAY, (0.0, 7200.0)
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(1, random_cases + 1):
            host = diff.random_host(rng, i)
            # the hosts as the harness wrote them before it wrote <available> at fraction 1
            # and app_config.xml files, so that digests saved by older trees stay comparable
            for p in host["projects"]:
                p["available_stated"] = False
            case = os.path.join(tmp, f"case{i}")
            diff.write_case(case, host, app_configs=False)
            yield (
                f"random seed 1 case {i} ({diff.describe(host).strip()}) boinc7",
                load_scenario(case),
                "boinc7",
                min(days, 2.0) * DAY,
                (0.0, 6 * 3600.0),
            )


def digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def run_case(scenario, policy: str, duration: float, compat: str, snapshots) -> dict:
    from scheduling.engine import rr_snapshot, run

    start = time.perf_counter()
    result = run(scenario, policy=policy, duration=duration, compat=compat)
    wall = time.perf_counter() - start
    data = result.to_dict()
    out: dict[str, Any] = {name: digest(data[name]) for name in SERIES}
    out["figures_plain"] = data["figures"]
    out["events"] = result.events
    out["wall"] = round(wall, 3)
    if policy in ("boinc7", "boinc5"):
        out["snapshots"] = digest([rr_snapshot(scenario, policy=policy, at=at, compat=compat) for at in snapshots])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(HERE), help="the tree whose engine runs")
    parser.add_argument("--save", metavar="FILE", help="write the digests to FILE")
    parser.add_argument("--compare", metavar="FILE", help="compare with digests saved earlier; exit 1 on a difference")
    parser.add_argument("--random", type=int, default=12, help="random hosts (bench/differential.py, seed 1)")
    parser.add_argument("--days", type=float, default=10.0, help="days of the boinc7 runs of scenarios/")
    parser.add_argument("--only", metavar="TEXT", help="run only the cases whose name contains TEXT")
    parser.add_argument("--core", choices=("auto", "compiled", "python"), help="the engine core (default: auto)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    sys.path.insert(0, root)
    if args.core:
        os.environ["BOINCWEB_ENGINE_CORE"] = args.core
    old = {}
    if args.compare:
        with open(args.compare) as fh:
            old = json.load(fh)
    results = {}
    differ = 0
    total = 0.0
    import scheduling.engine

    print(f"engine of {root}, {getattr(scheduling.engine, 'CORE', 'python')} core")
    for name, scenario, policy, duration, snaps in cases(root, args.random, args.days):
        if args.only and args.only not in name:
            continue
        for compat in ("intended", "bce"):
            key = f"{name} --compat {compat} {duration / DAY:g}d"
            out = run_case(scenario, policy, duration, compat, snaps)
            results[key] = out
            total += out["wall"]
            mark = ""
            if key in old:
                bad = [s for s in SERIES + ("snapshots",) if old[key].get(s) != out.get(s)]
                if bad:
                    differ += 1
                    mark = "  DIFFERS: " + ", ".join(bad)
                else:
                    mark = f"  same ({old[key]['wall']:.2f} s, {old[key]['events']} events before)"
            elif old:
                mark = "  (not in the saved file)"
            print(f"{key:<90} {out['wall']:>7.2f} s {out['events']:>7} ev{mark}", flush=True)
    print(f"total engine wall time {total:.1f} s")
    if args.save:
        with open(args.save, "w") as fh:
            json.dump(results, fh, indent=1, sort_keys=True)
    if old:
        missing = [] if args.only else [k for k in old if k not in results]
        print(f"{differ} of {len(results)} cases differ" + (f"; {len(missing)} saved cases not run" if missing else ""))
        return 1 if differ or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
