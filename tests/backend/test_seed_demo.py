"""seed_demo: the bulk path and PostgreSQL's INSERT ... SELECT path write the same rows."""

import io
import random

import pytest
from django.core.management import call_command
from django.db import connection

from backend.management.commands import seed_demo
from backend.models import App, Result, ServerState, Workunit
from tests.factories import NOW, demo_project

pytestmark = pytest.mark.django_db

SAME = {"id", "name", "mod_time", "workunit_id", "random"}


def rows(model, app):
    return list(model.objects.filter(app=app).order_by("id").values())


def without(row, keys):
    return {k: v for k, v in row.items() if k not in keys}


def test_both_paths_make_the_same_workunits_and_results():
    if connection.vendor != "postgresql":
        pytest.skip(f"the INSERT ... SELECT path uses PostgreSQL's generate_series; this run is on {connection.vendor}")
    app = App.objects.create(
        project=demo_project(),
        name="demo_app",
        min_quorum=2,
        target_nresults=3,
        max_success_results=3,
        rsc_fpops_est=7e12,
        delay_bound=5000,
    )
    rng = random.Random(1)
    seed_demo.create_chunk(app, 0, 3, NOW, rng)
    seed_demo.create_chunk_sql(app, 3, 3, NOW, rng)
    seed_demo.create_chunk_sql(app, 10**7 - 1, 2, NOW, rng)
    wus = rows(Workunit, app)
    assert [w["name"] for w in wus] == [seed_demo.demo_name(i) for i in range(6)] + ["demo_9999999", "demo_10000000"]
    assert all(without(w, SAME) == without(wus[0], SAME) for w in wus)
    assert (wus[0]["rsc_fpops_est"], wus[0]["delay_bound"], wus[0]["target_nresults"], wus[0]["transition_time"]) == (
        7e12,
        5000,
        3,
        NOW,
    )
    results = rows(Result, app)
    assert [(r["workunit_id"], r["name"]) for r in results] == [
        (w["id"], f"{w['name']}_{k}") for w in wus for k in range(3)
    ]
    assert all(without(r, SAME) == without(results[0], SAME) for r in results)
    assert results[0]["server_state"] == ServerState.UNSENT
    assert all(0 <= r["random"] < 2**31 for r in results)
    assert len({r["random"] for r in results}) > 1


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_the_command_takes_its_databases_path_and_adds_only_what_is_missing(vendor):
    if connection.vendor != vendor:
        pytest.skip(f"the {vendor} path needs {vendor}; this run is on {connection.vendor}")
    call_command("seed_demo", "--workunits", "7", "--hosts", "2", stdout=io.StringIO())
    call_command("seed_demo", "--workunits", "9", "--hosts", "2", stdout=io.StringIO())
    app = App.objects.get(name="example_app")
    assert Workunit.objects.filter(app=app).count() == 9
    assert Result.objects.filter(app=app).count() == 9 * app.target_nresults
    assert sorted(Workunit.objects.values_list("name", flat=True)) == [seed_demo.demo_name(i) for i in range(9)]
