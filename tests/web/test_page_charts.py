"""The project pages' figures are built without plotly's validation (backend/charts.py); these
tests hold each of them to it, so a wrong property name or value still fails here."""

from types import SimpleNamespace as Row

import plotly.graph_objects as go
import pytest

from backend import charts
from tests.factories import NOW


def event(field, old, new, time, result_id=None):
    return Row(field=field, old=old, new=new, time=time, result_id=result_id, actor="transitioner", reason="")


FIGURES = {
    "apps": lambda: charts.app_tasks_figure(
        [
            Row(name="a", unsent=3, in_progress_cpu=2, in_progress_gpu=1),
            Row(name="b", unsent=0, in_progress_cpu=0, in_progress_gpu=5),
        ]
    ),
    "timeline": lambda: charts.lifecycle_timeline(
        [event("need_validate", 0, 1, NOW), event("server_state", 2, 4, NOW + 5, result_id=7)],
        {7: "wu_7_0", 8: "wu_7_1"},
    ),
    "rac": lambda: charts.rac_figure([(NOW, 10.0, 10.0), (NOW + 86400, 10.9, 30.0)]),
    "history": lambda: [
        fig
        for _, fig in charts.queue_history_figures(
            [{"time": NOW + 10 * i, "results_ready_to_send": i} for i in range(40)]
        )
    ],
    "estimates": lambda: charts.runtime_estimates_figure(
        [
            ("app 100 x86_64-pc-linux-gnu (cuda)", [(NOW, 60.0, 30.0), (NOW + 600, 31.0, 30.0)], (NOW + 900, 30.0)),
            ("app 100 x86_64-pc-linux-gnu", [(NOW, 60.0, 90.0)], None),
        ]
    ),
}


@pytest.mark.parametrize("name", FIGURES)
def test_each_page_figure_passes_plotlys_validation(name):
    made = FIGURES[name]()
    for fig in made if isinstance(made, list) else [made]:
        checked = go.Figure(fig.to_dict())  # validates every property; raises on a bad one
        assert checked.to_plotly_json()["data"] == fig.to_plotly_json()["data"]
        assert fig.layout.title.text and fig.layout.height > 0


def test_a_wrong_property_would_fail_the_validation():
    with pytest.raises(ValueError):
        go.Figure({"data": [{"type": "scatter", "colour": "red"}], "layout": {}})
