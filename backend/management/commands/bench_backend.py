"""``manage.py bench_backend [--results N] [--json]``: the server pipeline's throughput.

Drives N results through the whole lifecycle, create -> send -> report -> validate ->
assimilate -> delete, on the configured database with real input and output files (in a
temporary data directory), and prints how long each daemon took. Workunits have a quorum of
two, so N results are N/2 workunits validated by comparing two outputs. The bench's workunits,
results and events are deleted afterwards; its two volunteers and hosts are kept for the next
run.
"""

import json
import tempfile
import time
from argparse import ArgumentParser
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.models import Q
from django.test.utils import override_settings

from backend.daemons import get_daemon, work_generator
from backend.daemons.scheduler import (
    HostInfo,
    ReportedFile,
    ReportedResult,
    SchedulerConfig,
    SchedulerRequest,
    handle_request,
)
from backend.models import (
    App,
    AppVersion,
    AssimilatedResult,
    AssimilateState,
    File,
    FileDeleteState,
    Host,
    HostAppVersion,
    LifecycleEvent,
    Project,
    Result,
    Workunit,
)

START = 1_900_000_000
NCPUS = 16
CHUNK = 1000
BATCH = 1000
ROUND = ["transitioner", "validator", "assimilator", "transitioner", "file_deleter"]
# Two hosts do all the work within one simulated day: no daily quota (reference/server.md
# §3.11), which would stop each at 500 × 16 jobs. The host app versions are still kept.
CONFIG = SchedulerConfig(daily_result_quota=0)

T = TypeVar("T")


class Command(BaseCommand):
    help = "Time N results through create, send, report, validate, assimilate and delete."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--results", type=int, default=10000)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, results: int, **options: Any) -> None:
        if results < 2 or results % 2:
            raise CommandError("--results must be an even number, at least 2", returncode=2)
        with (
            tempfile.TemporaryDirectory() as data_dir,
            override_settings(
                BOINCWEB_DATA_DIR=Path(data_dir),
                DOWNLOAD_DIR=Path(data_dir) / "download",
                UPLOAD_DIR=Path(data_dir) / "upload",
            ),
        ):
            figures = self.bench(results)
        if options["json"]:
            self.stdout.write(json.dumps(figures, sort_keys=True))
        else:
            for key, value in figures.items():
                self.stdout.write(f"{key}: {value}")

    def bench(self, n: int) -> dict[str, Any]:
        reclaim_deleted_rows()
        project = Project.demo()
        app = App.objects.create(
            project=project,
            name=f"bench_{time.time_ns()}",
            min_quorum=2,
            target_nresults=2,
            max_error_results=2,
            max_total_results=4,
            max_success_results=2,
            delay_bound=86400,
            unsent_target=0,
        )
        AppVersion.objects.create(project=project, app=app, version_num=1, flops=1e9)
        users = [get_user_model().objects.get_or_create(username=f"bench_volunteer_{i}")[0] for i in range(2)]
        hosts = [
            Host.objects.get_or_create(
                project=project, owner=user, domain_name=f"{user.username}_host", defaults={"p_ncpus": NCPUS}
            )[0]
            for user in users
        ]
        seconds: defaultdict[str, float] = defaultdict(float)
        clock = [START]

        def timed(name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            began = time.perf_counter()
            value = fn(*args, **kwargs)
            seconds[name] += time.perf_counter() - began
            return value

        def daemons_until_quiet() -> None:
            while True:
                clock[0] += 1
                work = sum(timed(name, drain, name, project, clock[0]) for name in ROUND)
                if not work:
                    return

        began = time.perf_counter()
        names = [f"{app.name}_wu_{i}" for i in range(n // 2)]
        for i in range(0, len(names), CHUNK):
            timed("work_generator", work_generator.create_work, app, names[i : i + CHUNK], now=clock[0])
        clock[0] += 1
        timed("transitioner", drain, "transitioner", project, clock[0])
        refresh_statistics()
        while True:
            clock[0] += 1
            sent = 0
            for host in hosts:
                reply = timed("scheduler", handle_request, request(host), project=project, now=clock[0], config=CONFIG)
                sent += len(reply.results)
                reports = [
                    ReportedResult(
                        job.name,
                        final_elapsed_time=3600,
                        final_cpu_time=3600,
                        output_files=[ReportedFile(job.output_files[0].name, data=job.wu_name.encode())],
                    )
                    for job in reply.results
                ]
                timed(
                    "scheduler",
                    handle_request,
                    request(host, reports),
                    project=project,
                    now=clock[0] + 1,
                    config=CONFIG,
                )
            if not sent:
                break
        daemons_until_quiet()
        elapsed = time.perf_counter() - began
        refresh_statistics()
        completed = Result.objects.filter(
            app=app,
            workunit__assimilate_state=AssimilateState.DONE,
            workunit__file_delete_state=FileDeleteState.DONE,
            file_delete_state=FileDeleteState.DONE,
        ).count()
        figures = {
            "results": n,
            "completed": completed,
            "seconds": round(elapsed, 3),
            "results_per_second": round(n / elapsed, 1),
            "per_daemon_seconds": {k: round(v, 3) for k, v in sorted(seconds.items())},
            "database": connection.vendor,
            "events": LifecycleEvent.objects.filter(workunit__app=app).count(),
        }
        remove(app)
        return figures


def reclaim_deleted_rows() -> None:
    """Let PostgreSQL reclaim the rows earlier runs deleted, as autovacuum would on a running
    project (it may be off, as on a test server), so that every run starts from the same state.
    VACUUM cannot run inside a transaction: skipped there."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        for model in (Workunit, Workunit.input_files.through, Result, File, LifecycleEvent, AssimilatedResult):
            cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


def refresh_statistics() -> None:
    """Let PostgreSQL's planner see the freshly inserted rows, as autovacuum would soon do on
    a running project; without it the first scheduler queries plan for empty tables."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for model in (Workunit, Result, File, LifecycleEvent):
                cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


def remove(app: App) -> None:
    """Delete the bench's rows table by table, without cascading through other apps' models."""
    wus = Workunit.objects.filter(app=app)
    wus.update(canonical_result=None)
    through = Workunit.input_files.through
    inputs = list(through.objects.filter(workunit__app=app).values_list("file_id", flat=True))
    events = LifecycleEvent.objects.filter(Q(workunit__app=app) | Q(result__app=app))
    for queryset in (
        events,
        AssimilatedResult.objects.filter(app=app),
        File.objects.filter(result__app=app),
        through.objects.filter(workunit__app=app),
        File.objects.filter(id__in=inputs),
        Result.objects.filter(app=app),
        wus,
        HostAppVersion.objects.filter(app_version__app=app),
        AppVersion.objects.filter(app=app),
        App.objects.filter(pk=app.pk),
    ):
        queryset._raw_delete(queryset.db)


def drain(name: str, project: Project, now: int) -> int:
    """Passes of daemon ``name`` until one finds nothing; returns the work done."""
    run_once, total = get_daemon(name), 0
    while True:
        done = run_once(project=project, now=now, batch_size=BATCH)
        total += done
        if not done:
            return total


def request(host: Host, reports: Sequence[ReportedResult] = ()) -> SchedulerRequest:
    return SchedulerRequest(
        hostid=host.pk,
        userid=host.owner_id,
        host_info=HostInfo(p_ncpus=NCPUS, p_fpops=1e9),
        cpu_req_secs=0 if reports else 1e9,
        cpu_req_instances=0 if reports else NCPUS,
        results=list(reports),
    )
