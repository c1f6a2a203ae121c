"""boincweb's server daemons side by side with BOINC's own, on random cases.

    BOINC_SERVER=/path/to/boinc python bench/server_differential.py --cases 300 --seed 1

``BOINC_SERVER`` names a BOINC source tree whose server is built (``sched/transitioner``,
``sched/cgi``, ``sched/feeder``, ``lib/crypt_prog`` ...) or a folder holding those programs;
``BOINC_DB`` a MariaDB database the harness may empty and fill (default
``boincweb_differential``, on ``BOINC_DB_HOST`` 127.0.0.1, user root, no password). Without
``BOINC_SERVER`` it prints how to build one and exits 2.

For each of ``--cases`` random cases drawn from ``--seed`` and each step (``--steps``), the
same rows (config options both sides support, an app and its versions, users, teams, hosts,
host app versions, workunits with their quorum and limits, results scattered over every
lifecycle state with times around "now") are loaded into BOINC's schema (db/schema.sql) on
MariaDB and into boincweb: on ``--database-url`` (by default ``DATABASE_URL``, so PostgreSQL
where the environment names it; its boincweb tables are emptied for each case, so never name
a database whose rows matter), else a SQLite database of its own under ``--out``. Then one step runs on
both sides at the same clock (``faketime`` for BOINC's programs): one pass of the transitioner,
the validator (sample_bitwise_validator against boincweb's ``bitwise``, with the case's credit
option drawn by ``random_credit``: CreditNew, --credit_from_wu, --credit_from_runtime or
--no_credit, sometimes a low --max_granted_credit, and CreditNew's PFC averages, scales, run
times and FLOPS estimates; BOINC's validator runs as a daemon for a moment, see
``run_boinc_validator``), the assimilator
(sample_dummy_assimilator against boincweb's ``record``), the file deleter, or one scheduler
request (``sched/cgi`` on standard input once ``sched/feeder`` has filled shared memory, the
same XML parsed by boincweb's protocol layer into ``handle_request``), or one scheduler
request under locality scheduling (``locality``: ``add_locality`` makes the case's workunits
read big sticky files and lists some in the request; BOINC's scheduler runs with
``<locality_scheduling/>``, boincweb's with ``App.locality_scheduling``). Every column the step
writes is compared (for the validator also the app versions' and host app versions' PFC
averages and the app versions' recent credit), and for the scheduler the reply's jobs,
deadlines, request_delay, messages (each one's priority and text; ``--message-kinds-only``:
the priorities alone) and the files the host is told to delete. Options boincweb keeps from
seeds (docs/server-fidelity.md) are set to BOINC's behaviour. Times BOINC writes
(``transition_time``, ``report_deadline``, ``sent_time``, ``received_time`` and the reply's
deadlines) agree within ``--time-tolerance`` seconds (default ``TIME_TOLERANCE``): faketime
starts BOINC's clock at the case's "now" and lets it run, so a program that takes a second
writes a second later.

A case in which BOINC's program dies on a signal (a scheduler that crashes gives no reply) is
a crash, kept and listed with its signal but counted neither as agreeing nor against
boincweb: the share of agreeing cases is taken over the cases BOINC's program finished.

Printed: per step, the share of cases that agree in every compared field, and for each that
does not, the first differing field. Those cases are kept under ``--out``/<step>/<case>/: the
rows (``boinc.sql``, loadable with ``mysql``), the request, both sides' outputs and the
differences, and a ``rerun.sh`` that loads the rows and runs BOINC's program by hand.
"""

import argparse
import dataclasses
import json
import os
import random
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from boinc_server import (  # noqa: E402
    PLATFORM,
    ROOT,
    Project,
    app_version_xml,
    howto,
    insert,
    parse_reply,
    scheduler_request_xml,
    setup_boincweb,
)

STEPS = ("transitioner", "validator", "assimilator", "file_deleter", "scheduler", "locality")
# The steps that answer one scheduler request ("locality": under locality scheduling).
SENDING = ("scheduler", "locality")
NOW = 1_800_000_000
DAY = 86400
INT_MAX = 2**31 - 1
BOINC_TABLES = ("platform", "app", "app_version", "user", "team", "host", "host_app_version", "workunit", "result")
HOWTO = howto("bench/server_differential.py --cases 300 --seed 1")
# Seconds by which a time BOINC writes may differ from boincweb's: faketime starts BOINC's
# clock at the case's "now" and lets it run while the program works (about a second under
# load for the scheduler and its feeder).
TIME_TOLERANCE = 2
# The columns and reply fields that hold a time read off the clock.
TIME_FIELDS = frozenset({"transition_time", "report_deadline", "sent_time", "received_time"})


# --- random cases --------------------------------------------------------------------------

S_INACTIVE, S_UNSENT, S_IN_PROGRESS, S_OVER = 1, 2, 4, 5
O_INIT, O_SUCCESS, O_COULDNT_SEND, O_CLIENT_ERROR, O_NO_REPLY, O_DIDNT_NEED = 0, 1, 2, 3, 4, 5
O_VALIDATE_ERROR, O_CLIENT_DETACHED = 6, 7
V_INIT, V_VALID, V_INVALID, V_NO_CHECK, V_INCONCLUSIVE, V_TOO_LATE = 0, 1, 2, 3, 4, 5


def random_result(rng, wu, index, hosts):
    """One result of ``wu`` in a random lifecycle state, times around NOW."""
    host = rng.choice(hosts)
    r = dict(
        id=wu["id"] * 100 + index,
        name=f"{wu['name']}_{index}",
        workunitid=wu["id"],
        server_state=S_UNSENT,
        outcome=O_INIT,
        validate_state=V_INIT,
        file_delete_state=0,
        client_state=0,
        hostid=0,
        userid=0,
        report_deadline=0,
        sent_time=0,
        received_time=0,
        exit_status=0,
        app_version_id=0,
        priority=0,
        granted_credit=0.0,
        output=None,
        create_time=NOW - 5 * DAY,
    )
    kind = rng.choices(
        [
            "unsent",
            "inactive",
            "in_progress",
            "success",
            "client_error",
            "no_reply",
            "didnt_need",
            "validate_error",
            "detached",
            "couldnt_send",
            "user_abort",
        ],
        [12, 1, 14, 22, 8, 6, 3, 3, 3, 1, 2],
    )[0]
    if kind in ("unsent", "inactive"):
        r["server_state"] = S_UNSENT if kind == "unsent" else S_INACTIVE
        return r
    if kind in ("didnt_need", "couldnt_send"):
        r.update(server_state=S_OVER, outcome=O_DIDNT_NEED if kind == "didnt_need" else O_COULDNT_SEND)
        return r
    sent = NOW - rng.randint(1, 4 * DAY)
    r.update(
        hostid=host["id"],
        userid=host["userid"],
        sent_time=sent,
        report_deadline=sent + wu["delay_bound"],
        app_version_id=1,
    )
    if kind == "in_progress":
        r["server_state"] = S_IN_PROGRESS
        r["report_deadline"] = NOW + rng.choice([-DAY, -1, 0, 1, 3600, DAY])
        return r
    r.update(server_state=S_OVER, received_time=min(NOW, sent + rng.randint(60, DAY)), client_state=5)
    if kind == "success":
        r.update(
            outcome=O_SUCCESS,
            validate_state=rng.choices(
                [V_INIT, V_VALID, V_INVALID, V_INCONCLUSIVE, V_NO_CHECK, V_TOO_LATE], [8, 3, 2, 2, 1, 1]
            )[0],
            output=rng.choice([b"A\n", b"A\n", b"B\n", b"C\n"]),
        )
    elif kind == "client_error":
        r.update(outcome=O_CLIENT_ERROR, validate_state=V_INVALID, client_state=3, exit_status=rng.choice([1, 194]))
    elif kind == "user_abort":
        r.update(outcome=O_CLIENT_ERROR, validate_state=V_INVALID, client_state=6, exit_status=203)
    elif kind == "no_reply":
        r.update(outcome=O_NO_REPLY, received_time=0, client_state=0, report_deadline=NOW - rng.randint(1, DAY))
    elif kind == "validate_error":
        r.update(outcome=O_VALIDATE_ERROR, validate_state=V_INVALID)
    elif kind == "detached":
        r.update(outcome=O_CLIENT_DETACHED, received_time=0)
    return r


def random_case(seed, index, step):
    """The rows of one case: a dict of lists of plain values, the same for both sides."""
    rng = random.Random(f"{seed}:{step}:{index}")
    config = dict(
        report_grace_period=rng.choice([0, 0, 3600]),
        daily_result_quota=rng.choice([5, 100, 500]),
        max_wus_to_send=rng.choice([2, 10, 10]),
        one_result_per_user_per_wu=rng.random() < 0.5,
        resend_lost_results=rng.random() < 0.5,
        delete_delay=rng.choice([0, 0, 3600]),
    )
    users = [dict(id=u, teamid=rng.choice([0, 1, 2]), authenticator=f"auth{u:08d}") for u in (1, 2, 3)]
    teams = [dict(id=t) for t in (1, 2)]
    hosts = []
    for h in (1, 2, 3):
        hosts.append(
            dict(
                id=h,
                userid=rng.choice(users)["id"] if h > 1 else 1,
                p_ncpus=rng.choice([1, 1, 2, 4, 8]),
                p_fpops=rng.choice([1e8, 1e9, 3e9, 1e10]),
                on_frac=rng.choice([0.02, 0.3, 0.5, 0.9, 1.0]),
                active_frac=rng.choice([0.5, 1.0, 1.0]),
                m_nbytes=rng.choice([1e9, 4e9, 16e9]),
                total_credit=rng.choice([0.0, 0.0, 500.0]),
                avg_turnaround=rng.choice([0.0, 0.0, 50000.0]),
            )
        )
    for h in hosts:
        h["expavg_credit"] = h["total_credit"] / 20
        h["expavg_time"] = NOW - 3 * DAY if h["total_credit"] else 0.0
    havs = [
        dict(
            host_id=h["id"],
            app_version_id=1,
            max_jobs_per_day=rng.choice([1, 2, 5, 50]),
            n_jobs_today=rng.choice([0, 1, 3]),
            consecutive_valid=rng.choice([0, 3]),
        )
        for h in hosts
        if rng.random() < 0.5
    ]
    wus, results = [], []
    nwus = 1 if step not in SENDING else rng.randint(1, 8)
    for w in range(1, nwus + 1):
        quorum = rng.choice([1, 2, 2, 3])
        target = quorum + rng.choice([0, 0, 1])
        total = target + rng.choice([0, 1, 3])
        # create_work's limits: max_success and max_error <= max_total, target <= max_success
        wu = dict(
            id=w,
            name=f"wu{index}x{w}",
            min_quorum=quorum,
            target_nresults=target,
            max_error_results=min(rng.choice([1, 2, 3]), total),
            max_total_results=total,
            max_success_results=min(target + rng.choice([0, 1, 2]), total),
            delay_bound=rng.choice([3600, DAY, 3 * DAY, 7 * DAY]),
            rsc_fpops_est=rng.choice([1e12, 3.6e12, 3.6e13, 3.6e14]),
            rsc_memory_bound=rng.choice([1e8, 5e8, 2e9, 64e9]),
            rsc_disk_bound=1e8,
            priority=rng.choice([0, 0, 1]),
            transition_time=NOW - rng.randint(0, 3600),
            need_validate=0,
            canonical_resultid=0,
            error_mask=0,
            assimilate_state=0,
            file_delete_state=0,
            transitioner_flags=0,
            hr_class=0,
            app_version_id=0,
            canonical_credit=0.0,
        )
        nres = rng.randint(0, min(wu["max_total_results"], 6))
        if step in ("scheduler", "locality", "validator"):
            nres = max(nres, 1)  # BOINC's validator enumerates workunits with results
        rows = [random_result(rng, wu, i, hosts) for i in range(nres)]
        if step in SENDING:
            rows[0].update(
                server_state=S_UNSENT,
                outcome=O_INIT,
                hostid=0,
                userid=0,
                validate_state=V_INIT,
                output=None,
                sent_time=0,
                report_deadline=0,
                received_time=0,
            )
        successes = [r for r in rows if r["outcome"] == O_SUCCESS]
        valid = [r for r in successes if r["validate_state"] == V_VALID]
        # the workunit's credit as created (what --credit_from_wu grants), and the credit of
        # results already valid
        wu["canonical_credit"] = min(wu["rsc_fpops_est"] * 200 / 86400e9, 200 * 1000 * 365)
        for r in valid:
            r["granted_credit"] = wu["canonical_credit"]
        if valid and rng.random() < 0.8:
            wu["canonical_resultid"] = valid[0]["id"]
            wu["assimilate_state"] = rng.choice([0, 1, 2, 2])
            wu["transition_time"] = rng.choice([wu["transition_time"], INT_MAX])
            if wu["assimilate_state"] == 2 and rng.random() < 0.3:
                valid[0]["file_delete_state"] = 2
        elif valid:
            # VALID without a canonical result is a state no daemon leaves: these wait
            for r in valid:
                r.update(validate_state=V_INIT, granted_credit=0.0)
        if step == "validator":
            wu["need_validate"] = 1
        if step == "assimilator":
            wu["assimilate_state"] = 1
        if step == "file_deleter":
            wu["file_delete_state"] = rng.choice([0, 1, 1])
            wu["assimilate_state"] = 2
            for r in rows:
                if r["output"] is not None or r["outcome"] == O_CLIENT_ERROR:
                    r["file_delete_state"] = rng.choice([0, 1, 1, 2])
        # (an error with unsent results left is a state only a transitioner pass still to come
        # leaves; BOINC's feeder would mark them DIDNT_NEED, which boincweb leaves to it)
        if rng.random() < 0.1 and step not in SENDING:
            wu["error_mask"] = rng.choice([1, 2, 16])
        wus.append(wu)
        results.extend(rows)
    case = dict(
        seed=seed,
        index=index,
        step=step,
        now=NOW,
        config=config,
        users=users,
        teams=teams,
        hosts=hosts,
        havs=havs,
        wus=wus,
        results=results,
        app_versions=[dict(id=1, version_num=100)],
    )
    add_hr_and_limits(case, random.Random(f"{seed}:{step}:{index}:hr"))
    if step in SENDING:
        case["request"] = random_request(rng, case)
        random_versions(random.Random(f"{seed}:{step}:{index}:versions"), case)
    if step == "scheduler":
        random_disk(random.Random(f"{seed}:{step}:{index}:disk"), case)
        random_app_limits(random.Random(f"{seed}:{step}:{index}:app_limits"), case)
    if step == "locality":
        add_locality(case, random.Random(f"{seed}:{step}:{index}:locality"))
    random_credit(case)
    return case


# --- locality scheduling (sched_locality.cpp; backend/daemons/sched_locality.py) ------------

LOCALITY_FILES = ("dfa", "dfb", "dfc")


def add_locality(case, rng):
    """A locality-scheduling case: each workunit reads one of up to three big sticky files and
    is named ``FILE__...`` (its results too), unsent results were created from four days to
    half a day ago, the host holds some of the files, downloads at 50 or 200 kB/s and has a
    disk allowance that may be short; config.xml has locality scheduling with sorted order
    (the random file order aside), no wait, a send timeout of 0 or 2 days and
    file_deletion_strategy 0 or 1. The working set is empty on both sides and no more work
    can be made for any file (BOINC's make_more_work_for_file finds no trigger)."""
    files = {name: rng.choice([10**5, 10**6, 5 * 10**7]) for name in LOCALITY_FILES[: rng.randint(1, 3)]}
    for wu in case["wus"]:
        data = rng.choice(sorted(files))
        old, wu["name"], wu["input"] = wu["name"], f"{data}__{wu['name']}", data
        wu["rsc_disk_bound"] = rng.choice([1e8, 1e8, 1e9])
        for r in case["results"]:
            if r["workunitid"] == wu["id"]:
                r["name"] = wu["name"] + r["name"][len(old) :]
    for r in case["results"]:
        if r["server_state"] == S_UNSENT:
            r["create_time"] = NOW - int(rng.choice([0.5, 1.0, 2.5, 4.0]) * DAY)
    for report in case["request"]["reports"]:
        report["name"] = next(r["name"] for r in case["results"] if r["name"].endswith("__" + report["name"]))
    if case["request"]["other_results"] is not None:
        case["request"]["other_results"] = [
            next(r["name"] for r in case["results"] if r["name"].endswith("__" + name))
            for name in case["request"]["other_results"]
        ]
    case["locality"] = dict(
        files=files,
        held=sorted(rng.sample(sorted(files), rng.randint(0, len(files)))),
        bwdown=rng.choice([5e4, 2e5]),
        send_timeout=rng.choice([0, 0, 2 * DAY]),
        file_deletion_strategy=rng.choice([0, 1]),
        # GB of disk for BOINC (disk_max_used_gb), of which the held files use their size
        disk_max_used_gb=rng.choice([100, 100, 1, 0.2]),
    )


def locality_request_xml(case, text):
    """The request with the files the host holds, its download rate and disk usage."""
    loc = case.get("locality")
    if not loc:
        return text
    used = sum(loc["files"][name] for name in loc["held"])
    extra = "".join(
        f"<file_info>\n<name>{name}</name>\n<nbytes>{loc['files'][name]}</nbytes>\n<status>1</status>\n</file_info>\n"
        for name in loc["held"]
    )
    extra += (
        f"<net_stats>\n<bwdown>{loc['bwdown']}</bwdown>\n</net_stats>\n"
        f"<disk_usage>\n<d_boinc_used_total>{used or 1}</d_boinc_used_total>\n"
        "</disk_usage>\n"
    )
    text = text.replace(
        "<disk_max_used_gb>100</disk_max_used_gb>", f"<disk_max_used_gb>{loc['disk_max_used_gb']}</disk_max_used_gb>", 1
    )
    return text.replace("</scheduler_request>", extra + "</scheduler_request>", 1)


def boinc_locality_options(case):
    """config.xml's locality options for BOINC: every file a host lists is a workunit file."""
    loc = case.get("locality")
    if not loc:
        return {}, []
    return (
        {
            "locality_scheduling_send_timeout": loc["send_timeout"],
            "file_deletion_strategy": loc["file_deletion_strategy"],
            "locality_scheduling_workunit_file": ".*",
        },
        ["locality_scheduling", "locality_scheduling_sorted_order"],
    )


def boincweb_locality_options(case):
    loc = case.get("locality")
    if not loc:
        return {}
    return dict(
        locality_scheduling_sorted_order=True,
        locality_scheduling_send_timeout=loc["send_timeout"],
        file_deletion_strategy=loc["file_deletion_strategy"],
        boinc_locality_limits=True,  # docs/server-fidelity.md departure 22
        boinc_locality_full_delay_bound=True,  # docs/server-fidelity.md, BOINC defect 2
        boinc_locality_full_disk_bound=True,  # docs/server-fidelity.md, BOINC defect 3
    )


# --- app versions and plan classes (sched_version.cpp get_app_version) ----------------------

PLATFORM_32 = "i686-pc-linux-gnu"
# The plan classes every case's project has (plan_class_spec.xml on both sides). CPU classes
# only: no name holds a GPU vendor's, which BOINC's feeder would take for a GPU class.
PLAN_CLASS_SPEC_XML = """<plan_classes>
<plan_class><name>mt</name><min_ncpus>2</min_ncpus><max_threads>4</max_threads>
<projected_flops_scale>.99</projected_flops_scale></plan_class>
<plan_class><name>mt_all</name><max_threads>16</max_threads></plan_class>
<plan_class><name>sse3</name><cpu_feature>pni</cpu_feature>
<projected_flops_scale>1.1</projected_flops_scale></plan_class>
<plan_class><name>avx</name><cpu_feature>avx</cpu_feature>
<projected_flops_scale>1.5</projected_flops_scale></plan_class>
<plan_class><name>newer</name><min_core_client_version>80000</min_core_client_version>
<projected_flops_scale>1.05</projected_flops_scale></plan_class>
<plan_class><name>older</name><max_core_client_version>71000</max_core_client_version>
<projected_flops_scale>2</projected_flops_scale></plan_class>
<plan_class><name>slow</name><projected_flops_scale>.5</projected_flops_scale></plan_class>
<plan_class><name>mine</name><user_id>1</user_id><projected_flops_scale>3</projected_flops_scale>
</plan_class>
<plan_class><name>cuda</name><gpu_type>nvidia</gpu_type><cuda/>
<min_nvidia_compcap>300</min_nvidia_compcap><min_cuda_version>8000</min_cuda_version>
<min_driver_version>40000</min_driver_version><min_gpu_ram_mb>1024</min_gpu_ram_mb>
<gpu_ram_used_mb>1024</gpu_ram_used_mb><gpu_peak_flops_scale>.2</gpu_peak_flops_scale>
<cpu_frac>.05</cpu_frac></plan_class>
<plan_class><name>cuda_half</name><gpu_type>nvidia</gpu_type><cuda/>
<min_nvidia_compcap>500</min_nvidia_compcap><max_driver_version>50000</max_driver_version>
<ngpus>.5</ngpus><gpu_peak_flops_scale>.3</gpu_peak_flops_scale></plan_class>
</plan_classes>
"""
PLAN_CLASSES = (
    "",
    "",
    "mt",
    "mt_all",
    "sse3",
    "avx",
    "newer",
    "older",
    "slow",
    "mine",
    "gone",
    "cuda",
    "cuda",
    "cuda_half",
)
# NVIDIA GPUs a client may describe: (compute capability, CUDA, driver, RAM in MB)
GPUS = ((210, 6000, 35000, 1024), (520, 9000, 45000, 4096), (750, 11000, 52000, 8192), (610, 10000, 46000, 512))
CLIENT_VERSIONS = ((7, 6, 33), (8, 0, 2), (8, 2, 4))


def random_versions(rng, case):
    """Half the scheduler cases get several app versions: version numbers, both Linux
    platforms, plan classes (CPU and CUDA; one the project lacks), beta, client version
    bounds and a deprecated one; host app versions of them with elapsed-time and PFC
    averages; all workunits pinned to one version number (in some cases); half of those an
    NVIDIA GPU asking for work. Every case: a client version, CPU features, the 32-bit
    platform as an alternative (sometimes), beta allowed (sometimes). The others keep one
    version."""
    case["version_options"] = dict(
        version_select_random_factor=0.0,
        allow_beta_work=rng.random() < 0.5,
        alt_platform=rng.random() < 0.6,
        client=rng.choice(CLIENT_VERSIONS),
        p_features=rng.choice(["", "fpu pni", "fpu pni avx", "avx"]),
        gpu=None,
    )
    if rng.random() < 0.5:
        return
    if rng.random() < 0.5:
        case["version_options"]["gpu"] = dict(
            zip(("compcap", "cuda", "driver", "ram_mb"), rng.choice(GPUS)),
            peak_flops=rng.choice([1e11, 1e12]),
            req_secs=rng.choice([0.0, 3600.0, 86400.0]),
            req_instances=rng.choice([0.0, 1.0]),
            estimated_delay=rng.choice([0.0, 3600.0]),
        )
    # the case's versions so far (the first, and homogeneous app version's other platform's,
    # which workunits may be committed to), then 1-5 more
    versions = list(case["app_versions"])
    first_new = len(versions) + 1
    for av_id in range(first_new, first_new + rng.randint(2, 6) - 1):
        versions.append(
            dict(
                id=av_id,
                version_num=rng.choice([100, 101, 102]),
                platform=rng.choice([PLATFORM, PLATFORM, PLATFORM_32]),
                plan_class=rng.choice(PLAN_CLASSES),
                beta=int(rng.random() < 0.15),
                min_core_version=rng.choice([0, 0, 0, 80000, 80200]),
                max_core_version=rng.choice([0, 0, 0, 79999, 80100]),
                deprecated=int(rng.random() < 0.1),
            )
        )
    seen, unique = set(), []
    for av in versions:  # app_version_unique: one row per number, platform and plan class
        key = (av["version_num"], av.get("platform", PLATFORM), av.get("plan_class", ""))
        if key not in seen:
            seen.add(key)
            unique.append(av)
    case["app_versions"] = unique
    for hav in case["havs"]:
        hav["app_version_id"] = rng.choice(unique)["id"]
        speed = case["hosts"][hav["host_id"] - 1]["p_fpops"] * rng.choice([0.5, 1, 2, 4])
        hav.update(
            et_n=rng.choice([0, 5, 15, 30]),
            et_avg=1 / speed,
            pfc_n=rng.choice([0, 1, 5, 30]),
            pfc_avg=rng.choice([0.5, 1.0, 2.0]),
        )
    unique_havs = {}
    for hav in case["havs"]:
        unique_havs.setdefault((hav["host_id"], hav["app_version_id"]), hav)
    case["havs"] = list(unique_havs.values())
    if rng.random() < 0.3:
        # every workunit pinned to one number: BOINC memoizes one choice per app, which an
        # unpinned job takes over whatever pinned job its random scan met first
        # (docs/server-fidelity.md), so mixed cases have no one answer
        number = rng.choice(unique)["version_num"]
        for wu in case["wus"]:
            wu["app_version_num"] = number


# --- disk, bandwidth and RAM preferences (sched_check.cpp check_disk, check_bandwidth) ------


def random_disk(rng, case):
    """In 60 % of the scheduler cases, the disk and network figures a client reports and the
    preferences the scheduler reads: the disk's size and free space, BOINC's use of it
    (``<disk_usage>``), the download speed measured (``<net_stats>``), the global
    preferences' disk and RAM limits, the project's ``default_disk_min_free_gb``, and each
    workunit's disk and bandwidth bounds. The other cases keep a large free disk and no
    bandwidth figures."""
    if rng.random() >= 0.6:
        return
    busy, idle = rng.choice([(0, 0), (0, 0), (50, 90), (25, 10), (50, 0)])
    case["disk"] = dict(
        d_free=rng.choice([5e11, 5e11, 3e9, 1.6e9, 1.1e9, 0.0]),
        d_boinc_used_total=rng.choice([0.0, 0.0, 1e9, 2e10]),
        n_bwdown=rng.choice([0.0, 0.0, 5e4, 5e5, 5e6]),
        disk_max_used_gb=rng.choice([0, 100, 10, 1.5]),
        disk_max_used_pct=rng.choice([0, 90, 5, 0.2]),
        disk_min_free_gb=rng.choice([0, 0, 0.5, 2]),
        ram_max_used_busy_pct=busy,
        ram_max_used_idle_pct=idle,
    )
    case["config"]["default_disk_min_free_gb"] = rng.choice([1, 1, 0, 0.5])
    for wu in case["wus"]:
        wu["rsc_disk_bound"] = rng.choice([1e8, 5e8, 1e9, 2e10])
        wu["rsc_bandwidth_bound"] = rng.choice([0.0, 0.0, 1e5, 1e6])


def disk_request_xml(case, text):
    """The request with the case's disk figures, download speed and global preferences."""
    d = case.get("disk")
    if not d:
        return text
    prefs = "".join(
        f"<{name}>{d[name]}</{name}>"
        for name in (
            "disk_max_used_gb",
            "disk_max_used_pct",
            "disk_min_free_gb",
            "ram_max_used_busy_pct",
            "ram_max_used_idle_pct",
        )
        if d[name]
    )
    start, end = text.index("<global_preferences>"), text.index("</global_preferences>")
    text = text[:start] + f"<global_preferences>{prefs}" + text[end:]
    text = text.replace("<d_free>5e11</d_free>", f"<d_free>{d['d_free']}</d_free>", 1)
    extra = ""
    if d["d_boinc_used_total"]:
        extra += f"<disk_usage>\n<d_boinc_used_total>{d['d_boinc_used_total']}</d_boinc_used_total>\n</disk_usage>\n"
    if d["n_bwdown"]:
        extra += f"<net_stats>\n<bwdown>{d['n_bwdown']}</bwdown>\n</net_stats>\n"
    return text.replace("</host_info>\n", "</host_info>\n" + extra, 1)


def versions_sent(case, boinc):
    """The app version ids of the jobs BOINC's scheduler sent in this case."""
    return sorted(
        r["app_version_id"]
        for r in boinc["result"].values()
        if abs(r["sent_time"] - case["now"]) <= TIME_TOLERANCE and r["server_state"] == S_IN_PROGRESS
    )


def version_counts(counted):
    """How many scheduler cases had several app versions, sent jobs, sent a version other
    than the first (a choice was made), and of those how many agree."""
    several = [(c, ok) for c, ok in counted if len(c["app_versions"]) > 1]
    chose = [(c, ok) for c, ok in several if any(v != 1 for v in c.get("versions_sent", []))]
    return {
        "cases with several versions": len(several),
        "of which sent jobs": sum(1 for c, _ in several if c.get("versions_sent")),
        "sent a version other than the first": len(chose),
        "of those agree": sum(1 for _, ok in chose if ok),
    }


def version_request_xml(case, text):
    """The request with the case's client version, CPU features, 32-bit platform and the
    plan-class capability every current client states."""
    o = case.get("version_options")
    if not o:
        return text
    major, minor, release = o["client"]
    text = (
        text.replace("<core_client_major_version>8<", f"<core_client_major_version>{major}<")
        .replace("<core_client_minor_version>0<", f"<core_client_minor_version>{minor}<")
        .replace("<core_client_release>2<", f"<core_client_release>{release}<")
    )
    extra = "<client_cap_plan_class>1</client_cap_plan_class>\n"
    if o["alt_platform"]:
        extra += f"<alt_platform>\n<name>{PLATFORM_32}</name>\n</alt_platform>\n"
    text = text.replace("<work_req_seconds>", extra + "<work_req_seconds>", 1)
    if o["p_features"]:
        text = text.replace("</p_model>", f"</p_model>\n<p_features>{o['p_features']}</p_features>", 1)
    gpu = o.get("gpu")
    if gpu:
        # where BOINC's client writes them: after host_info, at the request's top level
        text = text.replace(
            "</host_info>",
            "</host_info>\n<coprocs>\n<coproc_cuda>\n"
            f"<count>1</count>\n<name>GeForce</name>\n<have_cuda>1</have_cuda>\n"
            f"<peak_flops>{gpu['peak_flops']}</peak_flops>\n"
            f"<req_secs>{gpu['req_secs']}</req_secs>\n"
            f"<req_instances>{gpu['req_instances']}</req_instances>\n"
            f"<estimated_delay>{gpu['estimated_delay']}</estimated_delay>\n"
            f"<cudaVersion>{gpu['cuda']}</cudaVersion>\n"
            f"<drvVersion>{gpu['driver']}</drvVersion>\n"
            f"<totalGlobalMem>{gpu['ram_mb'] * 1048576}</totalGlobalMem>\n"
            f"<major>{gpu['compcap'] // 100}</major>\n"
            f"<minor>{gpu['compcap'] % 100 // 10}</minor>\n"
            "</coproc_cuda>\n</coprocs>",
            1,
        )
    return text


def boinc_version_rows(case):
    """BOINC's platform and app_version rows for the case's versions."""
    now = case["now"]
    rows = [
        insert("platform", dict(id=i, create_time=now, name=name, user_friendly_name=name))
        for i, name in enumerate(PLATFORMS, 1)
    ]
    for av in case["app_versions"]:
        rows.append(
            insert(
                "app_version",
                dict(
                    id=av["id"],
                    create_time=now,
                    appid=1,
                    version_num=av["version_num"],
                    platformid=PLATFORMS.index(av.get("platform", PLATFORM)) + 1,
                    xml_doc=app_version_xml(av["version_num"]),
                    plan_class=av.get("plan_class", ""),
                    beta=av.get("beta", 0),
                    min_core_version=av.get("min_core_version", 0),
                    max_core_version=av.get("max_core_version", 0),
                    deprecated=av.get("deprecated", 0),
                ),
            )
        )
    return rows


def write_plan_classes(folder):
    path = Path(folder) / "plan_class_spec.xml"
    path.write_text(PLAN_CLASS_SPEC_XML)
    return path


def boincweb_versions(case, app):
    """boincweb's AppVersion rows (each with an executable) for the case's versions."""
    from backend import models as m
    from protocol.models import AppVersionFile

    AppVersionFile.objects.all().delete()
    for av in case["app_versions"]:
        version = m.AppVersion.objects.create(
            project=m.Project.demo(),
            id=av["id"],
            app=app,
            version_num=av["version_num"],
            platform=av.get("platform", PLATFORM),
            plan_class=av.get("plan_class", ""),
            beta=bool(av.get("beta", 0)),
            min_core_version=av.get("min_core_version", 0),
            max_core_version=av.get("max_core_version", 0),
            deprecated=bool(av.get("deprecated", 0)),
        )
        AppVersionFile.objects.create(
            project=m.Project.demo(),
            app_version=version,
            name=f"uppercase_{av['id']}",
            nbytes=10,
            md5_cksum="0" * 32,
            file_signature="x",
        )


# --- credit (CreditNew and the validator's credit options) ----------------------------------

CREDIT_METHODS = ("credit_new", "credit_new", "credit_new", "credit_from_wu", "credit_from_runtime", "no_credit")


def random_credit(case):
    """Draw the case's credit option and CreditNew's inputs, from a generator of their own
    (so the other draws stay as they were): the method (CreditNew, BOINC's default, half the
    time; else credit_from_wu, credit_from_runtime or no_credit), sometimes a low
    max_granted_credit; the app's min_avg_pfc and host_scale_check; the app version's PFC
    average, scale and recent credit; the host app versions' PFC averages; and each result's
    elapsed time, CPU time, FLOPS estimate (none, BOINC's old default 1e9, or a real one) and
    runtime_outlier flag, its PFC from a third to twelve times the workunit's estimate (over
    rsc_fpops_bound, ten times it, at the top); and in half the validator cases outputs that
    all agree, with the jobs in progress reported since as successes."""
    rc = random.Random(f"{case['seed']}:{case['step']}:{case['index']}:credit")
    case["config"]["credit"] = rc.choice(CREDIT_METHODS)
    case["config"]["max_granted_credit"] = rc.choice([200 * 1000 * 365] * 4 + [20.0])
    case.setdefault("app", {}).update(
        min_avg_pfc=rc.choice([1.0, 1.0, 0.5, 2.0]), host_scale_check=int(rc.random() < 0.3)
    )
    for av in case["app_versions"]:
        n = rc.choice([0, 0, 5, 100, 150, 500])
        av.update(
            pfc_n=float(n),
            pfc_avg=rc.choice([0.5, 1.0, 2.0]) if n else 0.0,
            pfc_scale=rc.choice([0.0, 0.0, 1.0, 0.8, 1.3]),
            expavg_credit=rc.choice([0.0, 50.0]),
        )
        av["expavg_time"] = case["now"] - 2 * DAY if av["expavg_credit"] else 0.0
    for hav in case["havs"]:
        n = rc.choice([0, 3, 10, 30])
        hav.update(pfc_n=float(n), pfc_avg=rc.choice([0.5, 1.0, 3.0]) if n else 0.0)
        if rc.random() < 0.3:
            hav["consecutive_valid"] = 12
    wus = {wu["id"]: wu for wu in case["wus"]}
    # half the validator cases' outputs all agree, so that more workunits reach a canonical
    # result and credit is granted
    agree = case["step"] == "validator" and rc.random() < 0.5
    for r in case["results"]:
        r.update(elapsed_time=0.0, cpu_time=0.0, flops_estimate=0.0, runtime_outlier=0)
        if agree and r["server_state"] == S_IN_PROGRESS:
            # reported since: a success like random_result's
            r.update(
                server_state=S_OVER,
                outcome=O_SUCCESS,
                validate_state=V_INIT,
                client_state=5,
                received_time=min(case["now"], r["sent_time"] + 3600),
            )
        if r["outcome"] != O_SUCCESS:
            continue
        if agree:
            r["output"] = b"A\n"
        flops = rc.choice([0.0, 1e9, 2e9, 2e9, 3e9, 3e9])
        est = wus[r["workunitid"]]["rsc_fpops_est"]
        elapsed = round(est / (flops or 4.3e9) * rc.choice([0.3, 0.8, 1.0, 1.2, 3.0, 12.0]), 3)
        if rc.random() < 0.1:
            elapsed = 0.0
        r.update(
            elapsed_time=elapsed,
            cpu_time=round(elapsed * rc.choice([0.5, 1.0]), 3) or rc.choice([0.0, 100.0]),
            flops_estimate=flops,
            runtime_outlier=int(rc.random() < 0.15),
        )


def credit_args(case):
    """BOINC's validator command line for the case's credit option."""
    c = case["config"]
    args = [] if c["credit"] == "credit_new" else [f"--{c['credit']}"]
    return [*args, "--max_granted_credit", repr(float(c["max_granted_credit"]))]


def credit_options(case):
    """boincweb's SchedulerConfig credit fields for the case."""
    c = case["config"]
    return {name: c["credit"] == name for name in ("credit_from_wu", "credit_from_runtime", "no_credit")} | {
        "max_granted_credit": float(c["max_granted_credit"])
    }


def run_boinc_validator(project, args, now):
    """BOINC's validator as a daemon, stopped once it has written the app versions: with
    --one_pass it stops after the scan that found work, before write_modified_app_versions
    (which runs once a scan finds nothing), so the app versions' PFC averages would never be
    written. As a daemon it validates (clearing need_validate), scans again, finds nothing,
    writes them and sleeps; SIGHUP then stops it at the top of its next loop."""
    import signal
    import subprocess

    process = subprocess.Popen(
        [project.programs["validator"], "--app", "uppercase", "--sleep_interval", "1", *args],
        cwd=project.project / "cgi-bin",
        env=project.env(now),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 20
    while time.time() < deadline and process.poll() is None:
        if not project.query("SELECT id FROM workunit WHERE need_validate <> 0"):
            break
        time.sleep(0.05)
    time.sleep(1.0)  # the second scan and the write follow at once
    process.send_signal(signal.SIGHUP)
    try:
        out, _ = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    # stopped by our SIGHUP (or SIGKILL) is no crash of its own
    stopped = process.returncode in (-signal.SIGHUP, -signal.SIGKILL)
    project.returncode = 0 if stopped else process.returncode
    return out.decode(errors="replace")


def credit_rows_boinc(case):
    """UPDATEs giving BOINC's rows the case's credit inputs."""
    a = case["app"]
    rows = [f"UPDATE app SET min_avg_pfc={a['min_avg_pfc']!r}, host_scale_check={a['host_scale_check']}"]
    for av in case["app_versions"]:
        rows.append(
            "UPDATE app_version SET "
            + ", ".join(f"{k}={av[k]!r}" for k in AV_CREDIT_FIELDS + ("pfc_scale",))
            + f" WHERE id={av['id']}"
        )
    for hav in case["havs"]:
        rows.append(
            f"UPDATE host_app_version SET pfc_n={hav['pfc_n']!r}, "
            f"pfc_avg={hav['pfc_avg']!r}, consecutive_valid={hav['consecutive_valid']} "
            f"WHERE host_id={hav['host_id']} AND app_version_id={hav['app_version_id']}"
        )
    for r in case["results"]:
        if r["outcome"] == O_SUCCESS:
            rows.append(
                f"UPDATE result SET elapsed_time={r['elapsed_time']!r}, "
                f"cpu_time={r['cpu_time']!r}, flops_estimate={r['flops_estimate']!r}, "
                f"runtime_outlier={r['runtime_outlier']} WHERE id={r['id']}"
            )
    return rows


def load_credit_boincweb(case):
    """Give boincweb's rows the case's credit inputs."""
    from backend import models as m

    m.App.objects.update(**case["app"])
    for av in case["app_versions"]:
        m.AppVersion.objects.filter(id=av["id"]).update(**{k: av[k] for k in AV_CREDIT_FIELDS + ("pfc_scale",)})
    for hav in case["havs"]:
        m.HostAppVersion.objects.filter(host_id=hav["host_id"], app_version_id=hav["app_version_id"]).update(
            pfc_n=hav["pfc_n"], pfc_avg=hav["pfc_avg"], consecutive_valid=hav["consecutive_valid"]
        )
    for r in case["results"]:
        m.Result.objects.filter(id=r["id"]).update(
            elapsed_time=r["elapsed_time"],
            cpu_time=r["cpu_time"],
            flops_estimate=r["flops_estimate"],
            runtime_outlier=bool(r["runtime_outlier"]),
        )


AV_CREDIT_FIELDS = ("pfc_n", "pfc_avg", "expavg_credit", "expavg_time")
HAV_CREDIT_FIELDS = ("pfc_n", "pfc_avg")


def credit_snapshot_boinc(cursor):
    """The credit fields the validator writes besides result, host, user and team: the app
    versions' PFC averages and recent credit, the host app versions' PFC averages."""
    cursor.execute("SELECT * FROM app_version")
    versions = cursor.fetchall()
    cursor.execute("SELECT * FROM host_app_version")
    havs = cursor.fetchall()
    return {
        "app_version": {v["id"]: {f: num(v[f]) for f in AV_CREDIT_FIELDS} for v in versions},
        "hav_pfc": {f"{v['host_id']}/{v['app_version_id']}": {f: num(v[f]) for f in HAV_CREDIT_FIELDS} for v in havs},
    }


def credit_snapshot_boincweb():
    from backend import models as m

    return {
        "app_version": {v.id: {f: num(getattr(v, f)) for f in AV_CREDIT_FIELDS} for v in m.AppVersion.objects.all()},
        "hav_pfc": {
            f"{v.host_id}/{v.app_version_id}": {f: num(getattr(v, f)) for f in HAV_CREDIT_FIELDS}
            for v in m.HostAppVersion.objects.all()
        },
    }


def random_request(rng, case):
    """What host 1 asks: seconds and instances of CPU work, its queue, reports of its jobs in
    progress with every outcome, and (sometimes) its list of jobs still on board."""
    host = case["hosts"][0]
    mine = [r for r in case["results"] if r["hostid"] == 1 and r["server_state"] == S_IN_PROGRESS]
    reports = []
    for r in mine:
        if rng.random() < 0.4:
            outcome = rng.choice(["success", "success", "error", "abort"])
            reports.append(dict(name=r["name"], outcome=outcome))
    listed = None
    if rng.random() < 0.5:
        listed = [r["name"] for r in mine if rng.random() < 0.5 and r["name"] not in {x["name"] for x in reports}]
    return dict(
        **{k: host[k] for k in ("os_name", "p_vendor", "p_model")},
        cpu_req_secs=rng.choice([0.0, 1.0, 3600.0, 7200.0, 86400.0, 10 * 86400.0]),
        cpu_req_instances=rng.choice([0.0, 0.0, 1.0, 2.0]),
        estimated_delay=rng.choice([0.0, 0.0, 1.0, 3600.0, 50000.0]),
        p_ncpus=host["p_ncpus"],
        p_fpops=host["p_fpops"],
        on_frac=host["on_frac"],
        active_frac=host["active_frac"],
        m_nbytes=host["m_nbytes"],
        reports=reports,
        other_results=listed,
    )


def beta_prefs(case, user):
    """User 1's project preferences: <allow_beta_work> when the case says so."""
    if user["id"] == 1 and case.get("version_options", {}).get("allow_beta_work"):
        return "<project_preferences>\n<allow_beta_work>1</allow_beta_work>\n</project_preferences>\n"
    return ""


# --- homogeneous redundancy and job limits ------------------------------------------------

# The platforms of the case's app versions: Windows for one the host cannot run (homogeneous
# app version).
WINDOWS = "windows_x86_64"
PLATFORMS = (PLATFORM, PLATFORM_32, WINDOWS)
HR_OS = ("Linux", "Linux", "Microsoft Windows 10", "Darwin", "FreeBSD", "Haiku")
HR_CPUS = (
    ("GenuineIntel", "Intel(R) Xeon(R) CPU E5-2670 v3"),
    ("GenuineIntel", "Intel(R) Core(TM) i7-8700 CPU"),
    ("GenuineIntel", "Intel(R) Pentium(R) 4 CPU"),
    ("AuthenticAMD", "AMD Ryzen 7 5800X"),
    ("AuthenticAMD", "AMD Athlon(tm) 64 X2"),
    ("ARM", "Cortex-A72"),
    ("Power Macintosh", "PowerPC G5"),
)


def random_hr_options(rng):
    """Homogeneous redundancy off, the project's (<homogeneous_redundancy>) or the app's
    (BOINC refuses both at once), of type 1 or 2; homogeneous app version; hr_class_static."""
    where = rng.choice(["off", "project", "app", "app"])
    hr_type = rng.choice([1, 2])
    return dict(
        homogeneous_redundancy=hr_type if where == "project" else 0,
        app_hr=hr_type if where == "app" else 0,
        homogeneous_app_version=rng.random() < 0.4,
        hr_class_static=rng.random() < 0.2,
    )


def random_limit_options(rng):
    """max_wus_in_progress, a job limits file (config_aux.xml) with a project total or an
    app's CPU limit, min_sendwork_interval (the host asked an hour ago) and report_max."""
    limits = []
    if rng.random() < 0.25:
        limits.append(f"<project><total_limit><jobs>{rng.choice([1, 2, 3])}</jobs></total_limit></project>")
    if rng.random() < 0.25:
        per_proc = "<per_proc/>" if rng.random() < 0.5 else ""
        limits.append(
            f"<app><app_name>uppercase</app_name><cpu_limit><jobs>"
            f"{rng.choice([1, 2])}</jobs>{per_proc}</cpu_limit></app>"
        )
    xml = (
        ("<config>\n<max_jobs_in_progress>\n" + "\n".join(limits) + "\n</max_jobs_in_progress>\n</config>\n")
        if limits
        else ""
    )
    return dict(
        max_wus_in_progress=rng.choice([0, 0, 0, 1, 2]),
        max_wus_in_progress_gpu=rng.choice([0, 1]),
        job_limits_xml=xml,
        min_sendwork_interval=rng.choice([0, 0, 0, 1800, 7200]),
        report_max=rng.choice([0, 0, 0, 1, 2]),
    )


def random_reliable_options(rng):
    """Jobs that need reliable hosts, their shortened delay bound, and retries' priority."""
    return dict(
        reliable_on_priority=rng.choice([0, 0, 1]),
        reliable_reduced_delay_bound=rng.choice([0.0, 0.25, 0.5]),
        reliable_max_avg_turnaround=rng.choice([0, 3600]),
        reliable_priority_on_over=rng.choice([0, 0, 2]),
        reliable_priority_on_over_except_error=rng.choice([0, 0, 1]),
    )


def random_app_limits(rng, case):
    """In a third of the scheduler cases, the app's GPU limit or total limit in the job
    limits file (beside a CPU limit random_limit_options may have drawn), so that an app at
    its limit on one processor type goes on with its version for another."""
    if rng.random() >= 1 / 3:
        return
    extra = rng.choice(
        [
            f"<gpu_limit><jobs>{rng.choice([1, 2])}</jobs></gpu_limit>",
            f"<total_limit><jobs>{rng.choice([2, 3])}</jobs></total_limit>",
            "<gpu_limit><jobs>1</jobs></gpu_limit><total_limit><jobs>3</jobs></total_limit>",
        ]
    )
    config = case["config"]
    app = "<app><app_name>uppercase</app_name>"
    xml = config.get("job_limits_xml") or ("<config>\n<max_jobs_in_progress>\n</max_jobs_in_progress>\n</config>\n")
    if app in xml:
        xml = xml.replace(app, app + extra, 1)
    else:
        xml = xml.replace("</max_jobs_in_progress>", f"{app}{extra}</app>\n</max_jobs_in_progress>", 1)
    config["job_limits_xml"] = xml


def host_hr_class(host, hr_type):
    from backend.daemons.hr import hr_class

    return hr_class(host["os_name"], host["p_vendor"], host["p_model"], hr_type)


def add_hr_and_limits(case, rng):
    """Draw the options of homogeneous redundancy, homogeneous app version and the job limits
    into ``case`` (its own generator, so the other draws of a case stay as they were): the
    hosts' OS and CPU, the app's HR settings, a second app version for another platform, and
    the workunits' committed hr_class and app version (none, the first host's, another's)."""
    hr, limits = random_hr_options(rng), random_limit_options(rng)
    case["config"].update(hr, **limits, **random_reliable_options(rng))
    case["app"] = dict(homogeneous_redundancy=hr["app_hr"], homogeneous_app_version=hr["homogeneous_app_version"])
    for host in case["hosts"]:
        vendor, model = rng.choice(HR_CPUS)
        host.update(os_name=rng.choice(HR_OS), p_vendor=vendor, p_model=model)
    if hr["homogeneous_app_version"]:
        case["app_versions"].append(dict(id=2, version_num=100, platform=WINDOWS))
    hr_type = hr["homogeneous_redundancy"] or hr["app_hr"]
    for wu in case["wus"]:
        if hr_type and rng.random() < 0.6:
            wu["hr_class"] = host_hr_class(rng.choice(case["hosts"]), hr_type)
        if hr["homogeneous_app_version"] and rng.random() < 0.6:
            wu["app_version_id"] = rng.choice([1, 1, 2])
    if case["step"] in SENDING:
        # some versions reliable (10 valid in a row), some unsent jobs with their priority
        for hav in case["havs"]:
            if rng.random() < 0.4:
                hav["consecutive_valid"] = 12
        priorities = {wu["id"]: wu["priority"] for wu in case["wus"]}
        for r in case["results"]:
            if r["server_state"] == S_UNSENT and rng.random() < 0.5:
                r["priority"] = priorities[r["workunitid"]]


RELIABLE_OPTIONS = (
    "reliable_on_priority",
    "reliable_reduced_delay_bound",
    "reliable_max_avg_turnaround",
    "reliable_priority_on_over",
    "reliable_priority_on_over_except_error",
)


def boinc_hr_and_limit_options(config):
    """config.xml options and flags for BOINC's side (config_aux.xml is written apart)."""
    options = {
        name: config[name]
        for name in (
            "homogeneous_redundancy",
            "max_wus_in_progress",
            "max_wus_in_progress_gpu",
            "min_sendwork_interval",
            "report_max",
            *RELIABLE_OPTIONS,
        )
        if config.get(name)
    }
    flags = ["hr_class_static"] if config.get("hr_class_static") else []
    return options, flags


def boincweb_hr_and_limit_options(config):
    """SchedulerConfig options for boincweb's side."""
    from backend.daemons.sched_limit import read_job_limits

    options = {
        name: config[name]
        for name in (
            "homogeneous_redundancy",
            "hr_class_static",
            "max_wus_in_progress",
            "max_wus_in_progress_gpu",
            "min_sendwork_interval",
            "report_max",
            *RELIABLE_OPTIONS,
        )
        if name in config
    }
    if config.get("job_limits_xml"):
        options["job_limits"] = read_job_limits(config["job_limits_xml"])
    return options


def request_xml(case):
    """The scheduler request body both sides get."""
    q = case["request"]
    reports = []
    for report in q["reports"]:
        state, status = {"success": (5, 0), "error": (3, 1), "abort": (6, 203)}[report["outcome"]]
        reports.append(dict(name=report["name"], state=state, exit_status=status))
    return locality_request_xml(
        case,
        disk_request_xml(
            case,
            version_request_xml(
                case,
                scheduler_request_xml(
                    authenticator=case["users"][0]["authenticator"],
                    hostid=1,
                    req_secs=q["cpu_req_secs"],
                    req_instances=q["cpu_req_instances"],
                    estimated_delay=q["estimated_delay"],
                    host=dict(
                        p_ncpus=q["p_ncpus"],
                        p_fpops=q["p_fpops"],
                        m_nbytes=q["m_nbytes"],
                        on_frac=q["on_frac"],
                        active_frac=q["active_frac"],
                        os_name=q["os_name"],
                        p_vendor=q["p_vendor"],
                        p_model=q["p_model"],
                    ),
                    reports=reports,
                    other_results=q["other_results"],
                ),
            ),
        ),
    )


# --- BOINC's side --------------------------------------------------------------------------


class Boinc:
    """BOINC's side of the harness: a throwaway project (``boinc_server.Project``) whose
    tables are emptied and refilled with each case."""

    def __init__(self, server, db, host, work):
        self.project_ = Project(server, db, host, work, PROGRAMS)
        self.db, self.db_host, self.project = db, host, self.project_.project
        self.programs = self.project_.programs
        # the index sched_locality.cpp send_old_work names (Einstein@home's; not in
        # db/constraints.sql, and MariaDB refuses a USE INDEX of an index that is not there)
        self.project_.execute(["ALTER TABLE result ADD INDEX res_create_server_state (create_time, server_state)"])

    def write_config(self, config, case=None):
        options, flags = boinc_hr_and_limit_options(config)
        local_options, local_flags = boinc_locality_options(case or {})
        options, flags = {**options, **local_options}, flags + local_flags
        self.project_.write_config(
            {
                "report_grace_period": config["report_grace_period"],
                "daily_result_quota": config["daily_result_quota"],
                "max_wus_to_send": config["max_wus_to_send"],
                "delete_delay_hours": config["delete_delay"] / 3600,
                "version_select_random_factor": 0,
                **options,
                **(
                    {"default_disk_min_free_gb": config["default_disk_min_free_gb"]}
                    if "default_disk_min_free_gb" in config
                    else {}
                ),
            },
            [flag for flag in ("one_result_per_user_per_wu", "resend_lost_results") if config[flag]] + flags,
            long_name="differential",
        )
        aux = self.project / "config_aux.xml"
        aux.unlink(missing_ok=True)
        if config.get("job_limits_xml"):
            aux.write_text(config["job_limits_xml"])

    def load(self, case):
        """Empty the tables and insert the case's rows; return the SQL, for the kept case."""
        statements = [f"DELETE FROM {t}" for t in BOINC_TABLES]
        statements += boinc_rows(case)
        statements += credit_rows_boinc(case)
        self.credit_args = credit_args(case)
        self.project_.execute(statements)
        for folder in ("upload", "download"):
            shutil.rmtree(self.project / folder)
            (self.project / folder).mkdir()
        for r in case["results"]:
            if r["output"] is not None:
                (self.project / "upload" / output_name(r)).write_bytes(r["output"])
        for wu in case["wus"]:
            (self.project / "download" / f"{wu['name']}.in").write_bytes(b"input\n")
        for name, nbytes in case.get("locality", {}).get("files", {}).items():
            with open(self.project / "download" / name, "wb") as f:
                f.truncate(nbytes)  # decrement_disk_space_locality reads its size
        self.write_config(case["config"], case)
        write_plan_classes(self.project)
        return "SET SESSION sql_mode = '';\n" + ";\n".join(statements) + ";\n"

    def run(self, step, now, stdin=None):
        """Run BOINC's program for ``step`` at ``now``; returns its output, and leaves its
        exit status in ``returncode`` (negative: the signal that killed it)."""
        self.project_.returncode = 0
        try:
            return self.run_program(step, now, stdin)
        finally:
            self.returncode = self.project_.returncode

    def run_program(self, step, now, stdin):
        if step in SENDING:
            with self.project_.feeder(clock=now, args=("--allapps", "--priority_order")):
                return self.project_.schedule(stdin, clock=now)
        if step == "validator":
            return run_boinc_validator(self.project_, self.credit_args, now)
        return self.project_.daemon(step, clock=now)

    def snapshot(self):
        import pymysql.cursors

        got = {}
        with self.project_.connection.cursor(pymysql.cursors.DictCursor) as cursor:
            for table in ("workunit", "result", "host", "user", "team", "host_app_version"):
                cursor.execute(f"SELECT * FROM {table}")
                got[table] = cursor.fetchall()
            credit = credit_snapshot_boinc(cursor)
        return normal_boinc(got) | credit

    def files(self):
        return {folder: sorted(p.name for p in (self.project / folder).iterdir()) for folder in ("upload", "download")}


PROGRAMS = ("transitioner", "validator", "assimilator", "file_deleter", "scheduler", "feeder")


def output_name(result):
    """The output's physical name, as boincweb's Result.output_file_name (random = id)."""
    return f"{result['name']}_r{result['id']}_0"


def boinc_rows(case):
    now = case["now"]
    rows = boinc_version_rows(case)
    app = case["app"]
    rows.append(
        insert(
            "app",
            dict(
                id=1,
                create_time=now,
                name="uppercase",
                user_friendly_name="uppercase",
                homogeneous_redundancy=app["homogeneous_redundancy"],
                homogeneous_app_version=app["homogeneous_app_version"],
            ),
        )
    )
    for t in case["teams"]:
        rows.append(insert("team", dict(id=t["id"], create_time=now, userid=1, name=f"team{t['id']}", expavg_time=0)))
    for u in case["users"]:
        rows.append(
            insert(
                "user",
                dict(
                    id=u["id"],
                    create_time=now,
                    email_addr=f"u{u['id']}@example.org",
                    name=f"user{u['id']}",
                    authenticator=u["authenticator"],
                    teamid=u["teamid"],
                    total_credit=0,
                    expavg_credit=0,
                    expavg_time=0,
                    venue="",
                    cross_project_id="x",
                    passwd_hash="x",
                    project_prefs=beta_prefs(case, u),
                ),
            )
        )
    for h in case["hosts"]:
        rows.append(
            insert(
                "host",
                dict(
                    id=h["id"],
                    create_time=now - 30 * DAY,
                    userid=h["userid"],
                    rpc_seqno=4,
                    rpc_time=now - 3600,
                    total_credit=h["total_credit"],
                    expavg_credit=h["expavg_credit"],
                    expavg_time=h["expavg_time"],
                    domain_name=f"host{h['id']}",
                    host_cpid=f"cpid{h['id']}",
                    on_frac=h["on_frac"],
                    connected_frac=1,
                    active_frac=h["active_frac"],
                    gpu_active_frac=1,
                    p_ncpus=h["p_ncpus"],
                    p_fpops=h["p_fpops"],
                    p_iops=1e9,
                    m_nbytes=h["m_nbytes"],
                    d_total=1e12,
                    d_free=5e11,
                    avg_turnaround=h["avg_turnaround"],
                    venue="",
                    product_name="",
                    os_name=h["os_name"],
                    p_vendor=h["p_vendor"],
                    p_model=h["p_model"],
                    os_version="6.1",
                    misc="",
                ),
            )
        )
    day_start = now // DAY * DAY
    for hav in case["havs"]:
        rows.append(
            insert(
                "host_app_version",
                dict(
                    host_id=hav["host_id"],
                    app_version_id=hav["app_version_id"],
                    max_jobs_per_day=hav["max_jobs_per_day"],
                    n_jobs_today=hav["n_jobs_today"],
                    consecutive_valid=hav["consecutive_valid"],
                    et_n=hav.get("et_n", 0),
                    et_avg=hav.get("et_avg", 0),
                    pfc_n=hav.get("pfc_n", 0),
                    pfc_avg=hav.get("pfc_avg", 0),
                ),
            )
        )
    del day_start
    for wu in case["wus"]:
        infile = wu.get("input", f"{wu['name']}.in")
        xml = (
            f"<file_info>\n<name>{infile}</name>\n</file_info>\n<workunit>\n"
            f"<file_ref>\n<file_name>{infile}</file_name>\n<open_name>in</open_name>\n"
            "</file_ref>\n</workunit>\n"
        )
        rows.append(
            insert(
                "workunit",
                dict(
                    id=wu["id"],
                    create_time=now - 5 * DAY,
                    appid=1,
                    name=wu["name"],
                    xml_doc=xml,
                    rsc_fpops_est=wu["rsc_fpops_est"],
                    rsc_fpops_bound=wu["rsc_fpops_est"] * 10,
                    rsc_memory_bound=wu["rsc_memory_bound"],
                    rsc_disk_bound=wu["rsc_disk_bound"],
                    rsc_bandwidth_bound=wu.get("rsc_bandwidth_bound", 0.0),
                    need_validate=wu["need_validate"],
                    canonical_resultid=wu["canonical_resultid"],
                    canonical_credit=wu["canonical_credit"],
                    transition_time=wu["transition_time"],
                    delay_bound=wu["delay_bound"],
                    error_mask=wu["error_mask"],
                    file_delete_state=wu["file_delete_state"],
                    assimilate_state=wu["assimilate_state"],
                    hr_class=wu["hr_class"],
                    min_quorum=wu["min_quorum"],
                    target_nresults=wu["target_nresults"],
                    max_error_results=wu["max_error_results"],
                    max_total_results=wu["max_total_results"],
                    max_success_results=wu["max_success_results"],
                    result_template_file="templates/out",
                    priority=wu["priority"],
                    transitioner_flags=wu["transitioner_flags"],
                    app_version_id=wu["app_version_id"],
                    size_class=-1,
                    keywords="",
                    app_version_num=wu.get("app_version_num", 0),
                ),
            )
        )
    for r in case["results"]:
        out = ""
        if r["output"] is not None:
            out = f"<file_info>\n<name>{output_name(r)}</name>\n<nbytes>{len(r['output'])}</nbytes>\n</file_info>\n"
        rows.append(
            insert(
                "result",
                dict(
                    id=r["id"],
                    create_time=r["create_time"],
                    workunitid=r["workunitid"],
                    server_state=r["server_state"],
                    outcome=r["outcome"],
                    client_state=r["client_state"],
                    hostid=r["hostid"],
                    userid=r["userid"],
                    report_deadline=r["report_deadline"],
                    sent_time=r["sent_time"],
                    received_time=r["received_time"],
                    name=r["name"],
                    xml_doc_out=out,
                    xml_doc_in=(
                        f"<file_info>\n<name>{output_name(r)}</name>\n<generated_locally/>\n"
                        "<upload_when_present/>\n<max_nbytes>10000000</max_nbytes>\n"
                        "<url>http://localhost/p/upload</url>\n</file_info>\n<result>\n"
                        f"<file_ref>\n<file_name>{output_name(r)}</file_name>\n"
                        "<open_name>out</open_name>\n</file_ref>\n</result>\n"
                    ),
                    file_delete_state=r["file_delete_state"],
                    validate_state=r["validate_state"],
                    granted_credit=r["granted_credit"],
                    random=r["id"],
                    appid=1,
                    exit_status=r["exit_status"],
                    priority=r["priority"],
                    app_version_id=r["app_version_id"],
                    size_class=-1,
                    teamid=0,
                ),
            )
        )
    return rows


RESULT_FIELDS = (
    "server_state",
    "outcome",
    "validate_state",
    "file_delete_state",
    "hostid",
    "userid",
    "report_deadline",
    "sent_time",
    "received_time",
    "exit_status",
    "app_version_id",
    "granted_credit",
    "priority",
)
WU_FIELDS = (
    "need_validate",
    "canonical_resultid",
    "canonical_credit",
    "transition_time",
    "error_mask",
    "file_delete_state",
    "assimilate_state",
    "hr_class",
    "target_nresults",
    "app_version_id",
)
HOST_FIELDS = ("total_credit", "expavg_credit", "expavg_time", "avg_turnaround")
CREDIT_FIELDS = ("total_credit", "expavg_credit", "expavg_time")
HAV_FIELDS = ("max_jobs_per_day", "n_jobs_today", "consecutive_valid")


def normal_boinc(got):
    return {
        "workunit": {w["name"]: {f: num(w[f]) for f in WU_FIELDS} for w in got["workunit"]},
        "result": {r["name"]: {f: num(r[f]) for f in RESULT_FIELDS} for r in got["result"]},
        "host": {h["id"]: {f: num(h[f]) for f in HOST_FIELDS} for h in got["host"]},
        "user": {u["id"]: {f: num(u[f]) for f in CREDIT_FIELDS} for u in got["user"]},
        "team": {t["id"]: {f: num(t[f]) for f in CREDIT_FIELDS} for t in got["team"]},
        "host_app_version": {
            f"{v['host_id']}/{v['app_version_id']}": {f: num(v[f]) for f in HAV_FIELDS} for v in got["host_app_version"]
        },
    }


def num(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        return round(v, 6)
    return v


def parse_boinc_reply(text, texts=True):
    """The reply's jobs (name, deadline), request_delay and messages from BOINC's XML: each
    message's (priority, text), or with ``texts`` false its priority alone."""
    reply = parse_reply(text)
    if "error" in reply:
        return reply
    reply["jobs"] = sorted([j["name"], j["report_deadline"]] for j in reply["jobs"])
    texts_of = reply.pop("message_texts")
    if texts:
        reply["messages"] = [list(pair) for pair in texts_of]
    return reply


def reply_messages(messages, texts=True):
    """boincweb's reply messages as the harness compares them (``parse_boinc_reply``)."""
    if texts:
        return [list(pair) for pair in sorted({(m.priority, m.text.strip()) for m in messages})]
    return sorted({m.priority for m in messages})


# --- boincweb's side -----------------------------------------------------------------------


class Boincweb:
    def __init__(self, work, database_url=None, texts=True):
        """boincweb on ``database_url`` (None: a SQLite file under ``work``); ``texts``:
        compare the reply's message texts, not their priorities alone."""
        self.work, self.texts = work, texts
        self.database_url = setup_boincweb(work, database_url)

    def load(self, case):
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.db import transaction

        from backend import models as m

        User = get_user_model()
        for folder in (settings.UPLOAD_DIR, settings.DOWNLOAD_DIR):
            shutil.rmtree(folder, ignore_errors=True)
            Path(folder).mkdir(parents=True)
        with transaction.atomic():
            for model in (
                m.LifecycleEvent,
                m.AssimilatedResult,
                m.File,
                m.Result,
                m.Workunit,
                m.HostAppVersion,
                m.HostFile,
                m.Host,
                m.UserCredit,
                m.Team,
                m.LocalityTrigger,
                m.AppVersion,
                m.App,
            ):
                model.objects.all().delete()
            User.objects.all().delete()
            config = case["config"]
            app = m.App.objects.create(
                project=m.Project.demo(),
                id=1,
                name="uppercase",
                delete_delay=config["delete_delay"],
                create_time=case["now"],
                min_quorum=1,
                target_nresults=0 or 1,
                max_output_nbytes=10**7,
                locality_scheduling="locality" in case,
                **case["app"],
            )
            for name, nbytes in case.get("locality", {}).get("files", {}).items():
                m.File.objects.create(
                    project=m.Project.demo(), name=name, kind="input", nbytes=nbytes, sticky=True, report_on_rpc=True
                )
                # no more work can be made for it, as BOINC finds no trigger to set
                m.LocalityTrigger.objects.create(
                    project=m.Project.demo(), app=app, file_name=name, no_work_available=True
                )
            boincweb_versions(case, app)
            for t in case["teams"]:
                m.Team.objects.create(project=m.Project.demo(), id=t["id"], name=f"team{t['id']}")
            for u in case["users"]:
                user = User.objects.create(id=u["id"], username=f"user{u['id']}")
                m.UserCredit.objects.create(project=m.Project.demo(), user=user, team_id=u["teamid"] or None)
            for h in case["hosts"]:
                m.Host.objects.create(
                    project=m.Project.demo(),
                    id=h["id"],
                    owner_id=h["userid"],
                    domain_name=f"host{h['id']}",
                    p_ncpus=h["p_ncpus"],
                    p_fpops=h["p_fpops"],
                    on_frac=h["on_frac"],
                    active_frac=h["active_frac"],
                    m_nbytes=h["m_nbytes"],
                    os_name=h["os_name"],
                    total_credit=h["total_credit"],
                    expavg_credit=h["expavg_credit"],
                    expavg_time=h["expavg_time"],
                    avg_turnaround=h["avg_turnaround"],
                    rpc_seqno=4,
                    rpc_time=case["now"] - 3600,
                    platform=PLATFORM,
                )
            for hav in case["havs"]:
                m.HostAppVersion.objects.create(
                    project=m.Project.demo(),
                    host_id=hav["host_id"],
                    app_version_id=hav["app_version_id"],
                    max_jobs_per_day=hav["max_jobs_per_day"],
                    n_jobs_today=hav["n_jobs_today"],
                    jobs_day=(case["now"] - 3600) // DAY,
                    consecutive_valid=hav["consecutive_valid"],
                    et_n=hav.get("et_n", 0),
                    et_avg=hav.get("et_avg", 0),
                    pfc_n=hav.get("pfc_n", 0),
                    pfc_avg=hav.get("pfc_avg", 0),
                )
            for wu in case["wus"]:
                row = m.Workunit.objects.create(
                    project=m.Project.demo(),
                    id=wu["id"],
                    app=app,
                    name=wu["name"],
                    create_time=case["now"] - 5 * DAY,
                    **{
                        k: wu[k]
                        for k in (
                            "rsc_fpops_est",
                            "rsc_memory_bound",
                            "rsc_disk_bound",
                            "delay_bound",
                            "error_mask",
                            "file_delete_state",
                            "assimilate_state",
                            "hr_class",
                            "min_quorum",
                            "target_nresults",
                            "max_error_results",
                            "max_total_results",
                            "max_success_results",
                            "priority",
                            "transitioner_flags",
                            "transition_time",
                            "canonical_credit",
                        )
                    },
                    rsc_fpops_bound=wu["rsc_fpops_est"] * 10,
                    rsc_bandwidth_bound=wu.get("rsc_bandwidth_bound", 0.0),
                    need_validate=bool(wu["need_validate"]),
                    app_version_num=wu.get("app_version_num", 0),
                    app_version_id=wu["app_version_id"] or None,
                )
                if "input" in wu:
                    row.input_files.add(m.File.objects.get(name=wu["input"]))
                    continue
                infile = m.File.objects.create(project=m.Project.demo(), name=f"{wu['name']}.in", kind="input")
                row.input_files.add(infile)
                path = settings.DOWNLOAD_DIR / infile.name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"input\n")
            for r in case["results"]:
                result = m.Result.objects.create(
                    project=m.Project.demo(),
                    id=r["id"],
                    workunit_id=r["workunitid"],
                    app=app,
                    name=r["name"],
                    create_time=r["create_time"],
                    host_id=r["hostid"] or None,
                    user_id=r["userid"] or None,
                    app_version_id=r["app_version_id"] or None,
                    random=r["id"],
                    **{
                        k: r[k]
                        for k in (
                            "server_state",
                            "outcome",
                            "validate_state",
                            "file_delete_state",
                            "client_state",
                            "report_deadline",
                            "sent_time",
                            "received_time",
                            "exit_status",
                            "priority",
                            "granted_credit",
                        )
                    },
                )
                if r["output"] is not None:
                    import hashlib

                    name = result.output_file_name(0)
                    m.File.objects.create(
                        project=m.Project.demo(),
                        name=name,
                        kind="output",
                        result=result,
                        nbytes=len(r["output"]),
                        md5_cksum=hashlib.md5(r["output"]).hexdigest(),
                    )
                    path = settings.UPLOAD_DIR / name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(r["output"])
            for wu in case["wus"]:
                if wu["canonical_resultid"]:
                    m.Workunit.objects.filter(id=wu["id"]).update(canonical_result_id=wu["canonical_resultid"])
            load_credit_boincweb(case)
            reset_sequences()

    def config(self, case):
        from backend.daemons.sched_types import SchedulerConfig

        c = case["config"]
        return SchedulerConfig(
            report_grace_period=c["report_grace_period"],
            daily_result_quota=c["daily_result_quota"],
            max_wus_to_send=c["max_wus_to_send"],
            one_result_per_user_per_wu=c["one_result_per_user_per_wu"],
            resend_lost_results=c["resend_lost_results"],
            keep_due_workunits=False,
            version_select_random_factor=0.0,
            plan_class_spec=str(write_plan_classes(self.work)),
            hav_last_copy_wins=True,
            boinc_committed_never_reliable=True,  # docs/server-fidelity.md, BOINC defect 4
            default_disk_min_free_gb=c.get("default_disk_min_free_gb", 1.0),
            **credit_options(case),
            **boincweb_hr_and_limit_options(c),
            **boincweb_locality_options(case),
        )

    def run(self, step, case):
        from backend.daemons import get_daemon
        from backend.models import Project

        config = self.config(case)
        if step in SENDING:
            return self.schedule(case, config)
        from backend.daemons import DAEMON_OPTIONS

        options = {name: getattr(config, name) for name in DAEMON_OPTIONS.get(step, ())}
        get_daemon(step)(project=Project.demo(), now=case["now"], batch_size=1000, **options)
        return None

    def schedule(self, case, config):
        from backend.daemons.scheduler import SchedulerRequestError, handle_request
        from backend.models import Project
        from protocol.xml_request import parse_request

        parsed = parse_request(request_xml(case).encode())
        request = parsed.request
        request.userid = 1
        request.allow_beta_work = bool(case.get("version_options", {}).get("allow_beta_work"))
        try:
            reply = handle_request(request, project=Project.demo(), now=case["now"], config=config)
        except SchedulerRequestError as error:
            return {"error": error.reason}
        return dict(
            jobs=sorted([j.name, j.report_deadline] for j in reply.results),
            request_delay=float(reply.request_delay),
            messages=reply_messages(reply.messages, self.texts),
            acks=sorted(reply.result_acks),
            deletes=sorted(reply.delete_file_infos),
        )

    def snapshot(self):
        from backend import models as m

        def z(v):
            return 0 if v is None else v

        return {
            "workunit": {
                w.name: {
                    "need_validate": int(w.need_validate),
                    "canonical_resultid": z(w.canonical_result_id),
                    "canonical_credit": num(w.canonical_credit),
                    "transition_time": w.transition_time,
                    "error_mask": w.error_mask,
                    "file_delete_state": w.file_delete_state,
                    "assimilate_state": w.assimilate_state,
                    "hr_class": w.hr_class,
                    "target_nresults": w.target_nresults,
                    "app_version_id": z(w.app_version_id),
                }
                for w in m.Workunit.objects.all()
            },
            "result": {
                r.name: {
                    "server_state": r.server_state,
                    "outcome": r.outcome,
                    "validate_state": r.validate_state,
                    "file_delete_state": r.file_delete_state,
                    "hostid": z(r.host_id),
                    "userid": z(r.user_id),
                    "report_deadline": r.report_deadline,
                    "sent_time": r.sent_time,
                    "received_time": r.received_time,
                    "exit_status": r.exit_status,
                    "app_version_id": z(r.app_version_id),
                    "granted_credit": num(r.granted_credit),
                    "priority": r.priority,
                }
                for r in m.Result.objects.all()
            },
            "host": {h.id: {f: num(getattr(h, f)) for f in HOST_FIELDS} for h in m.Host.objects.all()},
            "user": {u.user_id: {f: num(getattr(u, f)) for f in CREDIT_FIELDS} for u in m.UserCredit.objects.all()},
            "team": {t.id: {f: num(getattr(t, f)) for f in CREDIT_FIELDS} for t in m.Team.objects.all()},
            "host_app_version": {
                f"{v.host_id}/{v.app_version_id}": {
                    "max_jobs_per_day": v.max_jobs_per_day,
                    "n_jobs_today": v.n_jobs_today,
                    "consecutive_valid": v.consecutive_valid,
                }
                for v in m.HostAppVersion.objects.all()
            },
        } | credit_snapshot_boincweb()

    def files(self):
        from django.conf import settings

        def names(folder):
            folder = Path(folder)
            return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []

        return {"upload": names(settings.UPLOAD_DIR), "download": names(settings.DOWNLOAD_DIR)}


def reset_sequences():
    """On PostgreSQL, move the tables' id sequences past the ids a case loaded, so that rows
    the step creates (a transitioner's new results, a first send's host app version) take
    new ids; SQLite's AUTOINCREMENT keeps up with explicit ids by itself."""
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.core.management.color import no_style
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    models = [*apps.get_app_config("backend").get_models(), get_user_model()]
    with connection.cursor() as cursor:
        for sql in connection.ops.sequence_reset_sql(no_style(), models):
            cursor.execute(sql)


# --- comparing ------------------------------------------------------------------------------

# What each step writes, and so what is compared after it.
COMPARED = {
    "transitioner": ("workunit", "result", "host_app_version"),
    "validator": ("workunit", "result", "host", "user", "team", "host_app_version", "app_version", "hav_pfc"),
    "assimilator": ("workunit", "result"),
    "file_deleter": ("workunit", "result", "files"),
    "scheduler": ("reply", "workunit", "result", "host_app_version"),
    "locality": ("reply", "workunit", "result", "host_app_version"),
}


def same_time(a, b, tolerance):
    """Whether two times (whole seconds) agree within ``tolerance`` seconds."""
    return isinstance(a, int) and isinstance(b, int) and abs(a - b) <= tolerance


def same_jobs(a, b, tolerance):
    """Whether two replies' jobs, sorted (name, report_deadline) pairs, are the same jobs
    with deadlines that agree within ``tolerance`` seconds."""
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
        return a == b
    return all(x[0] == y[0] and same_time(x[1], y[1], tolerance) for x, y in zip(a, b))


def differences(step, boinc, ours, time_tolerance=TIME_TOLERANCE):
    """Every (where, BOINC's value, boincweb's value) that differs, in a fixed order; the
    times of ``TIME_FIELDS`` and the reply's deadlines agree within ``time_tolerance``
    seconds."""
    found = []
    for table in COMPARED[step]:
        a, b = boinc.get(table, {}), ours.get(table, {})
        if table in ("reply", "files"):
            # the jobs first: the rest of a reply mostly follows from them
            for key in sorted(set(a) | set(b), key=lambda k: (k != "jobs", k)):
                if key == "jobs" and same_jobs(a.get(key), b.get(key), time_tolerance):
                    continue
                if a.get(key) != b.get(key):
                    found.append((f"{table}.{key}", a.get(key), b.get(key)))
            continue
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                found.append(
                    (f"{table}[{key}]", "present" if key in a else "absent", "present" if key in b else "absent")
                )
                continue
            for field, value in a[key].items():
                other = b[key].get(field)
                if isinstance(value, float) or isinstance(other, float):
                    # BOINC's credit averages read the clock with its fractions of a second
                    if abs((value or 0) - (other or 0)) <= 1e-4 * max(1.0, abs(value or 0)):
                        continue
                if field in TIME_FIELDS and same_time(value, other, time_tolerance):
                    continue
                if value != other:
                    found.append((f"{table}[{key}].{field}", value, other))
    return found


def crash_signal(returncode):
    """The signal that killed a program whose exit status was ``returncode`` (subprocess's
    negative status), or None when it exited by itself, successfully or not."""
    if returncode is not None and returncode < 0:
        return -returncode
    return None


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class Outcome:
    """One case of one step: "agree", "differ" (``diffs``: every difference) or "crash"
    (BOINC's program died on ``signal``; nothing compared)."""

    kind: str
    diffs: list = dataclasses.field(default_factory=list)
    signal: int | None = None


def outcome_of(diffs, returncode):
    """A case's Outcome from its differences and the exit status of BOINC's program."""
    number = crash_signal(returncode)
    if number is not None:
        return Outcome("crash", signal=number)
    return Outcome("differ", diffs) if diffs else Outcome("agree")


def tally(outcomes):
    """A step's figures: its cases, BOINC's crashes, the cases BOINC finished, how many of
    those agree and their share (%). A crash counts neither way."""
    crashes = sum(o.kind == "crash" for o in outcomes)
    finished = len(outcomes) - crashes
    agree = sum(o.kind == "agree" for o in outcomes)
    share = round(100.0 * agree / finished, 1) if finished else 0.0
    return dict(cases=len(outcomes), crashes=crashes, finished=finished, agree=agree, share=share)


def run_case(step, case, boinc, ours, out, time_tolerance=TIME_TOLERANCE):
    """Run one case of ``step`` on both sides; returns its Outcome, and keeps the case under
    ``out`` when it does not agree."""
    sql = boinc.load(case)
    ours.load(case)
    stdin = request_xml(case) if step in SENDING else None
    log = boinc.run(step, case["now"], stdin)
    ours_reply = ours.run(step, case)
    a, b = boinc.snapshot(), ours.snapshot()
    if step in SENDING:
        a["reply"], b["reply"] = parse_boinc_reply(log, ours.texts), ours_reply
    if step == "file_deleter":
        a["files"], b["files"] = boinc.files(), ours.files()
    diffs = differences(step, a, b, time_tolerance)
    if step in SENDING:
        case["versions_sent"] = versions_sent(case, a)
    outcome = outcome_of(diffs, boinc.returncode)
    if outcome.kind != "agree":
        folder = out / step / f"case{case['index']:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        if outcome.kind == "crash":
            (folder / "crash.txt").write_text(
                f"BOINC's {step} program died on {signal_name(outcome.signal)}; nothing compared\n"
            )
        (folder / "boinc.sql").write_text(sql)
        (folder / "case.json").write_text(json.dumps(case, default=repr, indent=1))
        if stdin:
            (folder / "request.xml").write_text(stdin)
        (folder / "boinc_output.txt").write_text(log)
        (folder / "boinc.json").write_text(json.dumps(a, indent=1, default=str))
        (folder / "boincweb.json").write_text(json.dumps(b, indent=1, default=str))
        (folder / "differences.txt").write_text("".join(f"{w}: BOINC {x!r}, boincweb {y!r}\n" for w, x, y in diffs))
        program = boinc.programs["scheduler" if step in SENDING else step]
        if step == "validator":
            program = f"{program} --app uppercase {' '.join(boinc.credit_args)}"
        for name in PROJECT_FILES:  # the case's own, which the next case overwrites
            kept = folder / name
            kept.unlink(missing_ok=True)
            if (boinc.project / name).exists():
                shutil.copy(boinc.project / name, kept)
        (folder / "rerun.sh").write_text(rerun_script(boinc, folder, step, program, case["now"]))
    return outcome


# The project's files a case writes (its options, job limits and plan classes).
PROJECT_FILES = ("config.xml", "config_aux.xml", "plan_class_spec.xml")


def rerun_script(boinc, folder, step, program, now):
    """The shell script that loads a kept case's rows into BOINC's database and runs BOINC's
    program on them at the case's clock, with the case's project files (``PROJECT_FILES``,
    kept beside it), as the harness did: libfaketime's absolute start
    time in the program's environment (the ``faketime`` command would read its argument
    with ``date -d``, which takes no ``@``); for a scheduler step the feeder first fills
    shared memory, and is stopped, and its segment removed, after the reply."""
    env = boinc.project_.env(now)
    clock = "env " + " ".join(f"{k}='{env[k]}'" for k in ("TZ", "FAKETIME", "FAKETIME_DONT_RESET", "LD_PRELOAD"))
    lines = ["set -e", f"mysql -h {boinc.db_host} -u root {boinc.db} < {folder / 'boinc.sql'}"]
    for name in PROJECT_FILES:
        if (folder / name).exists():
            lines.append(f"cp {folder / name} {boinc.project / name}")
        else:
            lines.append(f"rm -f {boinc.project / name}")
    lines.append(f"cd {boinc.project / 'cgi-bin'}")
    if step in SENDING:
        feeder = boinc.project_.programs["feeder"]
        lines += [
            f"rm -f {folder / 'feeder.log'}",  # not an earlier run's "sleeping"
            f"{clock} {feeder} --allapps --priority_order -d 4 > {folder / 'feeder.log'} 2>&1 &",
            "feeder=$!",
            # stopped however the scheduler ends (a crash too), and its segment removed
            f"trap 'kill $feeder; wait $feeder || true; ipcrm -M {boinc.project_.shmem_key} || true' EXIT",
            f"until grep -q sleeping {folder / 'feeder.log'}; do sleep 0.2; done",
            f"{clock} {program} < {folder / 'request.xml'}",
        ]
    else:
        lines.append(f"{clock} {program} --one_pass")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=300, help="random cases per step (default 300)")
    parser.add_argument("--seed", type=int, default=1, help="the seed the cases are drawn from (default 1)")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated case numbers (as printed, from 0) to run alone, to rerun a kept case; "
        "each is drawn as in a full run of the seed",
    )
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of: {', '.join(STEPS)}")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "var" / "server-differential",
        help="where the cases that differ or crash BOINC's program, and summary.json, are kept",
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        help="boincweb's database (default: $DATABASE_URL; unset: a SQLite file under --out); "
        "its boincweb tables are emptied for each case",
    )
    parser.add_argument(
        "--time-tolerance",
        type=int,
        default=TIME_TOLERANCE,
        help=f"seconds by which times BOINC writes may differ from boincweb's, as faketime lets BOINC's "
        f"clock run (default {TIME_TOLERANCE}; 0: exact)",
    )
    parser.add_argument(
        "--message-kinds-only",
        action="store_true",
        help="compare the reply's message priorities alone, not their texts",
    )
    args = parser.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = set(steps) - set(STEPS)
    if unknown or args.cases < 1:
        parser.error(f"unknown step {', '.join(sorted(unknown))}" if unknown else "--cases must be 1 or more")
    try:
        only = sorted({int(n) for n in args.only.split(",") if n.strip()})
    except ValueError:
        parser.error("--only takes case numbers, such as 3,100,214")
    if any(n < 0 for n in only):
        parser.error("--only takes case numbers from 0")
    if args.time_tolerance < 0:
        parser.error("--time-tolerance must be 0 or more")
    server = os.environ.get("BOINC_SERVER")
    if not server:
        print(HOWTO, file=sys.stderr)
        return 2
    server = Path(server)
    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    boinc = Boinc(
        server, os.environ.get("BOINC_DB", "boincweb_differential"), os.environ.get("BOINC_DB_HOST", "127.0.0.1"), out
    )
    ours = Boincweb(out, args.database_url, texts=not args.message_kinds_only)
    summary = {}
    started = time.time()
    for step in steps:
        outcomes, counted = [], []
        indices = only or range(args.cases)
        for index in indices:
            case = random_case(args.seed, index, step)
            outcome = run_case(step, case, boinc, ours, out, args.time_tolerance)
            outcomes.append(outcome)
            if outcome.kind != "crash":
                counted.append((case, outcome.kind == "agree"))
        summary[step] = tally(outcomes)
        if step in SENDING:
            summary[step]["versions"] = version_counts(counted)
        figures = summary[step]
        crashed = f", {figures['crashes']} more where BOINC's program crashed" if figures["crashes"] else ""
        print(f"{step:13s} {figures['agree']:4d}/{figures['finished']} agree ({figures['share']:.1f} %){crashed}")
        if step in SENDING:
            print("    app versions: " + ", ".join(f"{k} {v}" for k, v in summary[step]["versions"].items()))
        for index, outcome in zip(indices, outcomes):
            if outcome.kind == "crash":
                print(f"    case {index:4d}: BOINC's program died on {signal_name(outcome.signal)} (not counted)")
            elif outcome.kind == "differ":
                where, a, b = outcome.diffs[0]
                print(f"    case {index:4d}: {where}: BOINC {a!r}, boincweb {b!r}")
        sys.stdout.flush()
    (out / "summary.json").write_text(
        json.dumps(
            dict(
                seed=args.seed,
                cases=list(only) if only else args.cases,
                database=ours.database_url.split(":", 1)[0],
                time_tolerance=args.time_tolerance,
                message_texts=not args.message_kinds_only,
                steps=summary,
                seconds=round(time.time() - started, 1),
            ),
            indent=1,
        )
    )
    print(f"kept cases and summary.json under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
