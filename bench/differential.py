"""Differential harness: the client engine against BOINC's own client emulator (BCE) on random
hosts (issue 12; DESIGN.md "Performance targets", reference/client.md §1-§5).

    BCE_SIM=/path/to/boinc/client/sim .venv/bin/python bench/differential.py \\
        [--cases 100] [--seed 1] [--days 10] [--out var/differential] [--keep 10] [--first 1]

For each case it draws a host from the seed, writes it as client_state.xml + global_prefs.xml
(BCE's input format, reference/client.md §2), runs BCE (`sim --infile_prefix case/
--outfile_prefix bce/ --duration D --delta 60`, whose figures of merit are results.dat's line
`wf .. if .. sv .. m .. r ..`) and `manage.py simulate case/ --compat bce --policy boinc7
--seed 1 --duration D --delta 60 --json` on the same files, and prints both sets of figures side
by side. The summary gives, per figure, the share of cases within tolerance (idle and wasted
fraction within 0.03 absolute, share violation and monotony within 0.1, RPCs per job within
20 %), and the worst cases, whose directories are kept under --out with a `rerun.sh` that
repeats both runs; the other cases' directories are deleted.

BCE seeds glibc's rand() with 1 and has no seed option; the engine runs with --seed 1, and under
--compat bce draws glibc's rand() after srand(1) in BCE's order (docs/engine-fidelity.md, "One
random stream, in BCE's order"). The two then follow one sample path for as long as they
decide alike, so each case also says how long their scheduler RPCs stay the same: the column
"same until" is the time of the first RPC that differs in time, project or jobs received
(BCE's log.txt against the engine's run.json), "-" when none does.

The space of hosts: 1-32 CPUs at 1-5 GFLOPS; 0-2 GPU types (NVIDIA, ATI) with 1-4
instances; 1-20 projects, shares 0 (backup) to 1000; per project 1-3 apps, each CPU, GPU
(fractional CPU use) or multi-threaded (avg_ncpus > 1); latency bounds 1 hour to 14 days; a
job size spread (std_dev); on, connected, active and GPU-active fractions 0.3-1; buffers 0-2
days; max_concurrent on some apps; jobs already on the host in some cases.

Without BCE_SIM it says how to build BCE and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAY = 86400.0
FIGURES = ("wasted_fraction", "idle_fraction", "share_violation", "monotony", "rpcs_per_job")
SHORT = {"wasted_fraction": "wf", "idle_fraction": "if", "share_violation": "sv", "monotony": "m", "rpcs_per_job": "r"}
# absolute tolerance, or (for RPCs per job) relative
TOLERANCE = {
    "wasted_fraction": ("abs", 0.03),
    "idle_fraction": ("abs", 0.03),
    "share_violation": ("abs", 0.1),
    "monotony": ("abs", 0.1),
    "rpcs_per_job": ("rel", 0.2),
}

HOW_TO_GET_BCE = """\
BCE_SIM is not set: it must point at BOINC's client emulator (the program `sim`).
Build it outside this repository:

    git clone https://github.com/BOINC/boinc.git && cd boinc
    ./_autosetup
    ./configure --disable-server --disable-manager --enable-client
    cd client && make -f makefile_sim CXXFLAGS="-O2 -DSIM -Wall -I ../lib -I .."

then run  BCE_SIM=$PWD/sim python bench/differential.py --cases 100 --seed 1 --days 10
"""


# --------------------------------------------------------------------------- random hosts


def _frac(rng) -> float:
    """An availability fraction in [0.3, 1]; a third of the time exactly 1."""
    return 1.0 if rng.random() < 1 / 3 else round(rng.uniform(0.3, 1.0), 3)


def random_host(rng: random.Random, index: int) -> dict:
    """One case drawn from the space in the module docstring, as plain data."""
    ncpus = rng.randint(1, 32)
    p_fpops = round(rng.uniform(1.0, 5.0), 3) * 1e9
    gpus: list[dict[str, Any]] = []
    for vendor in rng.sample(["NVIDIA", "ATI"], rng.choice([0, 0, 1, 1, 2])):
        gpus.append(
            {"type": vendor, "count": rng.randint(1, 4), "peak_flops": round(rng.uniform(20.0, 500.0), 1) * 1e9}
        )
    time_stats = {k: _frac(rng) for k in ("on", "connected", "active", "gpu_active")}
    prefs = {
        "work_buf_min_days": round(rng.uniform(0.0, 1.0), 3),
        "work_buf_additional_days": round(rng.uniform(0.0, 1.0), 3),
    }
    with_jobs = rng.random() < 0.3
    projects = []
    for i in range(rng.randint(1, 20)):
        share = 0.0 if rng.random() < 0.1 else float(rng.randint(1, 1000))
        apps = []
        for a in range(rng.randint(1, 3)):
            kinds = ["cpu", "mt"] + ["gpu"] * (2 if gpus else 0)
            kind = rng.choice(kinds) if ncpus > 1 or gpus else "cpu"
            if kind == "mt" and ncpus < 2:
                kind = "cpu"
            latency = math.exp(rng.uniform(math.log(3600.0), math.log(14 * DAY)))
            if kind == "gpu":
                gpu = rng.choice(gpus)
                usage = rng.choice([1.0, 1.0, 0.5])
                version = {
                    "avg_ncpus": round(rng.uniform(0.05, 1.0), 3),
                    "flops": gpu["peak_flops"] * round(rng.uniform(0.1, 0.6), 3),
                    "gpu": gpu["type"],
                    "gpu_usage": usage,
                }
            elif kind == "mt":
                n = rng.randint(2, min(ncpus, 8))
                version = {"avg_ncpus": float(n), "flops": n * p_fpops}
            else:
                version = {"avg_ncpus": 1.0, "flops": p_fpops}
            # an estimated run time of 1 % to 20 % of the latency bound, at most a day
            runtime = min(latency * rng.uniform(0.01, 0.2), DAY)
            fpops_est = runtime * version["flops"]
            app = {
                "name": f"app{a}",
                "kind": kind,
                "latency_bound": round(latency),
                "fpops_est": fpops_est,
                "std_dev": fpops_est * round(rng.uniform(0.0, 0.3), 3),
                "weight": rng.choice([1, 1, 2]),
                "max_concurrent": rng.randint(1, max(1, ncpus // 2)) if rng.random() < 0.15 else 0,
                "version": version,
            }
            apps.append(app)
        jobs = []
        if with_jobs:
            for k in range(rng.randint(0, 4)):
                app = rng.choice(apps)
                jobs.append(
                    {
                        "name": f"p{i}_init_{k}",
                        "app": app["name"],
                        "fpops_est": app["fpops_est"],
                        "latency": app["latency_bound"],
                    }
                )
        # an <available> element for 30 % of the projects, at fraction 1 a third of those times
        # (BOINC's emulator starts the process, drawing twice, even then)
        stated = rng.random() < 0.3
        projects.append(
            {
                "name": f"proj{i:02d}",
                "share": share,
                "apps": apps,
                "jobs": jobs,
                "available": _frac(rng) if stated else 1.0,
                "available_stated": stated,
            }
        )
    return {
        "index": index,
        "ncpus": ncpus,
        "p_fpops": p_fpops,
        "gpus": gpus,
        "time_stats": time_stats,
        "prefs": prefs,
        "projects": projects,
    }


_COPROC = {
    "NVIDIA": ("coproc_cuda", "cuda", "<have_cuda>1</have_cuda>"),
    "ATI": ("coproc_ati", "opencl_ati", "<have_opencl>1</have_opencl>"),
}


def client_state_xml(host: dict) -> str:
    """BOINC's client_state.xml with the emulator's SIM tags (reference/client.md §2)."""
    out = [
        "<client_state>",
        "<host_info>",
        f"    <p_ncpus>{host['ncpus']}</p_ncpus>",
        f"    <p_fpops>{host['p_fpops']:.6g}</p_fpops>",
        "    <m_nbytes>64e9</m_nbytes>",
    ]
    if host["gpus"]:
        out.append("    <coprocs>")
        for g in host["gpus"]:
            tag, _plan, have = _COPROC[g["type"]]
            out += [
                f"        <{tag}>",
                f"            <count>{g['count']}</count>",
                f"            <peak_flops>{g['peak_flops']:.6g}</peak_flops>",
                f"            {have}",
                f"        </{tag}>",
            ]
        out.append("    </coprocs>")
    out.append("</host_info>")
    out.append("<time_stats>")
    for k, v in host["time_stats"].items():
        out.append(f"    <{k}_frac>{v}</{k}_frac>")
    out.append("</time_stats>")
    for p in host["projects"]:
        url = f"http://{p['name']}.example.org/"
        out += [
            "<project>",
            f"    <master_url>{url}</master_url>",
            f"    <project_name>{p['name']}</project_name>",
            f"    <resource_share>{p['share']:g}</resource_share>",
        ]
        if p["available"] < 1 or p.get("available_stated"):
            out.append(f"    <available><frac>{p['available']}</frac><lambda>3600</lambda></available>")
        out.append("</project>")
        for a in p["apps"]:
            out += [
                "<app>",
                f"    <name>{a['name']}</name>",
                f"    <latency_bound>{a['latency_bound']}</latency_bound>",
                f"    <fpops_est>{a['fpops_est']:.6g}</fpops_est>",
                f"    <fpops><mean>{a['fpops_est']:.6g}</mean><std_dev>{a['std_dev']:.6g}</std_dev></fpops>",
                f"    <weight>{a['weight']}</weight>",
            ]
            if a["max_concurrent"]:
                out.append(f"    <max_concurrent>{a['max_concurrent']}</max_concurrent>")
            out.append("</app>")
            v = a["version"]
            plan = _COPROC[v["gpu"]][1] if "gpu" in v else ("mt" if a["kind"] == "mt" else "")
            out += [
                "<app_version>",
                f"    <app_name>{a['name']}</app_name>",
                "    <version_num>100</version_num>",
                f"    <plan_class>{plan}</plan_class>",
                f"    <avg_ncpus>{v['avg_ncpus']:g}</avg_ncpus>",
                f"    <flops>{v['flops']:.6g}</flops>",
            ]
            if "gpu" in v:
                out.append(f"    <coproc><type>{v['gpu']}</type><count>{v['gpu_usage']:g}</count></coproc>")
            out.append("</app_version>")
        for j in p["jobs"]:
            app = next(a for a in p["apps"] if a["name"] == j["app"])
            v = app["version"]
            plan = _COPROC[v["gpu"]][1] if "gpu" in v else ("mt" if app["kind"] == "mt" else "")
            received = 1.7e9
            out += [
                "<workunit>",
                f"    <name>{j['name']}</name>",
                f"    <app_name>{j['app']}</app_name>",
                "    <version_num>100</version_num>",
                f"    <rsc_fpops_est>{j['fpops_est']:.6g}</rsc_fpops_est>",
                "</workunit>",
                "<result>",
                f"    <name>{j['name']}_0</name>",
                f"    <wu_name>{j['name']}</wu_name>",
                "    <version_num>100</version_num>",
                f"    <plan_class>{plan}</plan_class>",
                f"    <received_time>{received:.0f}</received_time>",
                f"    <report_deadline>{received + j['latency']:.0f}</report_deadline>",
                "</result>",
            ]
    out.append("</client_state>")
    return "\n".join(out) + "\n"


def global_prefs_xml(host: dict) -> str:
    prefs = host["prefs"]
    return (
        "<global_preferences>\n"
        f"    <work_buf_min_days>{prefs['work_buf_min_days']}</work_buf_min_days>\n"
        f"    <work_buf_additional_days>{prefs['work_buf_additional_days']}</work_buf_additional_days>\n"
        "    <cpu_scheduling_period_minutes>60</cpu_scheduling_period_minutes>\n"
        "</global_preferences>\n"
    )


def host_from_scenario(scenario) -> dict:
    """A scenario of the engine (one version per app, no downtime or extra scheduler URLs)
    in this module's host form, so that BCE can run it (bench/engine.py)."""
    h = scenario.host
    projects = []
    for p in scenario.projects:
        apps = []
        for app in p.apps:
            for k, v in enumerate(app.versions):
                kind = "gpu" if v.gpu_type else ("mt" if v.avg_ncpus > 1 else "cpu")
                version = {"avg_ncpus": v.avg_ncpus, "flops": v.flops}
                if v.gpu_type:
                    version.update(gpu=v.gpu_type, gpu_usage=v.gpu_usage)
                # BCE picks an app's fastest version that needs work; one app per version
                # keeps every version in use
                fpops = app.fpops_est * (v.flops / app.versions[0].flops if k else 1.0)
                apps.append(
                    {
                        "name": app.name if k == 0 else f"{app.name}_{k}",
                        "kind": kind,
                        "latency_bound": round(app.latency_bound),
                        "fpops_est": fpops,
                        "std_dev": app.fpops_std_dev * fpops / app.fpops_est,
                        "weight": app.weight,
                        "max_concurrent": app.max_concurrent,
                        "version": version,
                    }
                )
        projects.append(
            {
                "name": p.name,
                "share": p.resource_share,
                "apps": apps,
                "jobs": [],
                "available": p.available.frac,
                "available_stated": p.available_stated,
            }
        )
    return {
        "index": 0,
        "ncpus": h.ncpus,
        "p_fpops": h.cpu_flops,
        "gpus": [{"type": g.name, "count": g.count, "peak_flops": g.peak_flops} for g in h.gpus],
        "time_stats": {k: getattr(h, k).frac for k in ("on", "connected", "active", "gpu_active")},
        "prefs": {
            "work_buf_min_days": scenario.prefs.work_buf_min_days,
            "work_buf_additional_days": scenario.prefs.work_buf_additional_days,
        },
        "projects": projects,
    }


def project_folder(name: str) -> str:
    """A project's folder beside client_state.xml, where BOINC's client reads its
    app_config.xml (PROJECT::project_dir: the master URL written without its scheme, '/'
    as '_', less the trailing '_')."""
    return os.path.join("projects", f"{name}.example.org")


def app_config_xml(project: dict) -> str | None:
    """The app_config.xml of a project that limits some app's jobs at once: each such app's
    max_concurrent (BOINC's emulator honours a limit only there, app_config.cpp)."""
    limited = [a for a in project["apps"] if a["max_concurrent"]]
    if not limited:
        return None
    out = ["<app_config>"]
    for a in limited:
        out.append(f"    <app><name>{a['name']}</name><max_concurrent>{a['max_concurrent']}</max_concurrent></app>")
    out.append("</app_config>")
    return "\n".join(out) + "\n"


def write_case(case_dir: str, host: dict, app_configs: bool = True) -> None:
    """The case's files: client_state.xml, global_prefs.xml and, with `app_configs`, the
    app_config.xml of each project with a limited app."""
    os.makedirs(case_dir, exist_ok=True)
    with open(os.path.join(case_dir, "client_state.xml"), "w") as fh:
        fh.write(client_state_xml(host))
    with open(os.path.join(case_dir, "global_prefs.xml"), "w") as fh:
        fh.write(global_prefs_xml(host))
    for p in host["projects"] if app_configs else ():
        text = app_config_xml(p)
        if text is not None:
            folder = os.path.join(case_dir, project_folder(p["name"]))
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "app_config.xml"), "w") as fh:
                fh.write(text)


def describe(host: dict) -> str:
    gpus = "+".join(f"{g['count']}{g['type'][0]}" for g in host["gpus"]) or "-"
    apps = sum(len(p["apps"]) for p in host["projects"])
    ts = host["time_stats"]
    return (
        f"{host['ncpus']:>2}c {gpus:<5} {len(host['projects']):>2}p {apps:>2}a "
        f"on{ts['on']:.2f} act{ts['active']:.2f} buf{host['prefs']['work_buf_min_days']:.2f}"
        f"+{host['prefs']['work_buf_additional_days']:.2f}"
    )


# --------------------------------------------------------------------------- the two runs


def _timed(cmd: list[str], cwd: str, log: str) -> tuple[int, float, float, str]:
    """Run a whole process; returns (exit code, wall seconds, peak RSS MB, stdout)."""
    start = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None  # stdout=PIPE
        out = proc.stdout.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - start, usage.ru_maxrss / 1024.0, out


def parse_results_dat(text: str) -> dict:
    """results.dat: `wf %f if %f sv %f m %f r %f` (sim.cpp SIM_RESULTS::print)."""
    parts = text.split()
    values = {parts[i]: float(parts[i + 1]) for i in range(0, len(parts) - 1, 2)}
    return {name: values[SHORT[name]] for name in FIGURES}


def bce_command(sim: str, case_dir: str, out_dir: str, duration: float) -> list[str]:
    return [
        sim,
        "--infile_prefix",
        case_dir + "/",
        "--outfile_prefix",
        out_dir + "/",
        "--duration",
        f"{duration:.0f}",
        "--delta",
        "60",
    ]


def engine_command(case_dir: str, duration: float) -> list[str]:
    """The engine's run of a case: `manage.py simulate`'s command line without Django
    (python -m scheduling.engine, run from the repository's top)."""
    return [
        sys.executable,
        "-m",
        "scheduling.engine",
        case_dir,
        "--compat",
        "bce",
        "--policy",
        "boinc7",
        "--seed",
        "1",
        "--duration",
        f"{duration:.0f}",
        "--delta",
        "60",
        "--json",
        "--out",
        os.path.join(case_dir, "engine"),
    ]


# client/sim.h START_TIME: BCE's clock starts an hour in, and log.txt prints it as [d days ]hh:mm:ss
BCE_START_TIME = 3600.0
BCE_LOG_LINE = re.compile(r"(?:(\d+) days? )?(\d+):(\d\d):(\d\d) \[([^\]]*)\] (.*)")


def bce_rpcs(log_path: str) -> list[tuple]:
    """BCE's scheduler RPCs from its log.txt: (seconds from the start, project, jobs received),
    jobs received "down" for an RPC skipped because the project was down (sim.cpp
    simulate_rpc)."""
    out: list[list] = []
    last = None
    with open(log_path, errors="replace") as fh:
        for line in fh:
            m = BCE_LOG_LINE.match(line)
            if not m:
                continue
            days, h, mi, sec, project, text = m.groups()
            t = int(days or 0) * DAY + int(h) * 3600 + int(mi) * 60 + int(sec) - BCE_START_TIME
            if text.startswith("RPC skipped: project down"):
                out.append([t, project, "down"])
            elif text.startswith("RPC: "):
                last = [t, project, None]
                out.append(last)
            elif text.startswith("Got ") and last is not None and last[2] is None:
                last[2] = int(text.split()[1])
    return [tuple(x) for x in out]


def engine_rpcs(run_json: str) -> list[tuple]:
    with open(run_json) as fh:
        rpcs = json.load(fh)["rpcs"]
    return [(r["time"], r["project"], sum(r["jobs_received"].values()) if r["ok"] else "down") for r in rpcs]


def same_until(case_dir: str) -> float | None:
    """The time of the first scheduler RPC on which BCE and the engine differ (in time,
    project or jobs received, or one side making it alone); None when none differs."""
    log = os.path.join(case_dir, "bce", "log.txt")
    run_json = os.path.join(case_dir, "engine", "run.json")
    if not (os.path.exists(log) and os.path.exists(run_json)):
        return None
    b, e = bce_rpcs(log), engine_rpcs(run_json)
    for x, y in zip(b, e):
        if x != y:
            return min(x[0], y[0])
    if len(b) != len(e):
        return (b[len(e)] if len(b) > len(e) else e[len(b)])[0]
    return None


def run_bce(sim: str, case_dir: str, duration: float) -> dict:
    out_dir = os.path.join(case_dir, "bce")
    os.makedirs(out_dir, exist_ok=True)
    code, wall, rss, _out = _timed(
        bce_command(sim, case_dir, out_dir, duration), out_dir, os.path.join(case_dir, "bce.stderr")
    )
    dat = os.path.join(out_dir, "results.dat")
    if code != 0 or not os.path.exists(dat):
        return {"error": f"BCE exited {code}", "wall": wall, "rss": rss}
    with open(dat) as fh:
        figures = parse_results_dat(fh.read())
    if not all(math.isfinite(v) for v in figures.values()):
        # e.g. a flops_total of 0 when nothing could ever run: BCE divides by it
        return {
            "error": "BCE printed non-finite figures " + " ".join(f"{v:g}" for v in figures.values()),
            "wall": wall,
            "rss": rss,
        }
    return {"figures": figures, "wall": wall, "rss": rss}


def run_engine(case_dir: str, duration: float) -> dict:
    code, wall, rss, out = _timed(engine_command(case_dir, duration), ROOT, os.path.join(case_dir, "engine.stderr"))
    if code != 0:
        return {"error": f"simulate exited {code}", "wall": wall, "rss": rss}
    summary = json.loads(out)
    with open(os.path.join(case_dir, "engine.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return {"figures": summary["figures"], "wall": wall, "rss": rss, "core": summary.get("core", "python")}


def within(name: str, engine: float, bce: float) -> bool:
    kind, tol = TOLERANCE[name]
    if kind == "abs":
        return abs(engine - bce) <= tol + 1e-12
    return abs(engine - bce) <= tol * abs(bce) + 1e-12


def badness(case: dict) -> float:
    """How far a case is outside tolerance, summed over the figures in units of tolerance."""
    if "error" in case:
        return math.inf
    total = 0.0
    for name in FIGURES:
        kind, tol = TOLERANCE[name]
        e, b = case["engine"][name], case["bce"][name]
        scale = tol if kind == "abs" else max(tol * abs(b), 1e-9)
        total += max(0.0, abs(e - b) / scale - 1.0)
    return total


def write_rerun(case_dir: str, sim: str, duration: float) -> None:
    with open(os.path.join(case_dir, "rerun.sh"), "w") as fh:
        fh.write(
            "#!/bin/sh\n# repeats both runs of this case; BCE_SIM may override the emulator's path\n"
            'cd "$(dirname "$0")"\n'
            f"${{BCE_SIM:-{sim}}} --infile_prefix ./ --outfile_prefix bce/ --duration {duration:.0f} --delta 60"
            " && cat bce/results.dat\n"
            f"{sys.executable} {os.path.join(ROOT, 'manage.py')} simulate . --compat bce --policy boinc7"
            f" --seed 1 --duration {duration:.0f} --delta 60\n"
        )
    os.chmod(os.path.join(case_dir, "rerun.sh"), 0o755)


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", type=float, default=10.0)
    parser.add_argument("--first", type=int, default=1, help="the first case number to run (1-based)")
    parser.add_argument("--out", default=os.path.join(ROOT, "var", "differential"))
    parser.add_argument("--keep", type=int, default=10, help="worst cases whose files are kept")
    parser.add_argument(
        "--json", metavar="FILE", help="also write every case's figures to FILE, rewritten after each case"
    )
    args = parser.parse_args(argv)
    sim = os.environ.get("BCE_SIM")
    if not sim:
        sys.stderr.write(HOW_TO_GET_BCE)
        return 2
    if not (os.path.isfile(sim) and os.access(sim, os.X_OK)):
        sys.stderr.write(f"BCE_SIM={sim} is not an executable file.\n\n" + HOW_TO_GET_BCE)
        return 2
    if args.cases < 1 or args.days <= 0 or args.first < 1:
        sys.stderr.write("--cases and --first must be at least 1 and --days positive\n")
        return 2
    sim = os.path.abspath(sim)
    duration = args.days * DAY
    out_root = os.path.join(os.path.abspath(args.out), f"seed{args.seed}")
    rng = random.Random(args.seed)
    hosts = [random_host(rng, i) for i in range(1, args.first + args.cases)][args.first - 1 :]
    print(f"differential: {len(hosts)} cases, seed {args.seed}, {args.days:g} days, BCE {sim}")
    print(
        f"{'case':>4} {'host':<42} "
        + " ".join(f"{SHORT[n] + ' eng/bce':>15}" for n in FIGURES)
        + f" {'eng s':>6} {'bce s':>6} {'same until':>10}"
    )
    cases = []
    for host in hosts:
        case_dir = os.path.join(out_root, f"case{host['index']:03d}")
        shutil.rmtree(case_dir, ignore_errors=True)
        write_case(case_dir, host)
        with open(os.path.join(case_dir, "host.json"), "w") as fh:
            json.dump(host, fh, indent=1)
        write_rerun(case_dir, sim, duration)
        bce = run_bce(sim, case_dir, duration)
        eng = run_engine(case_dir, duration)
        case = {
            "index": host["index"],
            "dir": case_dir,
            "host": describe(host),
            "engine_wall": eng["wall"],
            "bce_wall": bce["wall"],
            "engine_rss": eng["rss"],
            "bce_rss": bce["rss"],
        }
        if "error" in bce or "error" in eng:
            case["error"] = bce.get("error") or eng.get("error")
            print(f"{host['index']:>4} {case['host']:<42} {case['error']}", flush=True)
        else:
            case["engine"], case["bce"] = eng["figures"], bce["figures"]
            case["engine_core"] = eng["core"]
            case["same_until"] = same_until(case_dir)
            until = "-" if case["same_until"] is None else f"{case['same_until'] / DAY:.2f} d"
            cells = []
            for n in FIGURES:
                mark = " " if within(n, case["engine"][n], case["bce"][n]) else "*"
                cells.append(f"{case['engine'][n]:>6.3f}/{case['bce'][n]:<6.3f}{mark}")
            print(
                f"{host['index']:>4} {case['host']:<42} "
                + "  ".join(cells)
                + f" {eng['wall']:>6.1f} {bce['wall']:>6.1f} {until:>10}",
                flush=True,
            )
        # both runs' full records are large
        shutil.rmtree(os.path.join(case_dir, "bce"), ignore_errors=True)
        shutil.rmtree(os.path.join(case_dir, "engine"), ignore_errors=True)
        cases.append(case)
        if args.json:
            # after every case, so that a run stopped early still leaves its figures
            _write_json(args.json, args, cases)

    ok = [c for c in cases if "error" not in c]
    print()
    print(
        f"summary: {len(ok)} of {len(cases)} cases ran on both sides (the others are listed with the worst "
        f"cases); share within tolerance per figure"
    )
    for n in FIGURES:
        kind, tol = TOLERANCE[n]
        good = sum(within(n, c["engine"][n], c["bce"][n]) for c in ok)
        share = good / len(ok) if ok else 0.0
        mean_e = sum(c["engine"][n] for c in ok) / len(ok) if ok else 0.0
        mean_b = sum(c["bce"][n] for c in ok) / len(ok) if ok else 0.0
        tol_text = f"+-{tol:g}" if kind == "abs" else f"+-{tol:.0%}"
        print(
            f"  {n:<16} {tol_text:>7}  {share:6.0%} ({good}/{len(ok)})  mean engine {mean_e:.3f}  mean BCE {mean_b:.3f}"
            + ("" if share >= 0.9 else "   below 90 %")
        )
    agree = sorted(duration if c.get("same_until") is None else c["same_until"] for c in ok)
    if agree:
        whole = sum(1 for c in ok if c.get("same_until") is None)
        print(
            f"  scheduler RPCs the same throughout in {whole} of {len(ok)} cases; the first difference at a "
            f"median of {agree[len(agree) // 2] / DAY:.2f} days"
        )
    e_wall = sum(c["engine_wall"] for c in cases)
    b_wall = sum(c["bce_wall"] for c in cases)
    cores = sorted({c["engine_core"] for c in cases if "engine_core" in c})
    print(
        f"  wall time: engine {e_wall:.0f} s ({' and '.join(cores) or 'no'} core), BCE {b_wall:.0f} s "
        f"(ratio {e_wall / b_wall if b_wall else 0:.2f})"
    )
    ranked = sorted(cases, key=badness, reverse=True)
    worst = [c for c in ranked if badness(c) > 0][: args.keep]
    keep = {c["dir"] for c in worst}
    if worst:
        print(f"worst cases (files kept under {out_root}):")
        for c in worst:
            print(f"  case{c['index']:03d}  {c['host']}  " + (c.get("error") or f"badness {badness(c):.1f}"))
    for c in cases:
        if c["dir"] not in keep:
            shutil.rmtree(c["dir"], ignore_errors=True)
    if args.json:
        _write_json(args.json, args, cases)
    return 0


def _write_json(path: str, args, cases: list) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"seed": args.seed, "days": args.days, "cases": cases}, fh, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
