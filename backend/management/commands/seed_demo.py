"""``manage.py seed_demo [--workunits N]``: demo data for ``make run`` and the page benchmarks.

Creates (once) a demo volunteer, a staff login for the demo, an app with a CPU and a GPU
version and jobs sized for the live demo (``DEMO_APP_SIZES``), a few hosts, and ``--workunits``
workunits with their first results (as the transitioner makes them, reference/server.md §3.2
step 6). Running it again adds only what is missing.

The rows are written in chunks: on PostgreSQL each chunk is one ``INSERT ... SELECT`` over
``generate_series`` that makes the workunits and, through ``RETURNING``, their results, so no
row passes through Python; elsewhere with ``bulk_create``. Both paths take every column's value
from the same model instances (``demo_workunit``, ``demo_result``), so they write the same rows,
except each result's ``random``, drawn from the seed by Python or by PostgreSQL's ``random()``.
"""

import random
import time
from argparse import ArgumentParser
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.db.models import Model

from backend.models import App, AppVersion, GpuType, Host, Project, Result, ServerState, Workunit

CHUNK = 5000
# Jobs sized for watching (the live demo, world.live): 10 s on a 3 GFLOPS CPU, and a deadline of
# ten minutes, so a lost job times out and is sent again while someone looks on.
DEMO_APP_SIZES = {"rsc_fpops_est": 30e9, "rsc_fpops_bound": 300e9, "delay_bound": 600}


class Command(BaseCommand):
    help = "Load demo data: an app, hosts, and workunits with their first results."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--workunits", type=int, default=300)
        parser.add_argument("--hosts", type=int, default=5)
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args: Any, workunits: int, hosts: int, seed: int, **options: Any) -> None:
        if workunits < 0 or hosts < 0:
            raise CommandError("--workunits and --hosts must not be negative", returncode=2)
        rng = random.Random(seed)
        now = int(time.time())
        User = get_user_model()
        volunteer, _ = User.objects.get_or_create(username="volunteer")
        if settings.DEBUG and not User.objects.filter(username="admin").exists():
            User.objects.create_superuser("admin", "admin@example.org", "boincweb")
            self.stdout.write("created the staff login admin / boincweb (DEBUG only)")
        project = Project.demo()
        app, _ = App.objects.get_or_create(
            project=project,
            name="example_app",
            defaults={"user_friendly_name": "Example application", "create_time": now, **DEMO_APP_SIZES},
        )
        AppVersion.objects.get_or_create(
            project=project,
            app=app,
            version_num=100,
            platform="x86_64-pc-linux-gnu",
            plan_class="",
            defaults={"flops": 1e9},
        )
        AppVersion.objects.get_or_create(
            project=project,
            app=app,
            version_num=100,
            platform="x86_64-pc-linux-gnu",
            plan_class="cuda",
            defaults={"flops": 20e9, "avg_ncpus": 0.5, "gpu_type": GpuType.NVIDIA, "gpu_usage": 1},
        )
        missing_hosts = hosts - Host.objects.filter(project=project, owner=volunteer).count()
        Host.objects.bulk_create(
            Host(
                project=project,
                owner=volunteer,
                domain_name=f"volunteer-host-{i}",
                create_time=now,
                p_ncpus=rng.choice([2, 4, 8]),
                p_fpops=rng.uniform(1e9, 4e9),
                gpu_type=GpuType.NVIDIA if i % 2 else GpuType.NONE,
                gpu_count=1 if i % 2 else 0,
                gpu_peak_flops=100e9 if i % 2 else 0.0,
                on_frac=round(rng.uniform(0.5, 1.0), 2),
                active_frac=round(rng.uniform(0.7, 1.0), 2),
            )
            for i in range(max(missing_hosts, 0))
        )
        have = Workunit.objects.filter(app=app).count()
        made = 0
        create = create_chunk_sql if connection.vendor == "postgresql" else create_chunk
        if create is create_chunk_sql:
            with connection.cursor() as cursor:
                cursor.execute("SELECT setseed(%s)", [rng.uniform(-1, 1)])
        while have + made < workunits:
            n = min(CHUNK, workunits - have - made)
            create(app, have + made, n, now, rng)
            made += n
        self.stdout.write(
            f"demo data: {Workunit.objects.filter(app=app).count()} workunits, "
            f"{Host.objects.count()} hosts ({made} workunits added)"
        )


def demo_name(i: int) -> str:
    return f"demo_{i:07d}"


def demo_workunit(app: App, name: str, now: int) -> Workunit:
    return Workunit(
        project_id=app.project_id,
        app=app,
        name=name,
        create_time=now,
        rsc_fpops_est=app.rsc_fpops_est,
        rsc_fpops_bound=app.rsc_fpops_bound,
        delay_bound=app.delay_bound,
        min_quorum=app.min_quorum,
        target_nresults=app.target_nresults,
        max_error_results=app.max_error_results,
        max_total_results=app.max_total_results,
        max_success_results=app.max_success_results,
        transition_time=now,
    )


def demo_result(wu: Workunit, app: App, name: str, now: int, random: int) -> Result:
    return Result(
        project_id=app.project_id,
        workunit=wu,
        app=app,
        name=name,
        create_time=now,
        server_state=ServerState.UNSENT,
        random=random,
    )


@transaction.atomic
def create_chunk(app: App, start: int, n: int, now: int, rng: random.Random) -> None:
    """Workunits ``start`` .. ``start + n - 1`` and their results, with bulk_create."""
    wus = Workunit.objects.bulk_create(demo_workunit(app, demo_name(start + i), now) for i in range(n))
    Result.objects.bulk_create(
        demo_result(wu, app, f"{wu.name}_{k}", now, rng.randrange(2**31))
        for wu in wus
        for k in range(app.target_nresults)
    )


def columns_of(instance: Model, computed: Mapping[str, str]) -> tuple[str, str, list[Any]]:
    """(column names, SQL values, parameters) of every column of ``instance`` but its id:
    a column named in ``computed`` gets that SQL expression, the others a parameter holding
    the value the instance would save."""
    model = type(instance)
    names, values, params = [], [], []
    for f in model._meta.concrete_fields:
        if f.primary_key:
            continue
        names.append(connection.ops.quote_name(f.column))
        if f.column in computed:
            values.append(computed[f.column])
        else:
            values.append("%s")
            params.append(f.get_db_prep_save(f.pre_save(instance, True), connection))
    return ", ".join(names), ", ".join(values), params


def create_chunk_sql(app: App, start: int, n: int, now: int, rng: random.Random) -> None:
    """The same rows as ``create_chunk``, in one INSERT ... SELECT over generate_series
    (PostgreSQL); each result's ``random`` comes from PostgreSQL's seeded random()."""
    quote = connection.ops.quote_name
    wu_table, result_table = quote(Workunit._meta.db_table), quote(Result._meta.db_table)
    # demo_name: at least seven digits, zero-padded
    wu_names, wu_values, wu_params = columns_of(
        demo_workunit(app, "", now), {"name": "'demo_' || lpad(i::text, greatest(7, length(i::text)), '0')"}
    )
    result_names, result_values, result_params = columns_of(
        demo_result(Workunit(pk=0), app, "", now, 0),
        {"workunit_id": "wus.id", "name": "wus.name || '_' || k", "random": "floor(random() * 2147483648)::integer"},
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH wus AS (INSERT INTO {wu_table} ({wu_names}) SELECT {wu_values} "
            f"FROM generate_series(%s, %s) AS i ORDER BY i RETURNING id, name) "
            f"INSERT INTO {result_table} ({result_names}) SELECT {result_values} "
            f"FROM wus CROSS JOIN generate_series(0, %s) AS k ORDER BY wus.id, k",
            [*wu_params, start, start + n - 1, *result_params, app.target_nresults - 1],
        )
