"""bench/load.py's fill: a month-old project's workunits, results and events in one statement per
chunk, consistent with each other as the daemons would have left them (PostgreSQL only)."""

import importlib.util
from pathlib import Path

import pytest
from django.test import Client

from backend.models import (
    AssimilateState,
    FileDeleteState,
    LifecycleEvent,
    Outcome,
    Project,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from backend.server_status import task_figures

SPEC = importlib.util.spec_from_file_location("bench_load", Path(__file__).resolve().parents[2] / "bench" / "load.py")
assert SPEC is not None and SPEC.loader is not None
load = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(load)


def test_state_bounds_put_the_in_flight_workunits_last_newest_unsent():
    bounds = load.state_bounds(1_000_000)
    assert bounds == [(5, 998_000), (4, 978_000), (3, 977_500), (2, 977_200), (1, 976_200)]
    # a small fill still has one workunit of each state
    assert [start for _, start in load.state_bounds(300)] == [299, 293, 292, 291, 290]


def test_percentile_is_the_nearest_rank():
    values = list(range(1, 101))
    assert [load.percentile(values, q) for q in (50, 95, 99, 100)] == [50, 95, 99, 100]
    assert load.percentile([7], 99) == 7


@pytest.mark.django_db(transaction=True)
def test_fill_writes_consistent_rows_once(postgres_only):
    assert load.fill(300, out=lambda line: None) == 300
    wus = Workunit.objects.filter(app__name=load.LOAD_APP)
    assert wus.count() == 300
    # two results each, three for one in 50 (its first failed)
    assert Result.objects.filter(workunit__in=wus).count() == 600 + 6
    done = wus.filter(assimilate_state=AssimilateState.DONE, file_delete_state=FileDeleteState.DONE)
    assert done.count() == 290
    for wu in done.select_related("canonical_result")[:40]:
        canonical = wu.canonical_result
        assert canonical.workunit_id == wu.id
        assert (canonical.server_state, canonical.outcome, canonical.validate_state) == (
            ServerState.OVER,
            Outcome.SUCCESS,
            ValidateState.VALID,
        )
        assert canonical.received_time > canonical.sent_time > wu.create_time
    failed = Result.objects.filter(outcome=Outcome.CLIENT_ERROR)
    assert failed.count() == 6 and not failed.filter(validate_state=ValidateState.VALID).exists()
    unsent = Result.objects.filter(server_state=ServerState.UNSENT)
    assert unsent.count() == 2 and not unsent.filter(host__isnull=False).exists()
    running = Result.objects.filter(server_state=ServerState.IN_PROGRESS)
    assert running.count() == 12 and not running.filter(host__isnull=True).exists()
    # every sent result's sending is an event, and every finished one's report
    assert (
        LifecycleEvent.objects.filter(field="server_state", new=ServerState.IN_PROGRESS).count()
        == Result.objects.filter(server_state__gte=ServerState.IN_PROGRESS).count()
    )
    assert LifecycleEvent.objects.filter(field="file_delete_state", new=2).count() == 290
    figures = task_figures(int(wus.order_by("-create_time")[0].create_time) + 60, Project.demo())
    assert (figures["results_ready_to_send"], figures["results_in_progress"]) == (2, 12)
    assert figures["workunits_waiting_for_validation"] == 1
    assert figures["workunits_waiting_for_assimilation"] == 1
    assert figures["workunits_waiting_for_deletion"] == 1
    client = Client()
    for wu in [wus.order_by("id").first(), wus.order_by("-id").first()]:
        assert client.get(f"/project/workunits/{wu.id}/").status_code == 200
    assert load.fill(300, out=lambda line: None) == 0  # already there: nothing added
    assert Workunit.objects.count() == 300
