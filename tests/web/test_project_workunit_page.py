import json
import math
from types import SimpleNamespace as Row

import pytest

from backend import charts
from backend.models import (
    AssimilateState,
    ErrorMask,
    FileDeleteState,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    ValidateState,
)
from backend.statemachine import (
    RESULT_MACHINE,
    WORKUNIT_MACHINE,
    drawing,
    path_taken,
    result_node,
    workunit_node,
)
from boincweb.figures import figure_script
from tests.factories import NOW
from tests.web.project_data import (  # noqa: F401
    app,
    busy_workunit,
    host,
    make_results,
    make_workunits,
    owner,
    versions,
)


def ev(field, old, new, time=0, result_id=None, actor="transitioner", reason=""):
    return Row(field=field, old=old, new=new, time=time, result_id=result_id, actor=actor, reason=reason)


@pytest.mark.parametrize(
    "state, node",
    [
        ((ServerState.INACTIVE, 0, 0), "INACTIVE"),
        ((ServerState.UNSENT, 0, 0), "UNSENT"),
        ((ServerState.IN_PROGRESS, 0, 0), "IN_PROGRESS"),
        ((ServerState.OVER, Outcome.INIT, 0), None),
        ((ServerState.OVER, Outcome.SUCCESS, ValidateState.INIT), "SUCCESS"),
        ((ServerState.OVER, Outcome.SUCCESS, ValidateState.INCONCLUSIVE), "INCONCLUSIVE"),
        ((ServerState.OVER, Outcome.SUCCESS, ValidateState.TOO_LATE), "TOO_LATE"),
        ((ServerState.OVER, Outcome.CLIENT_ERROR, ValidateState.INVALID), "CLIENT_ERROR"),
        ((ServerState.OVER, Outcome.DIDNT_NEED, 0), "DIDNT_NEED"),
    ],
)
def test_a_result_folds_into_one_node(state, node):
    keys = ("server_state", "outcome", "validate_state")
    assert result_node(dict(zip(keys, state))) == node


@pytest.mark.parametrize(
    "fields, node",
    [
        ({}, "ACTIVE"),
        ({"need_validate": 1}, "NEED_VALIDATE"),
        ({"error_mask": 16}, "ERROR"),
        ({"error_mask": 16, "assimilate_state": AssimilateState.READY}, "ASSIMILATE_READY"),
        ({"assimilate_state": AssimilateState.DONE}, "ASSIMILATED"),
        ({"assimilate_state": AssimilateState.DONE, "file_delete_state": FileDeleteState.READY}, "DELETE_READY"),
        ({"file_delete_state": FileDeleteState.DONE}, "FILES_DELETED"),
        ({"file_delete_state": FileDeleteState.ERROR}, "DELETE_ERROR"),
    ],
)
def test_a_workunit_folds_into_one_node(fields, node):
    assert workunit_node({**WORKUNIT_MACHINE.fields, **fields}) == node


def test_replaying_a_timed_out_result_skips_the_moment_without_an_outcome():
    events = [
        ev("server_state", ServerState.UNSENT, ServerState.IN_PROGRESS, 1),
        ev("server_state", ServerState.IN_PROGRESS, ServerState.OVER, 2),
        ev("outcome", Outcome.INIT, Outcome.NO_REPLY, 2),
        ev("outcome", Outcome.NO_REPLY, Outcome.SUCCESS, 3),
        ev("validate_state", ValidateState.INIT, ValidateState.VALID, 4),
        ev("file_delete_state", 0, 1, 5),
    ]
    assert path_taken(RESULT_MACHINE, events) == ["UNSENT", "IN_PROGRESS", "NO_REPLY", "SUCCESS", "VALID"]


def test_changes_made_together_are_one_step():
    events = [
        ev("need_validate", 0, 1, 1),
        ev("need_validate", 1, 0, 2, actor="validator"),
        ev("assimilate_state", AssimilateState.INIT, AssimilateState.READY, 2, actor="validator"),
    ]
    assert path_taken(WORKUNIT_MACHINE, events) == ["ACTIVE", "NEED_VALIDATE", "ASSIMILATE_READY"]


def test_replaying_starts_from_the_first_events_old_value():
    events = [ev("server_state", ServerState.INACTIVE, ServerState.UNSENT)]
    assert path_taken(RESULT_MACHINE, events) == ["INACTIVE", "UNSENT"]


def test_drawing_highlights_the_current_node_and_marks_the_steps_taken():
    picture = drawing(WORKUNIT_MACHINE, "ERROR", ["ACTIVE", "ERROR"])
    assert picture.current == "ERROR"
    assert picture.taken == [("ACTIVE", "ERROR")]
    visited = {b.name for b in picture.boxes if b.visited}
    assert visited == {"ACTIVE", "ERROR"}
    assert len(picture.arrows) == len(WORKUNIT_MACHINE.edges)


def test_drawing_adds_a_step_the_machine_does_not_draw_as_unexpected():
    picture = drawing(RESULT_MACHINE, "VALID", ["UNSENT", "VALID"])
    [extra] = [a for a in picture.arrows if not a.expected]
    assert (extra.source, extra.target, extra.taken) == ("UNSENT", "VALID", True)


def test_opposite_transitions_are_drawn_apart():
    picture = drawing(WORKUNIT_MACHINE, "ACTIVE", [])
    there = next(a for a in picture.arrows if (a.source, a.target) == ("ACTIVE", "NEED_VALIDATE"))
    back = next(a for a in picture.arrows if (a.source, a.target) == ("NEED_VALIDATE", "ACTIVE"))
    assert there.y1 != back.y1


def test_timeline_has_a_row_per_subject_with_a_marker_per_event():
    events = [
        ev("need_validate", 0, 1, NOW),
        ev("server_state", 2, 4, NOW + 5, result_id=7, actor="scheduler", reason="sent"),
    ]
    fig = charts.lifecycle_timeline(events, {7: "wu_7_0", 8: "wu_7_1"})
    assert [t.name for t in fig.data] == ["workunit", "wu_7_0"]
    assert fig.data[1].x[0].timestamp() == NOW + 5
    assert "UNSENT → IN_PROGRESS" in fig.data[1].text[0] and "scheduler: sent" in fig.data[1].text[0]
    assert list(fig.layout.yaxis.categoryarray) == ["wu_7_1", "wu_7_0", "workunit"]


def test_app_tasks_figure_stacks_unsent_cpu_and_gpu():
    apps = [Row(name="a", unsent=3, in_progress_cpu=2, in_progress_gpu=1)]
    fig = charts.app_tasks_figure(apps)
    assert [t.x[0] for t in fig.data] == [3, 2, 1]
    assert fig.layout.barmode == "stack"


def test_a_figure_script_cannot_be_closed_by_its_text_and_carries_nan_as_null():
    fig = charts.lifecycle_timeline([ev("outcome", 0, 1, NOW, reason="</script><b>")], {})
    fig.add_scatter(x=[1.0, math.nan], y=[0, 0])
    html = figure_script(fig, "timeline-figure")
    opening = '<script id="timeline-figure" type="application/json">'
    assert html.startswith(opening) and html.endswith("</script>")
    text = html[len(opening) : -len("</script>")]
    assert "</script>" not in text
    data = json.loads(text)["data"]
    assert data[0]["text"][0].endswith("</script><b>") and data[-1]["x"] == [1.0, None]


@pytest.mark.django_db
def test_workunit_page_shows_fields_results_machines_and_timeline(client, busy_workunit, django_assert_max_num_queries):
    with django_assert_max_num_queries(5):
        page = client.get(f"/project/workunits/{busy_workunit.id}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-machine="workunit" data-current="NEED_VALIDATE"' in html
    assert 'data-machine="result" data-current="VALID"' in html
    assert 'data-machine="result" data-current="IN_PROGRESS"' in html
    assert 'class="edge taken" data-edge="ACTIVE-NEED_VALIDATE"' in html
    assert 'data-edge="SUCCESS-VALID"' in html
    assert 'id="timeline-figure"' in html and "wu_00000_0" in html
    assert 'hx-trigger="every 2s"' in html


@pytest.mark.django_db
@pytest.mark.parametrize("htmx", [False, True], ids=["whole", "fragment"])
def test_workunit_page_queries_do_not_grow_with_results(
    client, app, host, versions, htmx, django_assert_max_num_queries
):
    wu = make_workunits(app, 1)[0]
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}

    def add(n, start):
        results = Result.objects.bulk_create(
            Result(
                project=wu.project,
                workunit=wu,
                app=app,
                name=f"r_{start + i}",
                host=host,
                user=host.owner,
                app_version=versions[i % 2],
                server_state=ServerState.IN_PROGRESS,
            )
            for i in range(n)
        )
        LifecycleEvent.objects.bulk_create(
            LifecycleEvent(
                project=wu.project,
                time=NOW + start + i,
                actor="x",
                workunit=wu,
                result=r,
                field="server_state",
                old=ServerState.UNSENT,
                new=ServerState.IN_PROGRESS,
            )
            for i, r in enumerate(results)
        )

    # the workunit, its results with their hosts and versions, their events, and the one query
    # of the links other apps give results (backend.views.RESULT_LINKS: a world's engine hosts)
    add(1, 0)
    with django_assert_max_num_queries(5):
        assert client.get(f"/project/workunits/{wu.id}/", **headers).status_code == 200
    add(30, 100)
    with django_assert_max_num_queries(5):
        page = client.get(f"/project/workunits/{wu.id}/", **headers)
    assert page.status_code == 200 and "r_129" in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("htmx", [False, True], ids=["whole", "fragment"])
def test_result_page_queries_do_not_grow_with_events(client, app, host, versions, htmx, django_assert_max_num_queries):
    wu = make_workunits(app, 1)[0]
    [result] = make_results(wu, [(ServerState.IN_PROGRESS, 0, 0)], host=host, app_version=versions[1])
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}

    def add(n, start):
        LifecycleEvent.objects.bulk_create(
            LifecycleEvent(
                project=wu.project,
                time=NOW + start + i,
                actor=f"actor_{start + i}",
                workunit=wu,
                result=result,
                field="outcome",
                old=0,
                new=0,
            )
            for i in range(n)
        )

    add(1, 0)
    with django_assert_max_num_queries(3):
        assert client.get(f"/project/results/{result.id}/", **headers).status_code == 200
    add(40, 100)
    with django_assert_max_num_queries(3):
        page = client.get(f"/project/results/{result.id}/", **headers)
    html = page.content.decode()
    assert page.status_code == 200 and "actor_139" in html and "einstein 100" in html
    assert html.lstrip().startswith('<div id="result-live"') == htmx


@pytest.mark.django_db
def test_workunit_fragment_polls_until_the_workunit_is_finished(client, app):
    wu = make_workunits(app, 1)[0]
    live = client.get(f"/project/workunits/{wu.id}/", HTTP_HX_REQUEST="true")
    assert live.status_code == 200
    assert live.content.decode().lstrip().startswith('<div id="wu-live"')
    wu.file_delete_state = FileDeleteState.DONE
    wu.assimilate_state = AssimilateState.DONE
    wu.save()
    done = client.get(f"/project/workunits/{wu.id}/", HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert "every 2s" not in done.content.decode() and "FILES_DELETED" in done.content.decode()


@pytest.mark.django_db
def test_unknown_workunit_and_result_are_404(client):
    assert client.get("/project/workunits/999999/").status_code == 404
    assert client.get("/project/results/999999/").status_code == 404


@pytest.mark.django_db
def test_result_page_shows_its_machine_and_events(client, busy_workunit, django_assert_max_num_queries):
    result = busy_workunit.results.get(name="wu_00000_0")
    with django_assert_max_num_queries(3):
        page = client.get(f"/project/results/{result.id}/")
    html = page.content.decode()
    assert 'data-machine="result" data-current="VALID"' in html
    assert 'data-edge="UNSENT-IN_PROGRESS"' in html and "taken" in html
    # an anonymous visitor sees the host by its number, not its owner's domain name
    assert "validator" in html and f"host {result.host_id}" in html and "owners-box" not in html
    fragment = client.get(f"/project/results/{result.id}/", HTTP_HX_REQUEST="true")
    assert fragment.content.decode().lstrip().startswith('<div id="result-live"')


@pytest.mark.django_db
def test_errored_workunit_shows_its_error_names(client, app):
    wu = make_workunits(app, 1, error_mask=ErrorMask.CANCELLED | ErrorMask.TOO_MANY_ERROR_RESULTS)[0]
    html = client.get(f"/project/workunits/{wu.id}/").content.decode()
    assert "TOO_MANY_ERROR_RESULTS, CANCELLED" in html
    assert 'data-current="ERROR"' in html
