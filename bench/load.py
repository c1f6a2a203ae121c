"""Concurrent clients against the production server: the status page, the workunit list and a
workunit page (target: p95 < 300 ms for each with 20 clients on 2 cores, 1 M workunits on
PostgreSQL).

    DATABASE_URL=postgres://.../boincweb_load REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/load.py --fill [--workunits 1000000] [--clients 20] [--seconds 60] [--json]

``--fill`` first tops the database up to ``--workunits`` workunits of the app ``load_app`` with
their results and lifecycle events, in the states of a project that has run for a month (most
workunits assimilated and their files deleted, the newest in progress or unsent, some waiting for
validation, assimilation or file deletion, one in 50 with a client error and a third result),
one ``INSERT ... SELECT generate_series`` per 50,000 workunits that writes the workunits, their
results and their events at once; a database that already holds them is left as it is.

Then it serves the database as docs/deploy.md does (``collectstatic``, then
gunicorn with ``DEBUG`` off and whitenoise, ``--server-workers`` processes on a free port), or
uses ``--url`` of a server already running, and runs ``--clients`` clients (aiohttp, one
connection each) for ``--seconds``: each client fetches, in turn, the status page, the workunit
list (its first page, or the page after a random workunit) and the page of a random workunit,
as fast as the answers come. It prints, per page, the requests per second and the 50th, 95th and
99th percentiles of the response time, with ``uptime``'s load average before and after.

Without ``DATABASE_URL`` (``make bench``) it runs a small version on a SQLite file of its own:
5,000 workunits, 5 clients, 10 s.
"""

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")

SMALL = {"workunits": 5_000, "clients": 5, "seconds": 10}
LOAD_APP = "load_app"
CHUNK = 50_000
MONTH = 30 * 86400

# The in-flight workunits, newest first (the rest are finished): per million workunits.
IN_FLIGHT = [  # (state code, workunits per million)
    (5, 2_000),  # unsent: both results waiting for a host
    (4, 20_000),  # in progress: both results sent
    (3, 500),  # waiting for validation
    (2, 300),  # waiting for assimilation
    (1, 1_000),  # waiting for file deletion
]
DONE = 0

PAGES = ["status", "workunit list", "workunit"]
PAGE_NAMES = {"status": "status", "list": "workunit list", "workunit": "workunit"}


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def percentile(values, q):
    """The ``q`` percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


# --- filling the database -----------------------------------------------------------------------


def state_bounds(total):
    """[(state code, first index of that state)] for workunits 0 .. total-1, newest last."""
    bounds, start = [], total
    for code, per_million in IN_FLIGHT:
        start = max(0, start - max(1, round(per_million * total / 1_000_000)))
        bounds.append((code, start))
    return bounds


def fill(total, *, out=print):
    """Top the database up to ``total`` workunits of LOAD_APP (see the module docstring);
    returns the number added."""
    from django.contrib.auth import get_user_model
    from django.db import DatabaseError, connection, transaction

    from backend.management.commands.seed_demo import columns_of
    from backend.models import App, AppVersion, GpuType, Host, LifecycleEvent, Project, Result, Workunit

    if connection.vendor != "postgresql":
        # make bench's small run: seed_demo's workunits, every one unsent
        from django.core.management import call_command

        call_command("seed_demo", workunits=total, hosts=20, stdout=open(os.devnull, "w"))
        return total
    have = Workunit.objects.filter(app__name=LOAD_APP).count()
    if have >= total:
        out(f"fill: the database already holds {have:,} workunits of {LOAD_APP}; nothing added")
        return 0
    now = int(time.time())
    app, _ = App.objects.get_or_create(project=Project.demo(), name=LOAD_APP, defaults={"create_time": now - MONTH})
    cpu, _ = AppVersion.objects.get_or_create(
        project=Project.demo(), app=app, version_num=100, plan_class="", defaults={"create_time": now - MONTH}
    )
    gpu, _ = AppVersion.objects.get_or_create(
        project=Project.demo(),
        app=app,
        version_num=100,
        plan_class="cuda",
        defaults={
            "create_time": now - MONTH,
            "flops": 20e9,
            "avg_ncpus": 0.5,
            "gpu_type": GpuType.NVIDIA,
            "gpu_usage": 1,
        },
    )
    users, hosts = make_volunteers(now, get_user_model(), Host)
    owners = [h.owner_id for h in hosts]
    host_ids = [h.id for h in hosts]
    bounds = state_bounds(total)
    gap = MONTH / total  # workunits are created evenly over the past month
    quote = connection.ops.quote_name
    wu_table, result_table = quote(Workunit._meta.db_table), quote(Result._meta.db_table)
    event_table = quote(LifecycleEvent._meta.db_table)
    state_case = "CASE " + " ".join(f"WHEN i >= {start} THEN {code}" for code, start in bounds) + f" ELSE {DONE} END"
    # Per workunit (columns of the CTE "s"): i, st (state code), t (create time), bad (one in
    # 50 has a first result with a client error and a third result), base ids of its rows.
    wu_names, wu_values, wu_params = columns_of(
        Workunit(project_id=app.project_id, app=app, name="", **wu_defaults(app)),
        {
            "name": "'load_' || lpad(i::text, 7, '0')",
            "create_time": "t",
            "need_validate": "st = 3",
            "canonical_result_id": "CASE WHEN st <= 2 THEN rid + bad::int END",
            "canonical_credit": "CASE WHEN st <= 2 THEN 50.0 ELSE 0 END",
            "transition_time": f"CASE WHEN st >= 4 THEN t + 60 + {app.delay_bound} ELSE {2**31 - 1} END",
            "file_delete_state": "CASE st WHEN 0 THEN 2 WHEN 1 THEN 1 ELSE 0 END",
            "assimilate_state": "CASE WHEN st <= 1 THEN 2 WHEN st = 2 THEN 1 ELSE 0 END",
        },
    )
    over = "st <= 3"
    failed = "(bad AND k = 0)"
    hidx = "(1 + (i * 7 + k * 13) %% %(nhosts)s)"
    result_names, result_values, result_params = columns_of(
        Result(project_id=app.project_id, workunit=Workunit(pk=0), app=app, name=""),
        {
            "workunit_id": "id",
            "name": "name || '_' || k",
            "create_time": "t",
            "server_state": f"CASE WHEN {over} THEN 5 WHEN st = 4 THEN 4 ELSE 2 END",
            "outcome": f"CASE WHEN NOT {over} THEN 0 WHEN {failed} THEN 3 ELSE 1 END",
            "client_state": f"CASE WHEN NOT {over} THEN 0 WHEN {failed} THEN 3 ELSE 5 END",
            "validate_state": f"CASE WHEN st <= 2 AND NOT {failed} THEN 1 ELSE 0 END",
            "file_delete_state": "CASE st WHEN 0 THEN 2 WHEN 1 THEN 1 ELSE 0 END",
            "exit_status": f"CASE WHEN {failed} THEN 1 ELSE 0 END",
            "host_id": f"CASE WHEN st <= 4 THEN (%(hosts)s::bigint[])[{hidx}] END",
            "user_id": f"CASE WHEN st <= 4 THEN (%(owners)s::bigint[])[{hidx}] END",
            "app_version_id": f"CASE WHEN st <= 4 THEN CASE WHEN (i + k) %% 4 = 0 THEN {gpu.id} ELSE {cpu.id} END END",
            "sent_time": "CASE WHEN st <= 4 THEN t + 60 + 30 * k ELSE 0 END",
            "report_deadline": f"CASE WHEN st <= 4 THEN t + 60 + 30 * k + {app.delay_bound} ELSE 0 END",
            "elapsed_time": f"CASE WHEN {over} THEN 3000 + (i * 37 + k * 11) %% 3600 ELSE 0 END",
            "cpu_time": f"CASE WHEN {over} THEN 2900 + (i * 37 + k * 11) %% 3600 ELSE 0 END",
            "received_time": f"CASE WHEN {over} THEN t + 3200 + (i * 37 + k * 11) %% 3600 ELSE 0 END",
            "claimed_credit": f"CASE WHEN {over} AND NOT {failed} THEN 50.0 ELSE 0 END",
            "granted_credit": f"CASE WHEN st <= 2 AND NOT {failed} THEN 50.0 ELSE 0 END",
            "flops_estimate": "1e9",
            "random": "floor(random() * 2147483648)::integer",
        },
    )
    # Lifecycle events, as the daemons write them: a result's carry its workunit's id too.
    events = [
        # (condition, time, actor, field, old, new, of a result)
        ("r.server_state >= 4", "r.sent_time", "scheduler", "server_state", 2, 4, True),
        ("r.server_state = 5", "r.received_time", "scheduler", "server_state", 4, 5, True),
        ("r.validate_state = 1", "r.received_time + 30", "validator", "validate_state", 0, 1, True),
        ("s.st <= 2 AND (r.id = s.rid)", "r.received_time + 30", "validator", "assimilate_state", 0, 1, False),
        ("s.st <= 1 AND (r.id = s.rid)", "r.received_time + 40", "assimilator", "assimilate_state", 1, 2, False),
        ("s.st <= 1 AND (r.id = s.rid)", "r.received_time + 40", "assimilator", "file_delete_state", 0, 1, False),
        ("s.st = 0 AND (r.id = s.rid)", "r.received_time + 50", "file_deleter", "file_delete_state", 1, 2, False),
    ]
    event_values = " UNION ALL ".join(
        f"SELECT {app.project_id}, {time_sql}, '{actor}', r.workunit_id, "
        f"{'r.id' if of_result else 'NULL::bigint'}, NULL::bigint, '{field}', {old}, {new}, '', '' "
        f"FROM res r JOIN s ON s.id = r.workunit_id WHERE {condition}"
        for condition, time_sql, actor, field, old, new, of_result in events
    )
    event_columns = "project_id, time, actor, workunit_id, result_id, host_id, field, old, new, reason, detail"
    sql = (
        f"WITH s AS (SELECT i, %(wid)s + i - %(start)s AS id, %(rid)s + 3 * (i - %(start)s) AS rid, "
        f"  {state_case} AS st, (%(now)s - (%(total)s - 1 - i) * %(gap)s)::bigint AS t, "
        f"  i %% 50 = 0 AS bad FROM generate_series(%(start)s, %(stop)s) AS i), "
        f"w AS (INSERT INTO {wu_table} (id, {wu_names}) SELECT id, {wu_values} FROM s "
        f"  ORDER BY i RETURNING id, name), "
        f"x AS (SELECT s.*, w.name, k FROM s JOIN w ON w.id = s.id "
        f"  CROSS JOIN LATERAL generate_series(0, 1 + s.bad::int) AS k), "
        f"res AS (INSERT INTO {result_table} (id, {result_names}) "
        f"  SELECT rid + k, {result_values} FROM x ORDER BY rid + k "
        f"  RETURNING id, workunit_id, server_state, validate_state, sent_time, received_time) "
        f"INSERT INTO {event_table} ({event_columns}) {event_values}"
    )
    # columns_of's values are %s placeholders: name them, to share the statement's dict.
    params = {"now": now, "total": total, "gap": gap, "hosts": host_ids, "owners": owners, "nhosts": len(host_ids)}
    sql, named = _name_params(sql, wu_params, result_params)
    params.update(named)
    started, added = time.monotonic(), 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.5)")
    while have < total:
        stop = min(total, have + CHUNK) - 1
        with transaction.atomic(), connection.cursor() as cursor:
            # The rows refer to each other correctly by construction; checking each reference
            # with a trigger at commit would take longer than writing the rows. Only a
            # superuser may skip the triggers; anyone else's fill checks them.
            try:
                with transaction.atomic():
                    cursor.execute("SET LOCAL session_replication_role = replica")
            except DatabaseError:
                pass
            cursor.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {wu_table}")
            wid = cursor.fetchone()[0]
            cursor.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {result_table}")
            rid = cursor.fetchone()[0]
            cursor.execute(sql, {**params, "start": have, "stop": stop, "wid": wid, "rid": rid})
            for table, model in ((wu_table, Workunit), (result_table, Result)):
                cursor.execute(
                    f"SELECT setval(pg_get_serial_sequence('{model._meta.db_table}', "
                    f"'id'), (SELECT max(id) FROM {table}))"
                )
        added += stop + 1 - have
        have = stop + 1
        out(f"fill: {have:,} of {total:,} workunits ({time.monotonic() - started:.0f} s)")
    with connection.cursor() as cursor:
        for table in (wu_table, result_table, event_table):
            cursor.execute(f"VACUUM ANALYZE {table}")
    out(f"fill: {added:,} workunits with their results and events added in {time.monotonic() - started:.0f} s")
    return added


def wu_defaults(app):
    return {
        name: getattr(app, name)
        for name in (
            "rsc_fpops_est",
            "rsc_fpops_bound",
            "delay_bound",
            "min_quorum",
            "target_nresults",
            "max_error_results",
            "max_total_results",
            "max_success_results",
        )
    }


def _name_params(sql, *positional):
    """``sql`` with the ``%s`` of each list in ``positional`` (in order) renamed %(p0)s, ...,
    and {name: value}, so positional and named parameters can share one statement."""
    named, n = {}, 0
    pieces = sql.split("%s")
    values = [value for group in positional for value in group]
    if len(pieces) - 1 != len(values):
        raise ValueError(f"{len(pieces) - 1} placeholders for {len(values)} values")
    out = [pieces[0]]
    for value, piece in zip(values, pieces[1:]):
        named[f"p{n}"] = value
        out.append(f"%(p{n})s{piece}")
        n += 1
    return "".join(out), named


def make_volunteers(now, User, Host, *, nusers=400, nhosts=1000):
    """The load's volunteers: ``nusers`` users owning ``nhosts`` hosts with some credit."""
    rng = random.Random(14)
    have = list(User.objects.filter(username__startswith="load_user_").order_by("id"))
    User.objects.bulk_create(User(username=f"load_user_{i:04d}", password="!") for i in range(len(have), nusers))
    users = list(User.objects.filter(username__startswith="load_user_").order_by("id"))
    existing = Host.objects.filter(domain_name__startswith="load-host-").count()
    Host.objects.bulk_create(
        Host(
            project=Host.project.field.related_model.demo(),
            owner=users[i % len(users)],
            domain_name=f"load-host-{i:04d}",
            create_time=now - rng.randrange(MONTH),
            p_ncpus=rng.choice([2, 4, 8, 16]),
            total_credit=rng.uniform(0, 5e4),
            expavg_credit=rng.uniform(0, 500),
        )
        for i in range(existing, nhosts)
    )
    return users, list(Host.objects.filter(domain_name__startswith="load-host-").order_by("id"))


# --- the server -----------------------------------------------------------------------------


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ProductionServer:
    """gunicorn serving boincweb as docs/deploy.md does, on a free port."""

    def __init__(self, workers, env, workdir):
        self.workers, self.workdir = workers, workdir
        self.env = {
            **os.environ,
            **env,
            "DEBUG": "0",
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "STATIC_ROOT": str(workdir / "static"),
            "BOINCWEB_DATA_DIR": str(workdir / "data"),
        }
        self.process = None

    def __enter__(self):
        python = sys.executable
        subprocess.run(
            [python, "manage.py", "collectstatic", "--noinput"], cwd=BASE, env=self.env, check=True, capture_output=True
        )
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(self.workdir / "gunicorn.log", "w+")
        gunicorn = Path(python).parent / "gunicorn"
        self.process = subprocess.Popen(
            [
                str(gunicorn),
                "boincweb.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(self.workers),
                "--no-control-socket",
            ],
            cwd=BASE,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise SystemExit("gunicorn stopped: " + (self.workdir / "gunicorn.log").read_text())
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("gunicorn did not answer within 60 s") from None
                time.sleep(0.3)
        return self

    def cpu_seconds(self):
        """CPU seconds the gunicorn processes (master and workers) have used so far."""
        return cpu_seconds([self.process.pid, *children(self.process.pid)])

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def children(pid):
    """The ids of the processes whose parent is ``pid`` (Linux /proc; none elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def cpu_by_process(pids):
    """{pid: user and system CPU seconds} of the processes ``pids`` still running (Linux
    /proc; none elsewhere)."""
    found = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def cpu_seconds(pids):
    """User and system CPU seconds of the processes ``pids`` (0 for those not running)."""
    return sum(cpu_by_process(pids).values())


def cpu_used(before, after):
    """CPU seconds used between two ``cpu_by_process`` readings: a process started between
    them counts from 0, one that ended counts up to its last reading."""
    return sum(after.get(pid, before.get(pid, 0)) - before.get(pid, 0) for pid in set(before) | set(after))


def database_backends():
    """The PostgreSQL server processes serving this database (none on SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        pids = [row[0] for row in cursor.fetchall()]
    connection.close()
    return pids


# --- the clients ----------------------------------------------------------------------------


def targets(rng):
    """A function giving, for a page name, the next path a client asks for."""
    from backend.keyset import encode_cursor
    from backend.models import Workunit

    ids = Workunit.objects.order_by("id").values_list("id", flat=True)
    low, high = ids.first(), ids.last()

    def path(page):
        if page == "status":
            return "/project/status/"
        if page == "workunit list":
            if rng.random() < 0.5:
                return "/project/workunits/"
            cursor = rng.randint(low, high)
            return f"/project/workunits/?after={encode_cursor(cursor, cursor)}"
        return f"/project/workunits/{rng.randint(low, high)}/"

    return path


async def client(session, base, path, deadline, times, errors, offset, pages):
    """One client: the pages in turn, each as soon as the previous answer has come."""
    import aiohttp

    turn = offset
    while time.monotonic() < deadline:
        page = pages[turn % len(pages)]
        turn += 1
        start = time.monotonic()
        try:
            async with session.get(base + path(page)) as response:
                await response.read()
                ok = response.status == 200
                reason = f"HTTP {response.status}"
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            ok, reason = False, type(exc).__name__
        elapsed = (time.monotonic() - start) * 1000
        if ok:
            times[page].append(elapsed)
        else:
            errors[page][reason] = errors[page].get(reason, 0) + 1


async def run_clients(base, clients, seconds, path, server_cpu, pages=PAGES):
    """(times by page, errors by page, wall seconds, CPU seconds of the server and of the
    database's processes during the run) of ``clients`` clients for ``seconds``."""
    import aiohttp

    times = {page: [] for page in pages}
    errors = {page: {} for page in pages}
    # One connection per client, kept alive, as a browser tab would.
    connector = aiohttp.TCPConnector(limit=clients, force_close=False)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        # warm-up: each page once, so gunicorn's workers have imported and connected
        for page in pages:
            async with session.get(base + path(page)) as response:
                await response.read()
                if response.status != 200:
                    raise SystemExit(f"{page} page answered {response.status}")
        database_before = cpu_by_process(await asyncio.to_thread(database_backends))
        server_before, clients_before = server_cpu() if server_cpu else 0, time.process_time()
        started = time.monotonic()
        deadline = started + seconds
        await asyncio.gather(*(client(session, base, path, deadline, times, errors, n, pages) for n in range(clients)))
        wall = time.monotonic() - started
        server_after, clients_after = server_cpu() if server_cpu else 0, time.process_time()
        database_after = cpu_by_process(await asyncio.to_thread(database_backends))
    cpu = {
        "server": round(server_after - server_before, 1),
        "database": round(cpu_used(database_before, database_after), 1),
        "clients": round(clients_after - clients_before, 1),
    }
    return times, errors, wall, cpu


def summarize(times, errors, wall):
    rows = []
    for page in times:
        values = times[page]
        rows.append(
            {
                "page": page,
                "requests": len(values),
                "requests_per_second": round(len(values) / wall, 1),
                "p50_ms": round(percentile(values, 50)),
                "p95_ms": round(percentile(values, 95)),
                "p99_ms": round(percentile(values, 99)),
                "errors": errors[page],
            }
        )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fill", action="store_true", help="first top the database up to --workunits workunits")
    parser.add_argument("--workunits", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60, help="0: only fill")
    parser.add_argument(
        "--server-workers", type=int, default=4, help="gunicorn processes (docs/deploy.md: about 2 per core)"
    )
    parser.add_argument("--url", default="", help="a server already running, instead of gunicorn")
    parser.add_argument(
        "--pages",
        default="status,list,workunit",
        help="the pages each client takes in turn, of: status, list, workunit",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.workunits < 1 or args.clients < 1 or args.seconds < 0 or args.server_workers < 1:
        parser.error("--workunits, --clients and --server-workers must be positive, --seconds not negative")

    pages = args.pages.split(",")
    unknown = [page for page in pages if page not in PAGE_NAMES]
    if unknown or not pages:
        parser.error(f"--pages: no page {', '.join(unknown)!r}; choose of {', '.join(PAGE_NAMES)}")
    args.pages = [PAGE_NAMES[page] for page in pages]
    workdir = Path(tempfile.mkdtemp(prefix="boincweb-load-"))
    env = {}
    small = not os.environ.get("DATABASE_URL")
    if small:
        # make bench: a small run on a SQLite file of its own, never the demo's database
        env["DATABASE_URL"] = f"sqlite:///{workdir / 'load.sqlite3'}"
        os.environ["DATABASE_URL"] = env["DATABASE_URL"]
        args.fill = True
        for name, value in SMALL.items():
            setattr(args, name, min(getattr(args, name), value))
    try:
        return measure(args, env, workdir, small)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def measure(args, env, workdir, small):
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if small:
        if not args.json:
            print(
                "no DATABASE_URL: a small run on a SQLite file of its own "
                f"({args.workunits:,} workunits, {args.clients} clients, {args.seconds:g} s); "
                "the target is for 1,000,000 workunits on PostgreSQL"
            )
        call_command("migrate", verbosity=0)
    if args.fill:
        fill(args.workunits, out=(lambda line: None) if args.json else print)
    if not args.seconds:
        return 0
    from backend.models import Workunit

    count = Workunit.objects.count()
    if not count:
        print("skipped: the database holds no workunits; run bench/load.py --fill first")
        return 0
    path = targets(random.Random(args.seed))
    vendor = connection.vendor
    connection.close()
    before = uptime()
    if args.url:
        times, errors, wall, _ = asyncio.run(
            run_clients(args.url.rstrip("/"), args.clients, args.seconds, path, None, args.pages)
        )
        cpu = {}
    else:
        with ProductionServer(args.server_workers, env, workdir) as server:
            times, errors, wall, cpu = asyncio.run(
                run_clients(server.url, args.clients, args.seconds, path, server.cpu_seconds, args.pages)
            )
    after = uptime()
    summary = {
        "database": vendor,
        "workunits": count,
        "clients": args.clients,
        "seconds": round(wall, 1),
        "server_workers": None if args.url else args.server_workers,
        "requests_per_second": round(sum(len(v) for v in times.values()) / wall, 1),
        "pages": summarize(times, errors, wall),
        "cpu_seconds": cpu,
        "cpu_ms_per_request": {
            who: round(1000 * seconds / max(1, sum(len(v) for v in times.values())), 1) for who, seconds in cpu.items()
        },
        "uptime_before": before,
        "uptime_after": after,
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{count:,} workunits on {vendor}, {args.clients} clients for {wall:.0f} s against "
            + (args.url if args.url else f"gunicorn with {args.server_workers} workers")
            + f", {os.cpu_count()} CPUs"
        )
        print(f"{'page':<15} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7}  errors")
        for row in summary["pages"]:
            print(
                f"{row['page']:<15} {row['requests_per_second']:>7} {row['p50_ms']:>7} "
                f"{row['p95_ms']:>7} {row['p99_ms']:>7}  {row['errors'] or 'none'}"
            )
        print(f"all pages: {summary['requests_per_second']} requests/s")
        if cpu:
            print(
                "CPU per request: "
                + ", ".join(f"{who} {ms} ms" for who, ms in summary["cpu_ms_per_request"].items())
                + " (the server's gunicorn processes, the database's server processes, "
                "these clients)"
            )
        print(f"uptime before: {before}")
        print(f"uptime after:  {after}")
    failed = sum(sum(e.values()) for e in errors.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
