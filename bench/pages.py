"""Response times of the workunit list page (target: p95 < 150 ms with 1 M workunits on PostgreSQL).

    DATABASE_URL=postgres://... python bench/pages.py [--workunits 1000000] [--repeat 20] [--json]

Tops the database up to ``--workunits`` workunits with ``manage.py seed_demo`` (bulk inserts),
spreads them over states so every filter has something to find (a fixed pattern on id: one in
97 cancelled, one in 13 waiting for validation, one in 3 assimilated with files deleted), then
fetches each list URL ``--repeat`` times through Django's test client (view, queries and template,
no network) and prints the median and 95th percentile per URL and over all of them, with the
part of each request spent in the database and the machine's load average (other processes on
the machine slow the template rendering, not the queries).
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import F, Max  # noqa: E402
from django.db.models.functions import Mod  # noqa: E402
from django.test import Client  # noqa: E402

from backend.keyset import encode_cursor  # noqa: E402
from backend.models import App, AssimilateState, ErrorMask, FileDeleteState, Workunit  # noqa: E402


def spread_states():
    """Give the seeded workunits a mix of states (idempotent: the same ids every time)."""

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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.workunits < 1 or args.repeat < 1:
        parser.error("--workunits and --repeat must be at least 1")
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


if __name__ == "__main__":
    main()
