"""Hostile input, outages and slow clients against the deployed server (issue 34's twelve
findings): per case, the answer, the time, the web workers' peak memory and whether any row of
the database changed.

    [DATABASE_URL=postgres://...] python bench/hostile.py [--outage 20] [--slow-clients 20] [--json]

It serves boincweb as docs/deploy.md does, from Procfile.deploy: the ``web``
command (gunicorn's asyncio worker, ``WEB_CONCURRENCY=2``) with ``DEBUG`` off, on the database
``DATABASE_URL`` names (else a SQLite file of its own) and a private Redis it starts on a Unix
socket, then the ``worker`` and ``cron`` commands. It makes what the cases need through the
site itself where it can (an account and a host with a job through the scheduler, a lab
scenario from a preset), then runs the cases:

- the scheduler and upload handler (findings 1, 5-9): unauthenticated and authenticated bodies
  that ran for 13-30 s or peaked at 460-704 MB, two uploads of one output at once, a body sent
  in chunks;
- the forms (10-12): the lab's delete box and a forged form count, seeds beyond 32 bits, a
  buffer of 1e-320 days, and whether the public host list shows domain names;
- 20 slow clients (4): each sends a POST's headers with ``Content-Length: 100000`` and then a
  byte every 2 s, while the pages are fetched;
- Redis outages (2, 3): Redis stopped for ``--outage`` seconds while the worker runs a job, then
  frozen (SIGSTOP) as long; the time from Redis answering again to the end of the next daemon
  pass, whether the worker and rqcron still run, and whether a pass was enqueued twice.

Memory is the highest VmHWM of the gunicorn worker processes during the case (their peaks are
reset before each, Linux's /proc/PID/clear_refs). Rows: every table but the sessions is
checksummed before and after each request case.
"""

import argparse
import hashlib
import http.cookiejar
import json
import os
import platform
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")

if __package__:  # imported (the tests take its slow client), not run: bench/ stays off the path
    from bench import load
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import load  # type: ignore[no-redef]  # noqa: E402
children, free_port, uptime = load.children, load.free_port, load.uptime

# What every case must stay within (issue 34, "Done when").
MAX_SECONDS = 1.0
MAX_PEAK_MB = 200
MAX_RESUME_SECONDS = 10.0
WEB_WORKERS = 2
PRESET = "seed-002-cpu-and-gpu"
DAEMON_PASSES = "rq:cron_job:backend.jobs.run_all_daemons:jobs"
PAGES = ["/boinc/", "/", "/project/status/", "/project/hosts/", "/lab/"]


@dataclass
class Outcome:
    case: str
    status: str
    seconds: float
    peak_mb: float | None = None
    rows_changed: bool | None = None
    ok: bool = True
    problems: list[str] = field(default_factory=list)


def machine():
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (
        f"{platform.node()}: {os.cpu_count()} cores ({cpu or platform.machine()}), Python {platform.python_version()}"
    )


def deployed(process):
    """Procfile.deploy's command line for ``process``, for ``sh -c``."""
    for line in (BASE / "Procfile.deploy").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == process:
            return ["sh", "-c", "exec " + command.strip()]
    raise SystemExit(f"no {process} in Procfile.deploy")


def vm(pid, name):
    """A /proc/PID/status figure in MB (VmRSS, VmHWM), 0 for a process gone."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(name + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# --- the processes ------------------------------------------------------------------------------


class Processes:
    """The private Redis, the deployed web server and, later, the worker and rqcron."""

    def __init__(self, workdir, env):
        from boincweb import embedded_redis

        self.redis_lib = embedded_redis
        self.workdir, self.env = workdir, env
        self.socket = workdir / "redis.sock"
        self.redis = embedded_redis.start(self.socket)
        self.logs = []
        self.web = self.worker = self.cron = None

    def start(self, name, **extra):
        log = open(self.workdir / f"{name}.log", "w+")
        self.logs.append(log)
        env = {**self.env, **{k: str(v) for k, v in extra.items()}}
        return subprocess.Popen(deployed(name), cwd=BASE, env=env, stdout=log, stderr=subprocess.STDOUT)

    def start_web(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.web = self.start("web", BIND="127.0.0.1", PORT=self.port, WEB_CONCURRENCY=WEB_WORKERS)
        deadline = time.monotonic() + 90
        while True:
            if self.web.poll() is not None:
                raise SystemExit("the web server stopped: " + (self.workdir / "web.log").read_text()[-3000:])
            try:
                urllib.request.urlopen(self.url + "/boinc/", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the web server did not answer within 90 s") from None
                time.sleep(0.3)
        while len(self.web_workers()) < WEB_WORKERS:
            time.sleep(0.2)

    def web_workers(self):
        return children(self.web.pid) if self.web else []

    def reset_peaks(self):
        for pid in self.web_workers():
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")
            except OSError:
                pass

    def peak_mb(self):
        return max((vm(pid, "VmHWM") for pid in self.web_workers()), default=0.0)

    def stop_redis(self):
        self.redis_lib.stop(self.redis)

    def restart_redis(self):
        self.redis = self.redis_lib.start(self.socket)

    def close(self):
        for process in (self.cron, self.worker, self.web):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        if self.redis.poll() is None:
            os.kill(self.redis.pid, signal.SIGCONT)
            self.redis_lib.stop(self.redis)
        for log in self.logs:
            log.close()


# --- HTTP ----------------------------------------------------------------------------------------


class Browser:
    """A person at the site: cookies, the CSRF token, a login."""

    def __init__(self, url):
        self.url = url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect())

    def request(self, method, path, data=None, headers=None):
        """(status, headers, body) whatever the status."""
        body = urllib.parse.urlencode(data, doseq=True).encode() if isinstance(data, dict) else data
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        if method == "POST" and isinstance(data, dict):
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
            request.add_header("Referer", self.url + path)
            token = self.csrf()
            if token:
                request.add_header("X-CSRFToken", token)
        try:
            with self.opener.open(request, timeout=120) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, data):
        return self.request("POST", path, data)

    def csrf(self):
        return next((c.value for c in self.jar if c.name == "csrftoken"), "")

    def login(self, username, password):
        self.get("/accounts/login/")
        status, headers, _ = self.post("/accounts/login/", {"username": username, "password": password})
        if status != 302:
            raise SystemExit(f"could not log in as {username}: {status}")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def raw_post(port, path, body, *, chunked=False, content_type="application/x-www-form-urlencoded"):
    """(status, body) of a POST sent over a socket of its own (with the body in chunks when
    ``chunked``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: {content_type}\r\n"
        if chunked:
            sock.sendall(head.encode() + b"Transfer-Encoding: chunked\r\n\r\n")
            for at in range(0, len(body), 4096):
                piece = body[at : at + 4096]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")
        else:
            sock.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        response = b""
        while chunk := sock.recv(1 << 16):
            response += chunk
    head, _, content = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        content = dechunk(content)
    return status, content


def dechunk(data):
    out = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return out
        out, data = out + data[:size], data[size + 2 :]


def message(reply):
    """The <message> of a scheduler reply, or the <message> of an upload reply."""
    found = re.search(rb"<message[^>]*>(.*?)</message>", reply, re.DOTALL)
    return found.group(1).decode(errors="replace").strip() if found else reply[:80].decode(errors="replace")


class SlowClient:
    """A POST whose headers say 100,000 bytes and whose body comes a byte every ``every`` s."""

    def __init__(self, port, every=2.0):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(
            b"POST /boinc/cgi HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n"
        )
        self.every = every
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self.trickle, daemon=True)
        self.thread.start()

    def trickle(self):
        while not self.closed.wait(self.every):
            try:
                self.sock.sendall(b"x")
            except OSError:
                return

    def close(self):
        self.closed.set()
        self.thread.join()
        self.sock.close()


# --- the database ----------------------------------------------------------------------------------


def checksum():
    """A digest of every table's rows but the sessions (a login writes one)."""
    from django.db import connection

    digest = hashlib.sha256()
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names()):
            if table == "django_session":
                continue
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            rows = sorted(repr(row) for row in cursor.fetchall())
            digest.update(table.encode())
            for row in rows:
                digest.update(row.encode())
    connection.close()
    return digest.hexdigest()


@dataclass
class Site:
    owner: str
    staff: str
    password: str
    authenticator: str
    host_id: int
    output_name: str
    scenario_id: int


def prepare(procs):
    """The accounts, a host holding a job and a lab scenario the cases need."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from backend.daemons import run_pass
    from backend.daemons.work_generator import create_work
    from backend.models import App, Host, Project, Result
    from protocol.models import Account

    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    tag = secrets.token_hex(3)
    password = secrets.token_urlsafe(12)
    owner = User.objects.create_user(f"hostile-owner-{tag}", password=password)
    User.objects.create_user(f"hostile-staff-{tag}", password=password, is_staff=True)
    authenticator = Account.for_user(owner, Project.demo()).authenticator
    now = int(time.time())
    app = App.objects.create(
        project=Project.demo(),
        name=f"hostile_{tag}",
        min_quorum=1,
        target_nresults=1,
        max_error_results=1,
        max_total_results=2,
        max_success_results=1,
        rsc_fpops_est=1e9,
        rsc_fpops_bound=1e12,
        max_output_nbytes=8 << 20,
        delay_bound=86400,
    )
    create_work(app, [f"hostile_wu_{tag}"], now=now)
    run_pass("transitioner", project=Project.demo(), now=now + 1)
    from django.db import connection

    connection.close()
    procs.start_web()
    status, reply = raw_post(procs.port, "/boinc/cgi", work_request(authenticator, app=app.name))
    host = Host.objects.filter(owner=owner).first()
    if status != 200 or host is None:
        raise SystemExit(f"the first scheduler request failed: {status} {reply[:300]!r}")
    Host.objects.filter(pk=host.pk).update(work_buf_min_days=20 / 86400, domain_name="owners-box.example.org")
    result = Result.objects.filter(host=host).first()
    if result is None:
        raise SystemExit(f"no job was sent: {message(reply)}")
    browser = Browser(procs.url)
    browser.login(owner.username, password)
    status, headers, _ = browser.post(f"/lab/presets/{PRESET}/", {})
    scenario_id = int(headers["Location"].rstrip("/").rsplit("/", 1)[1])
    connection.close()
    return Site(
        owner=owner.username,
        staff=f"hostile-staff-{tag}",
        password=password,
        authenticator=authenticator,
        host_id=host.pk,
        output_name=result.output_file_name(0),
        scenario_id=scenario_id,
    )


def work_request(authenticator, extra=b"", app="none"):
    """A scheduler request as client 7.20.5 writes it, asking for work for ``app`` on the
    anonymous platform, with ``extra`` inside."""
    return (
        b"<scheduler_request>\n<authenticator>%s</authenticator>\n<hostid>0</hostid>\n"
        b"<rpc_seqno>1</rpc_seqno>\n<core_client_major_version>7</core_client_major_version>\n"
        b"<core_client_minor_version>20</core_client_minor_version>\n<core_client_release>5</core_client_release>\n"
        b"<work_req_seconds>3600</work_req_seconds>\n<cpu_req_secs>3600</cpu_req_secs>\n"
        b"<cpu_req_instances>1</cpu_req_instances>\n<platform_name>anonymous</platform_name>\n"
        b"<host_info>\n<domain_name>bench-box</domain_name>\n<p_ncpus>2</p_ncpus>\n<p_fpops>1e9</p_fpops>\n"
        b"<m_nbytes>4e9</m_nbytes>\n<d_total>1e11</d_total>\n<d_free>5e10</d_free>\n<os_name>Linux</os_name>\n"
        b"</host_info>\n<app_versions>\n<app_version>\n<app_name>%s</app_name>\n<version_num>100</version_num>\n"
        b"<platform>x86_64-pc-linux-gnu</platform>\n<avg_ncpus>1</avg_ncpus>\n<flops>1e9</flops>\n</app_version>\n"
        b"</app_versions>\n%s</scheduler_request>\n" % (authenticator.encode(), app.encode(), extra)
    )


def lab_form(scenario_id):
    """The POST data the lab's scenario form sends back unchanged."""
    from scheduling.forms import ScenarioForms, scenario_initial
    from scheduling.models import StoredScenario

    stored = StoredScenario.objects.get(pk=scenario_id)
    return ScenarioForms(initial=scenario_initial(stored.engine_scenario())).as_post_data()


def upload_body(name, data):
    md5 = hashlib.md5(data).hexdigest()
    return (
        f"<data_server_request>\n<core_client_major_version>7</core_client_major_version>\n<file_upload>\n"
        f"<file_info>\n<name>{name}</name>\n</file_info>\n<nbytes>{len(data)}</nbytes>\n"
        f"<md5_cksum>{md5}</md5_cksum>\n<offset>0</offset>\n<data>\n"
    ).encode() + data


# --- the cases -------------------------------------------------------------------------------------


def request_cases(procs, site):
    """[(case, run)]: run() returns (status text, problems)."""
    port, url = procs.port, procs.url

    def scheduler(body, expect, *, chunked=False):
        def run():
            status, reply = raw_post(port, "/boinc/cgi", body, chunked=chunked)
            text = message(reply)
            problems = [] if status == 200 and expect in text else [f"expected {expect!r}"]
            return f"{status}: {text}", problems

        return run

    def at_once(runs):
        def run():
            outcomes = [None] * len(runs)

            def one(i):
                outcomes[i] = runs[i]()

            threads = [threading.Thread(target=one, args=(i,)) for i in range(len(runs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return outcomes[0][0] + f" (x{len(runs)} at once)", [p for o in outcomes for p in o[1]]

        return run

    def upload(body, expect):
        def run():
            status, reply = raw_post(port, "/boinc/file_upload_handler", body)
            text = message(reply)
            return f"{status}: {text}", [] if status == 200 and expect in text else [f"expected {expect!r}"]

        return run

    def concurrent_uploads():
        from backend.daemons.hierarchy import upload_path
        from backend.models import Project

        datas = [b"A" * (4 << 20), b"B" * (4 << 20)]
        replies = [b"", b""]

        def one(i):
            replies[i] = raw_post(port, "/boinc/file_upload_handler", upload_body(site.output_name, datas[i]))[1]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stored_path = upload_path(Project.demo(), site.output_name)
        stored = stored_path.read_bytes() if stored_path.exists() else b""
        problems = [
            f"upload {i} told success but the file holds other bytes"
            for i in range(2)
            if b"<status>0</status>" in replies[i] and stored != datas[i]
        ]
        statuses = [re.search(rb"<status>(-?\d)</status>", r).group(1).decode() for r in replies]
        refused = next((message(r) for r in replies if b"<status>0</status>" not in r), "neither")
        return (
            f"statuses {', '.join(statuses)}; stored: {'A' if stored[:1] == b'A' else 'B'}; refused: {refused}",
            problems,
        )

    def browser_as(user):
        browser = Browser(url)
        if user:
            browser.login(user, site.password)
        return browser

    def form(user, path, data, expect, *, method="POST"):
        browser = browser_as(user)
        if callable(data):
            data = data()

        def run():
            status, _, body = browser.post(path, data) if method == "POST" else browser.get(path)
            text = body.decode(errors="replace")
            found = expect in text
            problems = [] if status < 500 and found else [f"expected {expect!r}"]
            return f"{status}: {'error shown: ' + expect if found else text[:60]}", problems

        return run

    def lab_delete():
        data = lab_form(site.scenario_id)
        data["apps-0-DELETE"] = "on"
        return data

    def lab_forged():
        data = lab_form(site.scenario_id)
        data["apps-TOTAL_FORMS"] = "2147483648"
        return data

    def host_list():
        browser = Browser(url)

        def run():
            status, _, body = browser.get("/project/hosts/")
            shown = b"owners-box.example.org" in body
            return f"{status}: domain name {'shown' if shown else 'not shown'} to a visitor", (
                ["a visitor sees the domain name"] if shown or status != 200 else []
            )

        return run

    attach = {
        "engine_hosts": 2,
        "simple_hosts": 0,
        "policy": "boinc7",
        "days": 1,
        "speedup": 3600,
        "resource_share": 100,
        "delay_bound_hours_a": 72,
    }
    prefs = {
        "work_buf_min_days": "1e-320",
        "work_buf_additional_days": "0.5",
        "max_ncpus_pct": "100",
        "cpu_usage_limit": "100",
        "cpu_scheduling_period_minutes": "60",
    }
    nested = b"<a>" * 2_200_000 + b"</a>" * 2_200_000
    flat = b"<a/>" * 3_900_000
    reports = b"".join(b"<result><name>r%d</name></result>" % i for i in range(450_000))
    stderr = b"<scheduler_request>" + b"<stderr_out><![CDATA[" * 1000
    return [
        ("1 stderr blocks unclosed, 21 KB, 2 at once", at_once([scheduler(stderr, "not well-formed")] * 2)),
        ("5 2.2 M nested elements, 15 MB", scheduler(work_request("x", nested), "(the limit)")),
        (
            "5 elements nested 25,000 deep",
            scheduler(work_request("x", b"<a>" * 25_000 + b"</a>" * 25_000), "nested more than 32 deep"),
        ),
        ("5 3.9 M flat elements, 15.6 MB", scheduler(work_request("x", flat), "elements (the limit)")),
        (
            "6 450,000 reports, authenticated",
            scheduler(work_request(site.authenticator, reports), "elements (the limit)"),
        ),
        (
            "7 upload header of `<get_file_size>` x 9,000",
            upload(b"<data_server_request>\n" + b"<get_file_size>" * 9000, "over 65536 bytes"),
        ),
        (
            "7 upload header of `<file_info>` x 11,000",
            upload(b"<data_server_request>\n<file_upload>\n" + b"<file_info>" * 11000, "over 65536 bytes"),
        ),
        ("8 two uploads of one output at once", concurrent_uploads),
        ("9 scheduler request in chunks", scheduler(work_request("unknown-key"), "account key", chunked=True)),
        (
            "10 lab: delete box on an app row",
            form(site.owner, f"/lab/{site.scenario_id}/edit/", lab_delete, "This project has no app"),
        ),
        (
            "10 lab: TOTAL_FORMS=2147483648",
            form(site.owner, f"/lab/{site.scenario_id}/edit/", lab_forged, "Please submit at most"),
        ),
        (
            "11 compare worlds, seed 2^31",
            form(
                site.staff,
                "/project/worlds/compare/new/",
                {"hosts": 3, "days": 1, "seed": str(2**31), "speedup": 3600},
                "2147483647",
            ),
        ),
        (
            "11 attach to a world, 400-digit seed",
            form(
                site.staff, f"/project/worlds/attach/{site.scenario_id}/", {**attach, "seed": "9" * 400}, "2147483647"
            ),
        ),
        (
            "12 host prefs, 1e-320 days",
            form(site.owner, f"/project/hosts/{site.host_id}/prefs/", prefs, "0, or at least one second"),
        ),
        ("12 public host list", host_list()),
    ]


def run_request_cases(procs, site):
    outcomes = []
    for case, run in request_cases(procs, site):
        before = checksum()
        procs.reset_peaks()
        started = time.monotonic()
        try:
            status, problems = run()
        except Exception as exc:  # noqa: BLE001 - a case that breaks is reported, not fatal
            status, problems = f"failed: {type(exc).__name__}: {exc}", ["the case broke"]
        seconds = time.monotonic() - started
        peak = procs.peak_mb()
        changed = checksum() != before
        outcome = Outcome(case, status, seconds, peak, changed, problems=problems)
        check(outcome, status_5xx=status[:1] == "5")
        outcomes.append(outcome)
    return outcomes


def slow_clients_case(procs, count):
    clients = [SlowClient(procs.port) for _ in range(count)]
    try:
        time.sleep(2.5)  # every one has sent its headers and a byte or two of its body
        procs.reset_peaks()
        times, statuses = [], []
        for path in PAGES:
            started = time.monotonic()
            try:
                with urllib.request.urlopen(procs.url + path, timeout=60) as response:
                    response.read()
                    statuses.append(response.status)
            except urllib.error.HTTPError as error:
                statuses.append(error.code)
            times.append(time.monotonic() - started)
        alive = sum(1 for c in clients if not c.closed.is_set())
    finally:
        for client in clients:
            client.close()
    outcome = Outcome(
        f"4 {count} slow clients: {len(PAGES)} pages",
        f"{'/'.join(map(str, statuses))}; slowest page {max(times):.3f} s; {alive} clients still sending",
        max(times),
        procs.peak_mb(),
    )
    check(outcome, status_5xx=any(s >= 500 for s in statuses) or any(s != 200 for s in statuses))
    return outcome


def check(outcome, *, status_5xx):
    if status_5xx:
        outcome.problems.append("a 5xx (or not 200) answer")
    if outcome.seconds >= MAX_SECONDS:
        outcome.problems.append(f"over {MAX_SECONDS} s")
    if outcome.peak_mb is not None and outcome.peak_mb >= MAX_PEAK_MB:
        outcome.problems.append(f"worker peak over {MAX_PEAK_MB} MB")
    if outcome.rows_changed:
        outcome.problems.append("rows changed")
    outcome.ok = not outcome.problems


def pass_times(connection):
    """Enqueue times of the daemon passes rqcron made, oldest first."""
    return [score for _, score in connection.zrange(DAEMON_PASSES, 0, -1, withscores=True)]


def next_pass_done(connection, since, timeout=60.0):
    """Seconds from ``since`` until a daemon pass enqueued after it has finished, or None."""
    from rq.job import Job

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            for job_id, score in connection.zrange(DAEMON_PASSES, 0, -1, withscores=True):
                if score < since:
                    continue
                job = Job.fetch(job_id.decode(), connection=connection)
                if job.get_status() == "finished" and job.ended_at:
                    return job.ended_at.timestamp() - since
        except Exception:  # noqa: BLE001 - Redis still coming back, or the job gone meanwhile
            pass
        time.sleep(0.2)
    return None


def outage_cases(procs, seconds):
    """Redis stopped (while the worker runs a job), then frozen; per outage, the time until
    the next daemon pass ended after Redis answered again."""
    import django_rq
    import redis

    url = f"unix://{procs.socket}"
    procs.worker = procs.start("worker")
    procs.cron = procs.start("cron")
    connection = redis.Redis.from_url(url)
    first = next_pass_done(connection, 0, timeout=120)
    if first is None:
        raise SystemExit("no daemon pass ran: " + (procs.workdir / "worker.log").read_text()[-2000:])
    outcomes = []
    for kind in ("stopped", "frozen"):
        if kind == "stopped":
            job = django_rq.get_queue("default").enqueue("time.sleep", 3)
            deadline = time.time() + 30
            while job.get_status(refresh=True) != "started" and time.time() < deadline:
                time.sleep(0.1)
            procs.stop_redis()
            time.sleep(seconds)
            procs.restart_redis()
        else:
            os.kill(procs.redis.pid, signal.SIGSTOP)
            time.sleep(seconds)
            os.kill(procs.redis.pid, signal.SIGCONT)
        back = time.time()
        resumed = next_pass_done(redis.Redis.from_url(url), back)
        time.sleep(12)  # two more passes, to see none doubled
        times = [t for t in pass_times(redis.Redis.from_url(url)) if t >= back - 1]
        doubled = sum(1 for a, b in zip(times, times[1:]) if b - a < 4)
        alive = {name: p.poll() is None for name, p in (("worker", procs.worker), ("rqcron", procs.cron))}
        status = (
            f"next pass done {resumed:.1f} s after Redis is back" if resumed is not None else "no pass within 60 s"
        ) + f"; {', '.join(n + (' runs' if a else ' DIED') for n, a in alive.items())}; {doubled} doubled"
        outcome = Outcome(f"2,3 Redis {kind} for {seconds:.0f} s", status, resumed if resumed is not None else 60.0)
        if resumed is None or resumed >= MAX_RESUME_SECONDS:
            outcome.problems.append(f"passes not resumed within {MAX_RESUME_SECONDS} s")
        if not all(alive.values()) or doubled:
            outcome.problems.append("a process died or a pass doubled")
        outcome.ok = not outcome.problems
        outcomes.append(outcome)
    return outcomes


def table(outcomes):
    lines = [
        "| case | answer | time (s) | worker peak (MB) | rows changed |",
        "| --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        peak = f"{o.peak_mb:.0f}" if o.peak_mb is not None else "–"
        rows = {None: "–", True: "yes", False: "no"}[o.rows_changed]
        answer = o.status.replace("|", "/")
        if len(answer) > 110:
            answer = answer[:107] + "..."
        flag = "" if o.ok else " **" + "; ".join(o.problems) + "**"
        lines.append(f"| {o.case} | {answer}{flag} | {o.seconds:.3f} | {peak} | {rows} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage", type=float, default=20.0, help="seconds Redis is stopped, then frozen")
    parser.add_argument("--slow-clients", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="boincweb-hostile-"))
    database_url = os.environ.get("DATABASE_URL") or f"sqlite:///{workdir / 'db.sqlite3'}"
    env = {
        "DATABASE_URL": database_url,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "STATIC_ROOT": str(workdir / "static"),
        "BOINCWEB_DATA_DIR": str(workdir / "data"),
    }
    os.environ.update(env)
    procs = Processes(workdir, {})
    env["REDIS_URL"] = os.environ["REDIS_URL"] = f"unix://{procs.socket}"
    env["PATH"] = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    procs.env = {**os.environ, **env}
    import django

    django.setup()
    load_before = uptime()
    try:
        site = prepare(procs)
        baseline = max((vm(pid, "VmRSS") for pid in procs.web_workers()), default=0.0)
        outcomes = run_request_cases(procs, site)
        outcomes.append(slow_clients_case(procs, args.slow_clients))
        outcomes.extend(outage_cases(procs, args.outage))
    finally:
        procs.close()
    load_after = uptime()
    from django.db import connection

    summary = {
        "machine": machine(),
        "database": connection.vendor,
        "load_before": load_before,
        "load_after": load_after,
        "web_worker_rss_mb_at_start": round(baseline, 1),
        "all_within_bounds": all(o.ok for o in outcomes),
    }
    if args.json:
        print(json.dumps({**summary, "cases": [o.__dict__ for o in outcomes]}, indent=2))
    else:
        print(f"{summary['machine']}; database {summary['database']}; {WEB_WORKERS} web workers")
        print(f"load before: {load_before}")
        print(table(outcomes))
        print(f"load after: {load_after}")
        print(f"web worker RSS at start: {baseline:.0f} MB")
        bad = [o.case for o in outcomes if not o.ok]
        print("every case within its bounds" if not bad else f"out of bounds: {', '.join(bad)}")
    return 0 if summary["all_within_bounds"] else 1


if __name__ == "__main__":
    sys.exit(main())
