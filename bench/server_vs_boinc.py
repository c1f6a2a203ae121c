"""boincweb's server pipeline against BOINC's own, on the same machine in one run.

    BOINC_SERVER=/path/to/boinc DATABASE_URL=postgres://... python bench/server_vs_boinc.py \\
        --workunits 10000

The same N quorum-2 workunits go through both servers, create -> send -> report -> validate ->
assimilate -> delete:

- **BOINC** (its programs as built under ``BOINC_SERVER``, on MariaDB database ``BOINC_DB``,
  default ``boincweb_vs_boinc``, emptied and refilled): the input files are staged in the
  download directory and ``tools/create_work --stdin`` makes the workunits in one run (its
  multi-row INSERT); ``sched/transitioner --one_pass`` makes the results; ``sched/feeder``
  runs in the background while the simulated hosts send their requests to ``sched/cgi`` (one
  process per request, as a CGI scheduler runs); each output is uploaded to
  ``file_upload_handler`` (one process per upload, as a CGI, without faketime: its clock does
  not matter) before the request that reports it, into the flat upload directory
  (uldl_dir_fanout 0); then rounds of ``transitioner``,
  ``sample_bitwise_validator --credit_from_wu``, ``sample_dummy_assimilator`` (the sample
  assimilator this tree builds), ``transitioner`` and ``file_deleter``, each with
  ``--one_pass``, run again while rows wait for it (``Boinc.daemon`` says why a pass may
  leave some).
- **boincweb** (on ``DATABASE_URL``; a SQLite file of the bench's own when unset, which it
  says): one ``work_generator.create_work`` for the batch, with the input files (BOINC's
  ``create_work --stdin`` takes the batch in one run too); the daemons' passes
  (``run_once`` until one finds nothing); the same requests, as bytes, through
  ``protocol.scheduler_rpc`` (what the scheduler endpoint runs: parse, handle_request, the
  XML reply); the same uploads through ``protocol.uploads.handle`` (what the upload endpoint
  runs: the result looked up, the name locked, a part file written and renamed) before the
  request that reports them.

The upload stage runs each server's file upload handler on the same request bodies (the
client's ``<data_server_request>`` with the output's ``<file_info>`` and upload certificate
from its reply, then the bytes). It used to write the outputs with the same Python call on
both sides, bypassing both handlers: it measured neither server, and its fourfold difference
(0.25 s for BOINC, 1.07 s for boincweb at 1,000 workunits) was the machine, not the code. The
path lookup (``upload_path``) took 6-12 us a file, the same directory tree held both sides'
files, and nothing was made or synced per call, while creating a 1 KB file cost 0.05 ms of
system time in one minute and 0.6 ms a few minutes later on the same idle directory (other
jobs on the machine), which favours whichever side writes at the quieter moment. So the bench
was unfair, not boincweb's handler; that handler was slow too, though (an ORM query built
afresh for each upload, most of its time), and now asks one statement written once. Most of
BOINC's upload time is starting a process per upload, as for its scheduler's requests (a
FastCGI build would not pay it); so the summary also gives the ratio of the two rates with
the upload stage left out of both sides' time.

Before each side's pipeline the file system's pending writes are flushed, the other system's
database writes out its dirty pages (PostgreSQL checkpoints before BOINC's side, MariaDB
flushes BOINC's tables before boincweb's) and the bench waits SETTLE_SECONDS (``settle``), so
that a side does not start while the set-up's or the other side's writes drain; and each
side's directories are in block groups of their own (``spread_directories``), so that the
files one side deletes do not slow the files the other creates.

Both read the same config.xml (the project's options: jobs per request, one result per user
per workunit, the daily quota, the job cache size); the same hosts (``--hosts`` of
``--cpus`` CPUs, each its own volunteer) send the same requests in turn: each reports the
jobs its previous request got, with their outputs, and asks for a day of work per CPU, until
every result is reported. Each server's clock is the wall clock plus one second per stage, so
that a daemon always sees what the stage before wrote as due (``faketime`` offsets for BOINC's
programs; ``now`` for boincweb's).

Printed, for each system: the wall-clock time of the whole pipeline, results per second
(2N / that time), the time of each stage, requests made, and that every workunit was
assimilated and every file deleted; and the ratio of the two rates. ``--out`` keeps a
summary.json. Without ``BOINC_SERVER`` it says how to get one and exits 2.
"""

import argparse
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from boinc_server import (  # noqa: E402
    APP,
    PLATFORM,
    ROOT,
    Project,
    app_version_xml,
    file_infos,
    howto,
    insert,
    parse_reply,
    scheduler_request_xml,
    setup_boincweb,
    upload_request,
    upload_status,
)

DAY = 86400
# create_work's parameters, the same on both sides (a quorum of two, as issue 18 says)
WORK = dict(
    min_quorum=2,
    target_nresults=2,
    max_error_results=2,
    max_total_results=4,
    max_success_results=2,
    delay_bound=7 * DAY,
    rsc_fpops_est=1e12,
    rsc_fpops_bound=1e13,
    rsc_memory_bound=1e8,
    rsc_disk_bound=1e9,
)
VERSION_NUM = 100
# the outputs' size limit, as BOINC's result template here says (bench/boinc_server.py)
OUTPUT_MAX_NBYTES = 10_000_000
# the daemons' order in one round after the reports
ROUND = ("transitioner", "validator", "assimilator", "transitioner", "file_deleter")
STAGES = (
    "create",
    "first_results",
    "feeder",
    "scheduler",
    "upload",
    "validator",
    "assimilator",
    "transitioner",
    "file_deleter",
    "checks",
)
MAX_ROUNDS = 5
# The feeder refills its cache a second after a scan found it full (its shortest interval; 5 s
# by default), in the database's order of unsent results
FEEDER_ARGS = ("--sleep_interval", "1")
# a BOINC request that got nothing while jobs remain waits this long for the feeder
FEEDER_WAIT = 0.2
MAX_EMPTY_ROUNDS = 50


def output_data(wu_name):
    """What both replicas of a workunit upload: equal, so the bitwise comparison validates."""
    return (wu_name.upper() + "\n").encode() * 16


def host_info(cpus):
    return dict(p_ncpus=cpus, p_fpops=1e10, m_nbytes=16e9, on_frac=1.0, active_frac=1.0)


class Stages:
    """Seconds per stage, summed."""

    def __init__(self):
        self.seconds = defaultdict(float)

    @contextmanager
    def __call__(self, name):
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - began


# --- BOINC ----------------------------------------------------------------------------------


class Boinc:
    name = "BOINC"

    def __init__(self, server, db, db_host, work, options, hosts, cpus):
        self.project = Project(
            server,
            db,
            db_host,
            work,
            (
                "transitioner",
                "validator",
                "assimilator",
                "file_deleter",
                "scheduler",
                "feeder",
                "create_work",
                "file_upload_handler",
            ),
        )
        self.project.write_config(options)
        self.offset = 0
        self.analyzed = False
        now = int(time.time())
        rows = [
            insert("platform", dict(id=1, create_time=now, name=PLATFORM, user_friendly_name="Linux")),
            insert("app", dict(id=1, create_time=now, name=APP, user_friendly_name=APP)),
            insert(
                "app_version",
                dict(
                    id=1,
                    create_time=now,
                    appid=1,
                    version_num=VERSION_NUM,
                    platformid=1,
                    xml_doc=app_version_xml(VERSION_NUM),
                ),
            ),
        ]
        self.hosts = []
        for i in range(1, hosts + 1):
            auth = f"bench{i:08d}"
            rows.append(
                insert(
                    "user",
                    dict(
                        id=i,
                        create_time=now,
                        email_addr=f"u{i}@example.org",
                        name=f"volunteer{i}",
                        authenticator=auth,
                        teamid=0,
                        total_credit=0,
                        expavg_credit=0,
                        expavg_time=0,
                        venue="",
                        cross_project_id="x",
                        passwd_hash="x",
                    ),
                )
            )
            rows.append(
                insert(
                    "host",
                    dict(
                        id=i,
                        create_time=now - 30 * DAY,
                        userid=i,
                        rpc_seqno=4,
                        rpc_time=now - 3600,
                        total_credit=0,
                        expavg_credit=0,
                        expavg_time=0,
                        domain_name=f"host{i}",
                        host_cpid=f"cpid{i}",
                        on_frac=1,
                        connected_frac=1,
                        active_frac=1,
                        gpu_active_frac=1,
                        p_ncpus=cpus,
                        p_fpops=1e10,
                        p_iops=1e9,
                        m_nbytes=16e9,
                        d_total=1e12,
                        d_free=5e11,
                        avg_turnaround=0,
                        venue="",
                        product_name="",
                        os_name="Linux",
                        os_version="6.1",
                        misc="",
                    ),
                )
            )
            self.hosts.append((i, auth))
        self.project.execute(rows)
        self.feeder = None

    @property
    def config_xml(self):
        return self.project.project / "config.xml"

    def tick(self):
        self.offset += 1

    @property
    def clock(self):
        return f"+{self.offset}"

    def create(self, names, inputs):
        for name, data in zip(names, inputs):
            (self.project.download_dir / f"{name}.in").write_bytes(data)
        args = ["--appname", APP, "--wu_template", "templates/in", "--result_template", "templates/out", "--stdin"]
        for key, value in WORK.items():
            args += [f"--{key}", str(int(value) if key == "delay_bound" else value)]
        lines = "".join(f"--wu_name {name} {name}.in\n" for name in names)
        out = self.project.run("create_work", *args, clock=self.clock, stdin=lines.encode(), cwd=self.project.project)
        made = self.count("SELECT COUNT(*) FROM workunit")
        if made != len(names):
            raise SystemExit(f"BOINC's create_work made {made} of {len(names)} workunits:\n{out[-2000:]}")

    def count(self, sql):
        return self.project.query(sql)[0][0]

    def left(self, step):
        """How many rows still wait for ``step``'s daemon at the stage's clock."""
        if step == "transitioner":
            return self.count(f"SELECT COUNT(*) FROM workunit WHERE transition_time < UNIX_TIMESTAMP() + {self.offset}")
        if step == "validator":
            return self.count("SELECT COUNT(*) FROM workunit WHERE need_validate = 1")
        if step == "assimilator":
            return self.count("SELECT COUNT(*) FROM workunit WHERE assimilate_state = 1")
        return self.count(
            "SELECT (SELECT COUNT(*) FROM result WHERE file_delete_state = 1)"
            " + (SELECT COUNT(*) FROM workunit WHERE file_delete_state = 1)"
        )

    def daemon(self, step):
        """Passes of ``step``'s daemon while rows wait for it. A pass may leave some: the
        assimilator's takes at most 1,000 workunits, the file deleter's 1,500 results and 500
        workunits, and the transitioner's enumeration, in batches of 1,000 rows, keeps the
        last workunit of a full batch for its next pass."""
        out = self.project.daemon(step, clock=self.clock)
        left = self.left(step)
        while left:
            out = self.project.daemon(step, clock=self.clock)
            now_left = self.left(step)
            if now_left >= left:
                raise SystemExit(f"BOINC's {step} made no progress ({left} left):\n{out[-2000:]}")
            left = now_left
        if step == "transitioner" and not self.analyzed:
            # MariaDB's statistics, as its background recalculation soon would: planned for
            # tables still empty, the feeder's first query joins 20,000 unsent results to
            # every workunit and runs for minutes (boincweb's tables are analyzed alike)
            self.project.query("ANALYZE TABLE workunit, result")
            self.analyzed = True
        return out

    def start_scheduling(self):
        self._feeder = self.project.feeder(clock=self.clock, args=FEEDER_ARGS)
        self._feeder.__enter__()

    def stop_scheduling(self):
        self._feeder.__exit__(None, None, None)

    def request(self, index, body):
        return self.project.schedule(body, clock=self.clock)

    def upload(self, name, data, file_info):
        # its clock does not matter to the handler, so it runs without faketime
        reply = self.project.run("file_upload_handler", stdin=upload_request(name, data, **file_info))
        if upload_status(reply) != 0:
            raise SystemExit(f"BOINC's file_upload_handler refused {name}:\n{reply[-2000:]}")

    def nothing_sent(self):
        time.sleep(FEEDER_WAIT)  # the feeder refills its cache between its scans

    def state(self):
        q = self.count
        return dict(
            workunits=q("SELECT COUNT(*) FROM workunit"),
            results=q("SELECT COUNT(*) FROM result"),
            valid=q("SELECT COUNT(*) FROM result WHERE validate_state = 1"),
            assimilated=q("SELECT COUNT(*) FROM workunit WHERE assimilate_state = 2"),
            workunit_files_deleted=q("SELECT COUNT(*) FROM workunit WHERE file_delete_state = 2"),
            result_files_deleted=q("SELECT COUNT(*) FROM result WHERE file_delete_state = 2"),
            files_left=sum(1 for d in (self.project.upload_dir, self.project.download_dir) for _ in d.iterdir()),
        )

    def close(self):
        pass


# --- boincweb -------------------------------------------------------------------------------


class Boincweb:
    name = "boincweb"

    def __init__(self, config_xml, hosts, cpus):
        from django.conf import settings
        from django.contrib.auth import get_user_model

        from backend.models import App, AppVersion, Host, Project
        from backend.server_config import read_config_xml
        from protocol.models import Account, AppVersionFile

        # BOINC's validator runs with --credit_from_wu (bench/boinc_server.py), so ours does
        # the same credit work rather than CreditNew, its default
        self.config = read_config_xml(Path(config_xml), credit_from_wu=True)
        self.analyzed = False
        self.demo = Project.demo()
        for folder in (settings.UPLOAD_DIR, settings.DOWNLOAD_DIR):
            Path(folder).mkdir(parents=True, exist_ok=True)
        self.offset = 0
        stem = f"vs_boinc_{time.time_ns()}"
        self.app = App.objects.create(
            project=self.demo,
            name=stem,
            min_quorum=WORK["min_quorum"],
            target_nresults=WORK["target_nresults"],
            max_error_results=WORK["max_error_results"],
            max_total_results=WORK["max_total_results"],
            max_success_results=WORK["max_success_results"],
            delay_bound=WORK["delay_bound"],
            rsc_fpops_est=WORK["rsc_fpops_est"],
            rsc_fpops_bound=WORK["rsc_fpops_bound"],
            unsent_target=0,
        )
        version = AppVersion.objects.create(project=self.demo, app=self.app, version_num=VERSION_NUM, platform=PLATFORM)
        AppVersionFile.objects.create(
            project=self.demo,
            app_version=version,
            name=f"{stem}_{VERSION_NUM}",
            nbytes=10,
            md5_cksum="0" * 32,
            file_signature="x",
        )
        self.hosts = []
        for i in range(1, hosts + 1):
            user, _ = get_user_model().objects.get_or_create(username=f"vs_boinc_volunteer_{i}")
            account = Account.for_user(user, self.demo)
            host, _ = Host.objects.get_or_create(
                project=self.demo,
                owner=user,
                domain_name=f"vs_boinc_host{i}",
                defaults={"p_ncpus": cpus, "platform": PLATFORM},
            )
            self.hosts.append((host.pk, account.authenticator))

    def tick(self):
        self.offset += 1

    @property
    def now(self):
        return int(time.time()) + self.offset

    def create(self, names, inputs):
        from backend.daemons import work_generator

        data = dict(zip(names, inputs))
        extra = {k: WORK[k] for k in ("rsc_memory_bound", "rsc_disk_bound")}
        # one call for the batch, as BOINC's create_work --stdin takes it in one run (and
        # writes it in multi-row INSERTs of up to 1 MB each, create_work.cpp)
        work_generator.create_work(self.app, names, now=self.now, inputs=data.__getitem__, **extra)

    def daemon(self, step):
        from backend.daemons import DAEMON_OPTIONS, get_daemon

        run_once = get_daemon(step)
        options = {name: getattr(self.config, name) for name in DAEMON_OPTIONS.get(step, ())}
        while run_once(project=self.demo, now=self.now, batch_size=1000, **options):
            pass
        if step == "transitioner" and not self.analyzed:
            from backend.management.commands.bench_backend import refresh_statistics

            # as autovacuum soon would on a running project: the scheduler's plans see the
            # new results (PostgreSQL only)
            refresh_statistics()
            self.analyzed = True

    def start_scheduling(self):
        pass

    def stop_scheduling(self):
        pass

    def request(self, index, body):
        from protocol.scheduler_rpc import scheduler_rpc

        _, reply = scheduler_rpc(
            body.encode(), project=self.demo, now=self.now, base_url="http://localhost/p/", config=self.config
        )
        return reply.decode() if isinstance(reply, bytes) else reply

    def upload(self, name, data, file_info):
        from protocol.uploads import handle

        reply = handle(self.demo, io.BytesIO(upload_request(name, data, **file_info))).decode()
        if upload_status(reply) != 0:
            raise SystemExit(f"boincweb's file upload handler refused {name}:\n{reply[-2000:]}")

    def nothing_sent(self):
        raise SystemExit("boincweb's scheduler sent nothing while results were unsent")

    def state(self):
        from django.conf import settings

        from backend.models import (
            AssimilateState,
            FileDeleteState,
            Result,
            ValidateState,
            Workunit,
        )

        wus = Workunit.objects.filter(app=self.app)
        results = Result.objects.filter(app=self.app)
        return dict(
            workunits=wus.count(),
            results=results.count(),
            valid=results.filter(validate_state=ValidateState.VALID).count(),
            assimilated=wus.filter(assimilate_state=AssimilateState.DONE).count(),
            workunit_files_deleted=wus.filter(file_delete_state=FileDeleteState.DONE).count(),
            result_files_deleted=results.filter(file_delete_state=FileDeleteState.DONE).count(),
            files_left=sum(
                1
                for d in (settings.UPLOAD_DIR, settings.DOWNLOAD_DIR)
                if Path(d).is_dir()
                for p in Path(d).iterdir()
                if not p.name.startswith(".")
            ),
        )

    def close(self):
        from backend.management.commands.bench_backend import remove
        from protocol.models import AppVersionFile

        AppVersionFile.objects.filter(app_version__app=self.app).delete()
        remove(self.app)


# --- the pipeline ---------------------------------------------------------------------------


def pipeline(side, n, cpus, prefix):
    """Drive ``n`` workunits through ``side``; returns its figures."""
    from backend.daemons.work_generator import input_data

    stages = Stages()
    names = [f"{prefix}_{i}" for i in range(n)]
    inputs = [input_data(name) for name in names]
    host = host_info(cpus)
    began = time.perf_counter()
    with stages("create"):
        side.create(names, inputs)
    side.tick()
    with stages("first_results"):  # the transitioner's first pass
        side.daemon("transitioner")
    side.tick()
    with stages("feeder"):
        side.start_scheduling()
    pending = {i: [] for i in range(len(side.hosts))}
    seqno = defaultdict(lambda: 5)
    reported = requests = sent = empty_rounds = 0
    try:
        while reported < 2 * n:
            got = 0
            for i, (hostid, auth) in enumerate(side.hosts):
                reports = []
                with stages("upload"):
                    for job in pending[i]:
                        data = output_data(job["wu_name"])
                        side.upload(job["outputs"][0], data, job["file_info"])
                        reports.append(
                            dict(
                                name=job["name"],
                                state=5,
                                exit_status=0,
                                files=[(job["outputs"][0], len(data), hashlib.md5(data).hexdigest())],
                            )
                        )
                body = scheduler_request_xml(
                    authenticator=auth,
                    hostid=hostid,
                    req_secs=float(cpus * DAY),
                    req_instances=float(cpus),
                    estimated_delay=0.0,
                    host=host,
                    reports=reports,
                    rpc_seqno=seqno[i],
                )
                seqno[i] += 1
                with stages("scheduler"):
                    text = side.request(i, body)
                requests += 1
                reply = parse_reply(text)
                if "error" in reply:
                    raise SystemExit(f"{side.name}'s scheduler: {reply['error']}")
                missing = {r["name"] for r in reports} - set(reply["acks"])
                if missing:
                    raise SystemExit(f"{side.name}'s scheduler did not ack {sorted(missing)[:3]}")
                reported += len(reports)
                infos = file_infos(text)
                for job in reply["jobs"]:
                    job["file_info"] = infos.get(
                        job["outputs"][0], dict(max_nbytes=OUTPUT_MAX_NBYTES, xml_signature="")
                    )
                pending[i] = reply["jobs"]
                got += len(reply["jobs"])
                sent += len(reply["jobs"])
            if not got and not any(pending.values()) and reported < 2 * n:
                empty_rounds += 1
                if empty_rounds > MAX_EMPTY_ROUNDS:
                    raise SystemExit(f"{side.name}: {reported} of {2 * n} results reported, and no more are sent")
                with stages("scheduler"):
                    side.nothing_sent()
    finally:
        with stages("feeder"):
            side.stop_scheduling()
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        for step in ROUND:
            side.tick()
            with stages(step):
                side.daemon(step)
        with stages("checks"):
            state = side.state()
        if (
            state["assimilated"] == n
            and state["workunit_files_deleted"] == n
            and state["result_files_deleted"] == 2 * n
        ):
            break
    seconds = time.perf_counter() - began
    complete = (
        state["assimilated"] == n
        and state["valid"] == 2 * n
        and state["result_files_deleted"] == 2 * n
        and state["workunit_files_deleted"] == n
        and state["files_left"] == 0
    )
    return dict(
        seconds=round(seconds, 2),
        results=2 * n,
        results_per_second=round(2 * n / seconds, 1),
        stages={k: round(stages.seconds[k], 2) for k in STAGES if k in stages.seconds},
        requests=requests,
        jobs_sent=sent,
        daemon_rounds=rounds,
        state=state,
        complete=complete,
    )


# after the settling writes, a pause before each side (``settle``)
SETTLE_SECONDS = 5.0


def settle(side, boinc):
    """Before each side's pipeline, the same settling: the file system's pending writes
    flushed (``sync``); the other system's database's dirty pages written out (before BOINC's
    side a CHECKPOINT of boincweb's PostgreSQL, before boincweb's a FLUSH TABLES ... FOR
    EXPORT of the tables BOINC's pipeline writes, InnoDB's way of writing a table's pages
    now, then UNLOCK TABLES); ``sync`` again; and a pause of SETTLE_SECONDS, so that neither
    side starts while the disk still writes back the set-up's or the other side's files and
    pages.

    Not the side's own database: after a checkpoint PostgreSQL writes each page's first change
    whole to its log, which cost boincweb's first stage (creating 1,000 workunits) about 0.2 s
    in four runs out of four.

    The pause and MariaDB's flush are new. Before them boincweb's side started as soon as
    ``sync`` returned (0-0.15 s) while BOINC's waited for the checkpoint and a second ``sync``
    (0.1-1.0 s), so with boincweb first its create stage began while MariaDB was still busy
    with the BOINC database the set-up had just dropped and made again: 1.12 and 1.02 s in two
    runs at 1,000 workunits, 0.6 s of the second waiting for its input files, which take
    0.05 s to create on a quiet disk (what else made the files slow: ``spread_directories``)."""
    from django.db import connection

    os.sync()
    if side.name == "BOINC":
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("CHECKPOINT")
    else:
        boinc.project.query("FLUSH TABLES workunit, result FOR EXPORT")
        boinc.project.query("UNLOCK TABLES")
    os.sync()
    time.sleep(SETTLE_SECONDS)


def spread_directories(folder):
    """Mark ``folder`` as the top of a directory hierarchy (``chattr +T``), so that ext4 puts
    each directory made in it (each side's download and upload directories) in a block group
    of its own, as it does the file system's top directories, rather than in its parent's.

    Otherwise both sides' files share one block group, and ext4 on a file system without a
    journal (this machine's) passes over each inode freed a short while before when it
    allocates one (``recently_deleted``, half of the system time under ``perf``; still so a
    minute after): the side that ran second created its 1,000 input files in 0.6-1.0 s in the
    five runs where they were timed, right after the first side's file deleter had freed
    3,000 inodes in the group, against 0.05-0.16 s otherwise; so the create stage went mostly
    to whichever side ran first. Freeing 3,000 inodes in one directory and creating 1,000
    files in a second took 0.76-1.33 s without the flag and 0.10-0.11 s with it. Where the
    flag cannot be set (another file system, no ``chattr``) the bench says so and goes on."""
    try:
        done = subprocess.run(["chattr", "+T", str(folder)], capture_output=True, text=True)
    except OSError as error:
        print(f"could not mark {folder} as a top directory: {error}", file=sys.stderr)
        return
    if done.returncode:
        print(f"could not mark {folder} as a top directory: {done.stderr.strip()}", file=sys.stderr)


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def report(figures, n, database):
    b, w = figures["BOINC"], figures["boincweb"]
    print(f"{n} workunits, quorum 2 ({2 * n} results); boincweb on {database}")
    print(f"{'stage':14s} {'BOINC s':>9s} {'boincweb s':>11s}")
    for stage in STAGES:
        if stage in b["stages"] or stage in w["stages"]:
            print(f"{stage:14s} {b['stages'].get(stage, 0):9.2f} {w['stages'].get(stage, 0):11.2f}")
    print(f"{'whole (wall)':14s} {b['seconds']:9.2f} {w['seconds']:11.2f}")
    print(f"{'results/s':14s} {b['results_per_second']:9.1f} {w['results_per_second']:11.1f}")
    print(f"{'requests':14s} {b['requests']:9d} {w['requests']:11d}")
    print(f"{'complete':14s} {str(b['complete']):>9s} {str(w['complete']):>11s}")
    print(f"ratio boincweb / BOINC: {figures['ratio']:.2f}x results per second")
    print(f"ratio without the upload stage on either side: {figures['ratio_without_upload']:.2f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workunits", type=int, default=10000)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--cpus", type=int, default=16, help="CPUs of each simulated host")
    parser.add_argument(
        "--max-wus-to-send", type=int, default=10, help="config.xml max_wus_to_send: jobs per request and CPU"
    )
    parser.add_argument(
        "--shmem-work-items", type=int, default=1000, help="config.xml shmem_work_items: BOINC's job cache"
    )
    parser.add_argument(
        "--daily-result-quota",
        type=int,
        default=10000,
        help="config.xml daily_result_quota, jobs per CPU and day (BOINC's "
        "scheduler reads 0 as a quota of 0 jobs once a host has any)",
    )
    parser.add_argument("--first", choices=("boinc", "boincweb"), default="boinc", help="which system runs first")
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "server-vs-boinc")
    args = parser.parse_args(argv)
    if args.workunits < 1 or args.hosts < 2 or args.cpus < 1:
        parser.error(
            "--workunits and --cpus must be 1 or more, --hosts 2 or more (a quorum of two needs two volunteers)"
        )
    server = os.environ.get("BOINC_SERVER")
    if not server:
        print(howto("bench/server_vs_boinc.py --workunits 10000"), file=sys.stderr)
        return 2
    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    spread_directories(out)
    database_url = os.environ.get("DATABASE_URL") or None
    if database_url is None:
        print(
            "DATABASE_URL is not set: boincweb runs on a SQLite file of its own "
            f"({out / 'boincweb.sqlite3'}); its target is set for PostgreSQL"
        )
    setup_boincweb(out, database_url)
    from django.db import connection

    database = connection.vendor
    options = {
        "max_wus_to_send": args.max_wus_to_send,
        "shmem_work_items": args.shmem_work_items,
        # the feeder's enumeration: twice the cache, as its default is
        "feeder_query_size": 2 * args.shmem_work_items,
        "daily_result_quota": args.daily_result_quota,
        "one_result_per_user_per_wu": 1,
    }
    boinc = Boinc(
        Path(server),
        os.environ.get("BOINC_DB", "boincweb_vs_boinc"),
        os.environ.get("BOINC_DB_HOST", "127.0.0.1"),
        out,
        options,
        args.hosts,
        args.cpus,
    )
    ours = Boincweb(boinc.config_xml, args.hosts, args.cpus)
    load_before = uptime()
    figures = {}
    order = [boinc, ours] if args.first == "boinc" else [ours, boinc]
    try:
        for side in order:
            settle(side, boinc)
            figures[side.name] = pipeline(side, args.workunits, args.cpus, f"vs{time.time_ns() % 10**9}")
            print(f"{side.name}: {figures[side.name]['seconds']} s", flush=True)
    finally:
        ours.close()
    figures["ratio"] = round(figures["boincweb"]["results_per_second"] / figures["BOINC"]["results_per_second"], 2)
    figures["ratio_without_upload"] = round(
        (figures["BOINC"]["seconds"] - figures["BOINC"]["stages"].get("upload", 0))
        / (figures["boincweb"]["seconds"] - figures["boincweb"]["stages"].get("upload", 0)),
        2,
    )
    summary = dict(
        workunits=args.workunits,
        hosts=args.hosts,
        cpus=args.cpus,
        config=options,
        database=database,
        first=args.first,
        uptime_before=load_before,
        uptime_after=uptime(),
        machine=f"{platform.node()} {os.cpu_count()} CPUs",
        **figures,
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    report(figures, args.workunits, database)
    print(f"uptime before: {load_before}\nuptime after:  {summary['uptime_after']}")
    if not (figures["BOINC"]["complete"] and figures["boincweb"]["complete"]):
        print("not every workunit went through the whole pipeline: see summary.json")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
