"""The project pages' charts as an admin reads them: no tick label cut off (every axis grows its
margin to fit), a legend on the lifecycle timeline, a world's times on its own clock, and a
status page that redraws no chart every 2 s and draws at most HISTORY_POINTS per line."""

from types import SimpleNamespace

import pytest

from backend import charts
from backend.models import ServerState
from backend.server_status import record_history
from tests.factories import NOW, demo_project
from tests.pages import parse

START = 1_800_000_000


def event(field, old, new, time, result_id=None, actor="transitioner", reason=""):
    return SimpleNamespace(field=field, old=old, new=new, time=time, result_id=result_id, actor=actor, reason=reason)


EVENTS = [
    event("need_validate", 0, 1, START + 3600),
    event("server_state", ServerState.UNSENT, ServerState.IN_PROGRESS, START + 47_280, result_id=7),
    event("transition_time", START + 3600, START + 90_000, START + 47_280),
]


def every_figure():
    apps = [SimpleNamespace(name="a_rather_long_application_name", unsent=3, in_progress_cpu=2, in_progress_gpu=1)]
    samples = [{"time": START + 10 * i, "results_ready_to_send": i} for i in range(3)]
    return [
        charts.app_tasks_figure(apps),
        charts.lifecycle_timeline(EVENTS, {7: "demo_0000138_0"}),
        charts.lifecycle_timeline(EVENTS, {7: "demo_0000138_0"}, START),
        *(fig for _, fig in charts.queue_history_figures(samples)),
        *(fig for _, fig in charts.queue_history_figures(samples, START)),
        charts.rac_figure([(START, 1.0, 2.0), (START + 86400, 3.0, 5.0)]),
        charts.runtime_estimates_figure([("app 1", [(START, 10.0, 12.0)], None)]),
        charts.rac_figure([(START, 1.0, 2.0), (START + 86400, 3.0, 5.0)], START),
        charts.runtime_estimates_figure([("app 1", [(START, 10.0, 12.0)], (START + 7200, 11.0))], START),
    ]


def test_every_axis_of_the_project_charts_grows_its_margin_to_fit_its_labels():
    for fig in every_figure():
        assert fig.layout.xaxis.automargin is True, fig.layout.title.text
        assert fig.layout.yaxis.automargin is True, fig.layout.title.text


def test_the_lifecycle_timeline_has_a_legend_of_its_rows():
    fig = charts.lifecycle_timeline(EVENTS, {7: "demo_0000138_0", 8: "demo_0000138_1"})
    assert fig.layout.showlegend is True
    assert [t.name for t in fig.data] == ["workunit", "demo_0000138_0"]


def test_a_worlds_credit_and_runtime_estimate_charts_are_drawn_on_its_clock():
    """A world's project runs on a clock that starts at its simulated t = 0: its charts read in
    hours since then, "day 2, 00:00" on hover, not the dates its Unix seconds would give."""
    rac = charts.rac_figure([(START, 1.0, 2.0), (START + 86400, 3.0, 5.0)], START)
    assert [list(t.x) for t in rac.data] == [[0.0, 24.0], [0.0, 24.0]]
    assert list(rac.data[0].text) == ["day 1, 00:00", "day 2, 00:00"]
    assert rac.layout.xaxis.title.text == "hours on the world's clock"
    series = [("app 1", [(START + 3600, 10.0, 12.0), (START + 47_280, 11.0, 11.5)], (START + 50_000, 11.2))]
    estimates = charts.runtime_estimates_figure(series, START)
    estimated, reported, now = estimates.data
    assert list(estimated.x) == list(reported.x) == [1.0, 47_280 / 3600] and list(now.x) == [50_000 / 3600]
    assert list(reported.text) == ["day 1, 01:00", "day 1, 13:08"]
    assert estimates.layout.xaxis.title.text == "hours on the world's clock"
    assert estimates.layout.xaxis.tickformat is None
    # on the wall clock (the demo and real projects) they stay dates
    assert charts.rac_figure([(START, 1.0, 2.0)]).data[0].x[0].year == 2027


def test_a_worlds_lifecycle_is_drawn_on_its_clock():
    fig = charts.lifecycle_timeline(EVENTS, {7: "demo_0000138_0"}, START)
    workunit, result = fig.data
    assert list(workunit.x) == [1.0, 47_280 / 3600]
    assert "day 1, 13:08" in result.text[0] and "UNSENT → IN_PROGRESS" in result.text[0]
    # a change of a time reads as the world's clock, not Unix seconds
    assert "transition_time: day 1, 01:00 → day 2, 01:00" in workunit.text[1]
    assert fig.layout.xaxis.title.text == "hours on the world's clock"


def test_a_wall_clock_lifecycle_keeps_dates():
    fig = charts.lifecycle_timeline(EVENTS, {7: "demo_0000138_0"})
    assert fig.data[0].x[0].timestamp() == START + 3600
    assert "transition_time: 2027-01-15 09:00:00 → 2027-01-16 09:00:00" in fig.data[0].text[1]


def test_history_lines_draw_at_most_their_points_keeping_the_first_and_newest():
    samples = [{"time": NOW + 10 * i, "results_ready_to_send": i} for i in range(360)]
    [(_, fig), *_] = charts.queue_history_figures(samples)
    ready = fig.data[0]
    assert len(ready.y) == charts.HISTORY_POINTS
    assert ready.y[0] == 0 and ready.y[-1] == 359
    assert list(ready.y) == sorted(ready.y)
    few = charts.thinned(samples[:5])
    assert [s["results_ready_to_send"] for s in few] == [0, 1, 2, 3, 4]


@pytest.mark.django_db
def test_the_status_panel_that_polls_every_2s_redraws_no_chart(client, redis_client):
    record_history(NOW, demo_project())
    record_history(NOW + 10, demo_project())
    panel = parse(client.get("/project/status/", HTTP_HX_REQUEST="true"))
    assert panel.find(attrs={"data-figure": True}) is None
    history = parse(client.get("/project/status/?panel=history", HTTP_HX_REQUEST="true"))
    assert {div["data-figure"] for div in history.find_all(attrs={"data-figure": True})} == {
        "apps-figure",
        "history-results",
        "history-workunits",
        "history-backlog",
    }
    assert history.find("script", id="apps-figure") is not None
