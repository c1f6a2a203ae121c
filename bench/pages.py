"""Two measures of the pages, chosen by ``--charts``.

Without it: response times of the workunit list page (target: p95 < 150 ms with 1 M workunits
on PostgreSQL).

    DATABASE_URL=postgres://... python bench/pages.py [--workunits 1000000] [--repeat 20] [--json]

Tops the database up to ``--workunits`` workunits with ``manage.py seed_demo`` (bulk inserts),
spreads them over states so every filter has something to find (a fixed pattern on id: one in
97 cancelled, one in 13 waiting for validation, one in 3 assimilated with files deleted), then
fetches each list URL ``--repeat`` times through Django's test client (view, queries and template,
no network) and prints the median and 95th percentile per URL and over all of them, with the
part of each request spent in the database and the machine's load average (other processes on
the machine slow the template rendering, not the queries).

With ``--charts``: time to charts in Chromium (target: a finished comparison and the status page
ready in under 1.5 s).

    python bench/pages.py --charts [--loads 5] [--json]

Builds a site of its own on a SQLite file and a private Redis in a temporary directory (the
browser tests' busy site, tests/web/busy_site.py: a plain and a locality world run a simulated
day, the daemons make their passes, the demo project is seeded; plus two finished lab runs of
the preset ``seed-001-scenario-1`` over the lab's default two simulated days), serves it as the
docs/deploy.md does (collectstatic, gunicorn with DEBUG off and whitenoise: bench/load.py's
ProductionServer, two workers), and opens each page in /usr/bin/chromium with Playwright:
the lab comparison and a lab run, the world project's status page and a workunit page, a world
and a world comparison. For each page it takes ``--loads`` loads in a fresh browser context (an
empty cache: a first visit) and ``--loads`` reloads in one context (a cached bundle: reopening
the page), and prints the medians of

* in view: navigation start to the moment every chart in the first screen has its plot drawn
  (a DOM check, each ``[data-figure]`` div holding Plotly's ``.main-svg``), polled each frame;
* all: navigation start to every chart on the page drawn, scrolling to each chart not drawn yet
  (charts below the first screen are drawn when they come into view);

with navigation start to the HTML's last byte (the server's part), the HTML and script bytes
the page fetched, and ``uptime``'s load average before and after. Then, ``--loads`` times, a
comparison as a teacher starts it (logged in, the scenario's compare form, boinc7 and boinc5
over one simulated day): the page waits on its runs (it polls every 2 s), an RQ worker
(``manage.py rqworker --burst engine``) runs them, and the bench takes the moment both runs
are done in the database (polled every 20 ms) to the moment the page has the comparison's
table and every one of its charts drawn, with no scrolling (target: within 2 s).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")

CHROMIUM = "/usr/bin/chromium"
TARGET_SECONDS = 1.5
# charts in the first screen drawn, and the moment it happened (ms since navigation start)
IN_VIEW_DRAWN = """() => {
  if (document.readyState === "loading") return false;  // the page is still arriving
  const charts = [...document.querySelectorAll("[data-figure]")];
  if (!charts.length) return false;
  const inView = charts.filter((div) => {
    const box = div.getBoundingClientRect();
    return box.width > 0 && box.bottom > 0 && box.top < window.innerHeight;
  });
  return inView.every((div) => div.querySelector(".main-svg")) && performance.now();
}"""
ALL_DRAWN = """() => {
  if (document.readyState === "loading") return false;
  const charts = [...document.querySelectorAll("[data-figure]")];
  const waiting = charts.filter((div) => !div.querySelector(".main-svg"));
  if (waiting.length) { waiting[0].scrollIntoView(); return false; }
  return performance.now();
}"""
BYTES = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const scripts = performance.getEntriesByType("resource").filter((r) => r.initiatorType === "script");
  return {
    response_end: nav.responseEnd,
    html: nav.decodedBodySize,
    scripts: scripts.reduce((sum, r) => sum + r.decodedBodySize, 0),
    charts: document.querySelectorAll("[data-figure]").length,
  };
}"""


def spread_states():
    """Give the seeded workunits a mix of states (idempotent: the same ids every time)."""
    from django.db import connection
    from django.db.models import F
    from django.db.models.functions import Mod

    from backend.models import AssimilateState, ErrorMask, FileDeleteState, Workunit

    def every(n):
        return Workunit.objects.alias(r=Mod(F("id"), n)).filter(r=0)

    every(3).update(
        assimilate_state=AssimilateState.DONE, file_delete_state=FileDeleteState.DONE, transition_time=2**31 - 1
    )
    every(13).exclude(assimilate_state=AssimilateState.DONE).update(need_validate=True)
    every(97).update(error_mask=ErrorMask.CANCELLED)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE backend_workunit")


def urls():
    from django.db.models import Max

    from backend.keyset import encode_cursor
    from backend.models import App, Workunit

    app = App.objects.order_by("id").first()
    top = Workunit.objects.aggregate(top=Max("id"))["top"]
    middle = Workunit.objects.filter(id__lte=top // 2).order_by("-id").values("id", "name").first()
    by_name = encode_cursor(middle["name"], middle["id"])
    # Deep inside the run of transitioned workunits that all hold INT_MAX: the worst case
    # for a sort whose ties are broken by id.
    tied = Workunit.objects.filter(id__lte=top // 2, transition_time=2**31 - 1).order_by("-id").first()
    by_time = encode_cursor(tied.transition_time, tied.id)
    return [
        "/project/workunits/",
        f"/project/workunits/?after={encode_cursor(middle['id'], middle['id'])}",
        f"/project/workunits/?app={app.id}",
        "/project/workunits/?error=CANCELLED",
        "/project/workunits/?error=some&sort=id",
        "/project/workunits/?state=need_validate",
        "/project/workunits/?state=files_deleted&sort=-name",
        "/project/workunits/?state=transition_due",
        "/project/workunits/?name=demo_05&sort=name",
        "/project/workunits/?name=demo_0123",
        f"/project/workunits/?sort=name&after={by_name}",
        f"/project/workunits/?sort=-name&before={by_name}",
        "/project/workunits/?sort=transition_time",
        f"/project/workunits/?sort=-transition_time&after={by_time}",
        f"/project/workunits/?sort=transition_time&before={by_time}&app={app.id}",
    ]


class SQLTimer:
    """Adds up the time spent in the database (connection.execute_wrapper)."""

    def __init__(self):
        self.ms = 0.0

    def __call__(self, execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.ms += (time.perf_counter() - start) * 1000


def measure(client, url, repeat):
    """(page times, SQL times) in ms; every other request is the htmx fragment."""
    from django.db import connection

    client.get(url)  # warm the caches once, as a page in use would be
    times, sql_times = [], []
    for _ in range(repeat):
        timer = SQLTimer()
        with connection.execute_wrapper(timer):
            start = time.perf_counter()
            htmx = {"HTTP_HX_REQUEST": "true"} if len(times) % 2 else {}
            response = client.get(url, **htmx)
            times.append((time.perf_counter() - start) * 1000)
        sql_times.append(timer.ms)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
    return times, sql_times


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workunits", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--charts", action="store_true", help="time to charts in Chromium instead")
    parser.add_argument("--loads", type=int, default=5, help="with --charts: loads of each page, each way")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.workunits < 1 or args.repeat < 1 or args.loads < 1:
        parser.error("--workunits, --repeat and --loads must be at least 1")
    if args.charts:
        return time_to_charts(args.loads, args.json)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from backend.models import Workunit

    if Workunit.objects.count() < args.workunits:
        call_command("seed_demo", workunits=args.workunits, hosts=20)
    spread_states()
    client = Client(HTTP_HOST="localhost")  # a host ALLOWED_HOSTS lists by default
    rows, every_time, every_sql = [], [], []
    for url in urls():
        times, sql_times = measure(client, url, args.repeat)
        every_time += times
        every_sql += sql_times
        rows.append(
            {
                "url": url,
                "median_ms": round(statistics.median(times), 1),
                "p95_ms": round(p95(times), 1),
                "sql_p95_ms": round(p95(sql_times), 1),
            }
        )
    summary = {
        "database": connection.vendor,
        "workunits": Workunit.objects.count(),
        "requests": len(every_time),
        "median_ms": round(statistics.median(every_time), 1),
        "p95_ms": round(p95(every_time), 1),
        "sql_p95_ms": round(p95(every_sql), 1),
        "load_average": round(os.getloadavg()[0], 2),
        "urls": rows,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    for row in rows:
        print(
            f"{row['p95_ms']:8.1f} ms p95 {row['median_ms']:8.1f} ms median "
            f"{row['sql_p95_ms']:7.1f} ms SQL p95  {row['url'][:80]}"
        )
    print(
        f"workunit list, {summary['workunits']:,} workunits on {summary['database']}: "
        f"p95 {summary['p95_ms']} ms (of which SQL p95 {summary['sql_p95_ms']} ms), "
        f"median {summary['median_ms']} ms over {summary['requests']} requests; "
        f"load average {summary['load_average']} on {os.cpu_count()} CPUs"
    )


# --- time to charts ---------------------------------------------------------------------------


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def build_site(workdir):
    """The pages to measure, [(name, path)], after filling the database (see the docstring)."""
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from backend.models import Workunit
    from scheduling.jobs import run_simulation
    from tests.factories import RunFactory
    from tests.web.busy_site import build_busy_site

    call_command("migrate", verbosity=0)
    site = build_busy_site(settings, workdir / "data")
    runs = []
    for policy in ("boinc7", "boinc5"):
        run = RunFactory(scenario=site.runs[0].scenario, policy=policy, duration=2 * 86400.0)
        if run_simulation(run.pk) != "done":
            raise SystemExit(f"lab run {run.pk} did not finish")
        runs.append(run)
    project = site.world.project
    wu = Workunit.objects.filter(project=project, results__isnull=False).order_by("id").first()
    return [
        ("lab compare", f"/lab/compare/?runs={runs[0].pk},{runs[1].pk}"),
        ("lab run", f"/lab/runs/{runs[0].pk}/"),
        ("status", f"/projects/{project.slug}/status/"),
        ("workunit", f"/projects/{project.slug}/workunits/{wu.pk}/"),
        ("world", f"/project/worlds/{site.world.pk}/"),
        ("world compare", f"/project/worlds/compare/?worlds={site.world.pk - 1},{site.world.pk}"),
    ], site.runs[0].scenario_id


# a comparison's table is there and every one of its charts drawn (those below the first screen
# are drawn while the page is idle, static/js/charts.js): the wall clock then (ms)
COMPARE_DRAWN = """() => {
  if (!document.querySelector("[data-testid=compare-table]")) return false;
  const charts = [...document.querySelectorAll("[data-figure]")];
  return charts.length > 0 && charts.every((div) => div.querySelector(".main-svg")) && Date.now();
}"""
COMPARE_TARGET_SECONDS = 2.0


def runs_to_charts(browser, server_url, scenario_id, env, loads, viewport):
    """Seconds from a new comparison's runs being done to its charts on the teacher's screen,
    ``loads`` times (see the module's docstring)."""
    from django.db import connection

    from scheduling.models import Run
    from tests.web.busy_site import STAFF

    # Playwright's sync API runs an event loop; the ORM reads the bench makes stay synchronous
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{server_url}/accounts/login/")
    page.fill("input[name=username]", STAFF[0])
    page.fill("input[name=password]", STAFF[1])
    page.click("form [type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    seconds = []
    for _ in range(loads):
        page.goto(f"{server_url}/lab/{scenario_id}/")
        for policy in ("boinc7", "boinc5"):
            page.check(f"input[name=policies][value={policy}]")
        page.fill("[data-testid=compare-form] input[name=duration]", "1d")
        page.click("[data-testid=compare-policies]")
        page.wait_for_url(re.compile(r"/lab/compare/\?runs=\d+,\d+$"))
        ids = [int(i) for i in page.url.split("runs=")[1].split(",")]
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", "--burst", "engine"],
            cwd=BASE,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while Run.objects.filter(pk__in=ids, status=Run.Status.DONE).count() < len(ids):
            if time.monotonic() > deadline or worker.poll() not in (None, 0):
                raise SystemExit(f"the comparison's runs {ids} did not finish")
            time.sleep(0.02)
        done = time.time()
        connection.close()
        drawn = page.wait_for_function(COMPARE_DRAWN, polling="raf", timeout=60_000).json_value()
        seconds.append(drawn / 1000 - done)
        worker.wait(timeout=120)
    context.close()
    return seconds


def load_times(page, url):
    """(ms to the charts in view, ms to every chart) of one load of ``url``, and its bytes."""
    response = page.goto(url, wait_until="commit")
    if response is None or response.status != 200:
        raise SystemExit(f"{url} answered {response and response.status}")
    in_view = page.wait_for_function(IN_VIEW_DRAWN, polling="raf", timeout=60_000).json_value()
    every = page.wait_for_function(ALL_DRAWN, polling="raf", timeout=60_000).json_value()
    page.wait_for_load_state("load")
    return in_view, every, page.evaluate(BYTES)


def time_to_charts(loads, as_json):
    """Measure the pages in Chromium; see the module's docstring."""
    from load import ProductionServer
    from playwright.sync_api import sync_playwright

    from boincweb import embedded_redis

    if not Path(CHROMIUM).exists():
        raise SystemExit(f"--charts needs Chromium at {CHROMIUM}")
    workdir = Path(tempfile.mkdtemp(prefix="boincweb-pages-"))
    redis = embedded_redis.start(workdir / "redis.sock")
    env = {"DATABASE_URL": f"sqlite:///{workdir / 'pages.sqlite3'}", "REDIS_URL": f"unix://{workdir / 'redis.sock'}"}
    os.environ.update(env)
    try:
        pages, scenario_id = build_site(workdir)
        from django.db import connection

        connection.close()
        before = uptime()
        rows = []
        with ProductionServer(2, env, workdir) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
            )
            viewport = {"width": 1400, "height": 1000}
            for name, path in pages:
                url = server.url + path
                cold, warm = [], []
                for _ in range(loads):
                    context = browser.new_context(viewport=viewport)
                    cold.append(load_times(context.new_page(), url))
                    context.close()
                context = browser.new_context(viewport=viewport)
                page = context.new_page()
                load_times(page, url)  # fills the cache
                for _ in range(loads):
                    warm.append(load_times(page, url))
                context.close()
                rows.append(
                    {
                        "page": name,
                        "path": path,
                        "charts": cold[0][2]["charts"],
                        "html_kB": round(cold[0][2]["html"] / 1000),
                        "scripts_kB": round(cold[0][2]["scripts"] / 1000),
                        "first_visit_html_s": round(statistics.median(t[2]["response_end"] for t in cold) / 1000, 2),
                        "reopen_html_s": round(statistics.median(t[2]["response_end"] for t in warm) / 1000, 2),
                        "first_visit_in_view_s": round(statistics.median(t[0] for t in cold) / 1000, 2),
                        "first_visit_all_s": round(statistics.median(t[1] for t in cold) / 1000, 2),
                        "reopen_in_view_s": round(statistics.median(t[0] for t in warm) / 1000, 2),
                        "reopen_all_s": round(statistics.median(t[1] for t in warm) / 1000, 2),
                    }
                )
            latency = runs_to_charts(browser, server.url, scenario_id, env, loads, viewport)
            browser.close()
        after = uptime()
    finally:
        embedded_redis.stop(redis)
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {
        "loads": loads,
        "pages": rows,
        "runs_done_to_charts_s": [round(t, 2) for t in latency],
        "uptime_before": before,
        "uptime_after": after,
    }
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(f"time to charts in Chromium, median of {loads} loads each way (target: < {TARGET_SECONDS} s)")
    print("(HTML: navigation start to the page's last byte, the server's part)")
    print(
        f"{'page':<14}{'charts':>7}{'HTML kB':>9}{'JS kB':>8}"
        "   first visit: HTML / in view / all   reopen: HTML / in view / all"
    )
    for row in rows:
        print(
            f"{row['page']:<14}{row['charts']:>7}{row['html_kB']:>9}{row['scripts_kB']:>8}"
            f"{row['first_visit_html_s']:>20.2f} s /{row['first_visit_in_view_s']:>5.2f} s /"
            f"{row['first_visit_all_s']:>5.2f} s"
            f"{row['reopen_html_s']:>14.2f} s /{row['reopen_in_view_s']:>5.2f} s /{row['reopen_all_s']:>5.2f} s"
        )
    print(
        f"a new comparison, its runs done to all its charts drawn: median {statistics.median(latency):.2f} s, "
        f"most {max(latency):.2f} s of {len(latency)} (target: < {COMPARE_TARGET_SECONDS} s)"
    )
    print(f"load average before: {before}")
    print(f"load average after:  {after}")


if __name__ == "__main__":
    main()
