"""The project pages' figures: pure functions from records to plotly Figures."""

from datetime import datetime, timezone

import plotly.graph_objects as go

from backend.models import state_label

CPU_COLOUR = "#1f5fbf"
GPU_COLOUR = "#1b7f3b"
UNSENT_COLOUR = "#9aa5b5"


def _base_layout(fig, title, height):
    fig.update_layout(
        title={"text": title, "x": 0, "font": {"size": 14}},
        height=height,
        margin={"l": 10, "r": 10, "t": 36, "b": 30},
        paper_bgcolor="white",
        plot_bgcolor="white",
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def app_tasks_figure(apps):
    """Stacked bars per app: unsent results, and results in progress on CPU and on GPU."""
    names = [app.name for app in apps]
    fig = go.Figure(
        [
            go.Bar(name="unsent", y=names, x=[a.unsent for a in apps], orientation="h",
                   marker_color=UNSENT_COLOUR),
            go.Bar(name="in progress (CPU)", y=names, x=[a.in_progress_cpu for a in apps],
                   orientation="h", marker_color=CPU_COLOUR),
            go.Bar(name="in progress (GPU)", y=names, x=[a.in_progress_gpu for a in apps],
                   orientation="h", marker_color=GPU_COLOUR),
        ]
    )
    fig.update_layout(barmode="stack")
    return _base_layout(fig, "Tasks by application", 120 + 40 * len(apps))


def _when(seconds):
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def event_subject(event, result_names):
    """The row of the timeline an event belongs on: its result, else its workunit."""
    if event.result_id:
        return result_names.get(event.result_id, f"result {event.result_id}")
    return "workunit"


def lifecycle_timeline(events, result_names):
    """One row per subject (the workunit, then each result), a marker per event in time order.

    ``events`` are LifecycleEvent-like records (time, actor, field, old, new, reason,
    result_id); ``result_names`` maps result ids to names for the row labels.
    """
    rows = {"workunit": []}
    for name in result_names.values():
        rows.setdefault(name, [])
    for event in events:
        rows.setdefault(event_subject(event, result_names), []).append(event)
    fig = go.Figure()
    for subject, subject_events in rows.items():
        if not subject_events:
            continue
        fig.add_trace(
            go.Scatter(
                name=subject,
                x=[_when(e.time) for e in subject_events],
                y=[subject] * len(subject_events),
                mode="lines+markers",
                marker={"size": 10},
                text=[
                    f"{e.field}: {state_label(e.field, e.old)} → {state_label(e.field, e.new)}"
                    f"<br>by {e.actor}{': ' + e.reason if e.reason else ''}"
                    for e in subject_events
                ],
                hovertemplate="%{text}<br>%{x}<extra>" + subject + "</extra>",
            )
        )
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(list(rows))))
    fig.update_layout(showlegend=False)
    return _base_layout(fig, "Lifecycle timeline", 140 + 36 * len(rows))


# The status page's small history charts: (id, title, [(sample field, line name, colour)]).
HISTORY_CHARTS = [
    ("history-results", "Results", [
        ("results_ready_to_send", "ready to send", UNSENT_COLOUR),
        ("results_in_progress", "in progress", CPU_COLOUR),
    ]),
    ("history-workunits", "Workunits waiting", [
        ("workunits_waiting_for_validation", "for validation", "#b36b00"),
        ("workunits_waiting_for_assimilation", "for assimilation", GPU_COLOUR),
        ("workunits_waiting_for_deletion", "for file deletion", "#7a4fb3"),
    ]),
    ("history-backlog", "Transitioner backlog (workunits)", [
        ("transitioner_backlog_workunits", "due", "#b3261e"),
    ]),
]


def queue_history_figures(samples):
    """Small line charts of the main queues over the samples (dicts of Unix ``time`` and the
    counts, oldest first), as [(id, figure)] in HISTORY_CHARTS' order."""
    times = [_when(sample["time"]) for sample in samples]
    # a few samples are points to see, an hour of them a line
    mode = "lines+markers" if len(samples) < 30 else "lines"
    figures = []
    for figure_id, title, lines in HISTORY_CHARTS:
        fig = go.Figure([
            go.Scatter(name=name, x=times, y=[sample.get(field, 0) for sample in samples],
                       mode=mode, line={"color": colour, "width": 2}, marker={"size": 5})
            for field, name, colour in lines
        ])
        fig.update_yaxes(rangemode="tozero")
        _base_layout(fig, title, 200)
        fig.update_layout(margin={"l": 10, "r": 10, "t": 30, "b": 20},
                          showlegend=len(lines) > 1)
        figures.append((figure_id, fig))
    return figures


def figure_json(fig):
    """A figure as JSON safe to put inside a <script> element."""
    return fig.to_json().replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
