"""The project pages' figures: pure functions from records to plotly Figures."""

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

import plotly.graph_objects as go

from backend.models import INT_MAX, LifecycleEvent, state_label
from boincweb.human import sim_time

CPU_COLOUR = "#1f5fbf"
GPU_COLOUR = "#1b7f3b"
UNSENT_COLOUR = "#9aa5b5"


def _layout(title: str, height: int, **more: Any) -> dict[str, Any]:
    """A figure's layout. It names no plotly template: plotly.py's default one is 6 KB of JSON
    in every figure and a deep copy per figure, and these figures set their own colours.

    The margins are small, and every axis grows its side of them to fit its tick labels and
    title (``automargin``), so a long result name or a date is never cut off."""
    axes = {name: {"automargin": True, **more.pop(name, {})} for name in ("xaxis", "yaxis")}
    return {
        "template": {},
        "title": {"text": title, "x": 0, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 36, "b": 30},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "legend": {"orientation": "h", "y": -0.2},
        **axes,
        **more,
    }


def _figure(data: Sequence[Mapping[str, Any]], layout: Mapping[str, Any]) -> go.Figure:
    """A Figure of trace dicts and a layout dict, built without plotly's validation of every
    property, which costs a page tens of milliseconds per figure; tests/web check that each
    figure's dict passes that validation."""
    return go.Figure(data=data, layout=layout, _validate=False)


class AppTaskCounts(Protocol):
    """What app_tasks_figure reads of an app: a server_status.AppTasks, or a record alike."""

    @property
    def name(self) -> str: ...

    @property
    def unsent(self) -> int: ...

    @property
    def in_progress_cpu(self) -> int: ...

    @property
    def in_progress_gpu(self) -> int: ...


def app_tasks_figure(apps: Sequence[AppTaskCounts]) -> go.Figure:
    """Stacked bars per app: unsent results, and results in progress on CPU and on GPU."""
    names = [app.name for app in apps]
    bars = [
        ("unsent", "unsent", UNSENT_COLOUR),
        ("in progress (CPU)", "in_progress_cpu", CPU_COLOUR),
        ("in progress (GPU)", "in_progress_gpu", GPU_COLOUR),
    ]
    return _figure(
        [
            {
                "type": "bar",
                "name": name,
                "y": names,
                "x": [getattr(a, field) for a in apps],
                "orientation": "h",
                "marker": {"color": colour},
            }
            for name, field, colour in bars
        ],
        _layout("Tasks by application", 120 + 40 * len(apps), barmode="stack"),
    )


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _clock(times: Sequence[float], origin: int | None) -> tuple[list[Any], dict[str, Any], list[str]]:
    """Times (Unix seconds) as a chart's x values, its x axis and the hover text of each: dates
    on the wall clock (``origin`` None), whose hover shows the date plotly puts on the axis, or
    hours on a world's clock since its start (``origin``, Unix seconds at simulated t = 0), read
    as "day 1, 13:08" on hover."""
    if origin is None:
        return [_when(t) for t in times], {}, [""] * len(times)
    axis = {"title": {"text": "hours on the world's clock"}, "rangemode": "tozero"}
    return [(t - origin) / 3600 for t in times], axis, [sim_time(t - origin) for t in times]


def event_subject(event: LifecycleEvent, result_names: Mapping[int, str]) -> str:
    """The row of the timeline an event belongs on: its result, else its workunit."""
    if event.result_id:
        return result_names.get(event.result_id, f"result {event.result_id}")
    return "workunit"


def lifecycle_timeline(
    events: Iterable[LifecycleEvent], result_names: Mapping[int, str], origin: int | None = None
) -> go.Figure:
    """One row per subject (the workunit, then each result), a marker per event in time order,
    with a legend naming each row's colour.

    ``events`` are LifecycleEvent-like records (time, actor, field, old, new, reason,
    result_id); ``result_names`` maps result ids to names for the row labels; ``origin`` is a
    world's start when the project runs on its clock (``_clock``).
    """
    rows: dict[str, list[LifecycleEvent]] = {"workunit": []}
    for name in result_names.values():
        rows.setdefault(name, [])
    for event in events:
        rows.setdefault(event_subject(event, result_names), []).append(event)
    traces = []
    xaxis: dict[str, Any] = {}
    for subject, subject_events in rows.items():
        if not subject_events:
            continue
        x, xaxis, when = _clock([e.time for e in subject_events], origin)
        traces.append(
            {
                "type": "scatter",
                "name": subject,
                "x": x,
                "y": [subject] * len(subject_events),
                "mode": "lines+markers",
                "marker": {"size": 10},
                "text": [
                    f"{_change(e, origin)}<br>by {e.actor}{': ' + e.reason if e.reason else ''}"
                    + (f"<br>{at}" if at else "")
                    for e, at in zip(subject_events, when, strict=True)
                ],
                "hovertemplate": "%{text}"
                + ("" if origin is not None else "<br>%{x}")
                + "<extra>"
                + subject
                + "</extra>",
            }
        )
    # the legend under the plot takes a row per few subjects: the figure grows with them
    return _figure(
        traces,
        _layout(
            "Lifecycle timeline",
            180 + 36 * len(rows) + 12 * len(traces),
            showlegend=True,
            legend={"orientation": "h", "yanchor": "top", "y": -0.25},
            xaxis=xaxis,
            yaxis={"categoryorder": "array", "categoryarray": list(reversed(list(rows)))},
        ),
    )


def _time_label(seconds: int | None, origin: int | None) -> str:
    if not seconds:
        return "–"
    if seconds >= INT_MAX:
        return "never"
    return sim_time(seconds - origin) if origin is not None else _when(seconds).strftime("%Y-%m-%d %H:%M:%S")


def _change(event: LifecycleEvent, origin: int | None) -> str:
    """A change as "server_state: UNSENT → IN_PROGRESS"; a change of a time shows the times as
    dates, or on the world's clock when there is one, never as Unix seconds."""
    if event.field.endswith(("_time", "deadline")):
        old, new = (_time_label(v, origin) for v in (event.old, event.new))
    else:
        old, new = state_label(event.field, event.old), state_label(event.field, event.new)
    return f"{event.field}: {old} → {new}"


# The status page's small history charts: (id, title, [(sample field, line name, colour)]).
HISTORY_CHARTS = [
    (
        "history-results",
        "Results",
        [
            ("results_ready_to_send", "ready to send", UNSENT_COLOUR),
            ("results_in_progress", "in progress", CPU_COLOUR),
        ],
    ),
    (
        "history-workunits",
        "Workunits waiting",
        [
            ("workunits_waiting_for_validation", "for validation", "#b36b00"),
            ("workunits_waiting_for_assimilation", "for assimilation", GPU_COLOUR),
            ("workunits_waiting_for_deletion", "for file deletion", "#7a4fb3"),
        ],
    ),
    (
        "history-backlog",
        "Transitioner backlog (workunits)",
        [
            ("transitioner_backlog_workunits", "due", "#b3261e"),
        ],
    ),
]


# Points a history line draws at most: an hour of samples is 360, more than a small chart shows.
HISTORY_POINTS = 120


def thinned(samples: Sequence[Mapping[str, float]], limit: int = HISTORY_POINTS) -> list[Mapping[str, float]]:
    """At most ``limit`` of ``samples``, evenly spaced, the first and the newest always kept."""
    if len(samples) <= limit:
        return list(samples)
    step = (len(samples) - 1) / (limit - 1)
    return [samples[round(i * step)] for i in range(limit)]


def queue_history_figures(
    samples: Sequence[Mapping[str, float]], origin: int | None = None
) -> list[tuple[str, go.Figure]]:
    """Small line charts of the main queues over the samples (dicts of Unix ``time`` and the
    counts, oldest first), as [(id, figure)] in HISTORY_CHARTS' order; at most HISTORY_POINTS
    samples a line. ``origin`` is a world's start when the project runs on its clock."""
    samples = thinned(samples)
    times, xaxis, _ = _clock([sample["time"] for sample in samples], origin)
    # a few samples are points to see, an hour of them a line
    mode = "lines+markers" if len(samples) < 30 else "lines"
    figures: list[tuple[str, go.Figure]] = []
    for figure_id, title, lines in HISTORY_CHARTS:
        traces = [
            {
                "type": "scatter",
                "name": name,
                "x": times,
                "y": [sample.get(field, 0) for sample in samples],
                "mode": mode,
                "line": {"color": colour, "width": 2},
                "marker": {"size": 5},
            }
            for field, name, colour in lines
        ]
        layout = _layout(
            title,
            200,
            xaxis=xaxis,
            yaxis={"rangemode": "tozero"},
            margin={"l": 10, "r": 10, "t": 30, "b": 20},
            showlegend=len(lines) > 1,
        )
        figures.append((figure_id, _figure(traces, layout)))
    return figures


def runtime_estimates_figure(
    series: Sequence[tuple[str, Sequence[tuple[float, float, float]], tuple[float, float] | None]],
    origin: int | None = None,
) -> go.Figure:
    """Per app version of a host: the scheduler's runtime estimate of each job when it was
    sent and the runtime the host reported, by the time sent. ``series`` is a list of (label,
    [(sent_time, estimated seconds, reported seconds)], now), oldest first; the estimates come
    from the host app version's elapsed-time average once it has enough samples
    (backend.daemons.sched_version), so the two lines meet. ``now``, when not None, is
    ``(time, seconds)``: the estimate the host's average gives the version's next job, drawn
    as an open diamond, so a version no longer sent (another one is faster on the host)
    shows where its estimate went. Times are on the project's clock (``origin``, as _clock)."""
    palette = [CPU_COLOUR, GPU_COLOUR, "#b35c00", "#7a3fb0"]
    traces: list[dict[str, Any]] = []
    for i, (label, points, now) in enumerate(series):
        colour = palette[i % len(palette)]
        times, xaxis, when = _clock([t for t, _, _ in points], origin)
        hover = {"text": when, "hovertemplate": "%{text}: %{y:,.0f} s<extra>%{fullData.name}</extra>"} if origin else {}
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{label}: estimated",
                "x": times,
                "y": [est for _, est, _ in points],
                "line": {"color": colour, "width": 2, "dash": "dot"},
                "marker": {"size": 5},
                **hover,
            }
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{label}: reported",
                "x": times,
                "y": [got for _, _, got in points],
                "marker": {"color": colour, "size": 7},
                **hover,
            }
        )
        if now is not None:
            now_x, _axis, now_when = _clock([now[0]], origin)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{label}: estimated now",
                    "x": now_x,
                    "y": [now[1]],
                    **({"text": now_when, "hovertemplate": hover["hovertemplate"]} if origin else {}),
                    "marker": {"color": colour, "size": 11, "symbol": "diamond-open", "line": {"width": 2}},
                }
            )
    # the legend has a row or two per version under the plot: the figure grows with them
    return _figure(
        traces,
        _layout(
            "Runtime estimates and reported runtimes",
            240 + 45 * len(series),
            yaxis={"title": {"text": "seconds"}, "rangemode": "tozero", "automargin": True},
            xaxis={"automargin": True, **(xaxis if origin is not None else {"tickformat": "%d %b %H:%M"})},
            legend={"orientation": "h", "yanchor": "top", "y": -0.12},
        ),
    )


def rac_figure(history: Sequence[tuple[float, float, float]], origin: int | None = None) -> go.Figure:
    """A user's or team's recent average credit (and total credit, on its own axis) over time,
    from CreditHistory rows ``(expavg_time, expavg_credit, total_credit)`` in time order, on the
    project's clock (``origin``, as _clock)."""
    when, xaxis, clock = _clock([t for t, _, _ in history], origin)
    hover = {"text": clock, "hovertemplate": "%{text}: %{y:,.1f}<extra>%{fullData.name}</extra>"} if origin else {}
    return _figure(
        [
            {
                "type": "scatter",
                "name": "recent average credit",
                "x": when,
                "y": [rac for _, rac, _ in history],
                "mode": "lines+markers",
                "line": {"color": CPU_COLOUR},
                **hover,
            },
            {
                "type": "scatter",
                "name": "total credit",
                "x": when,
                "y": [total for _, _, total in history],
                "mode": "lines",
                "yaxis": "y2",
                "line": {"color": UNSENT_COLOUR, "dash": "dot"},
                **hover,
            },
        ],
        _layout(
            "Recent average credit",
            300,
            xaxis=xaxis,
            yaxis={"title": {"text": "credit per day"}, "rangemode": "tozero", "automargin": True},
            yaxis2={
                "title": {"text": "total"},
                "overlaying": "y",
                "side": "right",
                "rangemode": "tozero",
                "automargin": True,
            },
        ),
    )
