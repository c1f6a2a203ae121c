"""A world's charts: pure functions from its samples to plotly Figures, and the words of a
comparison.

A sample is a ``world.simulation.Sample`` or a ``WorldSample`` row: anything with the Sample's
attributes (``t`` in simulated seconds, result counts by server state and outcome, and running
totals of RPCs by outcome, credit and input bytes downloaded). The time axis is in minutes for
a world younger than two hours (a live demo), else in hours.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative

from boincweb.human import data_size, duration, number, sim_time

MINUTE = 60.0
HOUR = 3600.0
PALETTE = qualitative.D3
# server_state / outcome bands of the results chart: (attribute, legend name, colour)
RESULT_BANDS = (
    ("unsent", "unsent", "#9aa5b5"),
    ("in_progress", "in progress", "#1f5fbf"),
    ("success", "over: success", "#1b7f3b"),
    ("client_error", "over: client error", "#c0392b"),
    ("no_reply", "over: no reply", "#e67e22"),
    ("other_outcome", "over: other outcome", "#8e44ad"),
)
RPC_BANDS = (
    ("rpcs_with_work", "asked and got work", "#1b7f3b"),
    ("rpcs_without_work", "asked and got none", "#c0392b"),
    ("rpcs_report_only", "only reported", "#9aa5b5"),
)


def time_axis(samples: Sequence[Any]) -> tuple[float, str]:
    """(divisor, axis title): minutes for under two hours of samples, else hours."""
    span = samples[-1].t if samples else 0.0
    return (MINUTE, "simulated minutes") if span < 2 * HOUR else (HOUR, "simulated hours")


def _xs(samples: Sequence[Any], divisor: float) -> list[float]:
    return [round(s.t / divisor, 4) for s in samples]


def _layout(fig: go.Figure, title: str, axis_title: str, y_title: str, height: int = 280) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0, "font": {"size": 14}},
        height=height,
        margin={"l": 50, "r": 10, "t": 36, "b": 40},
        paper_bgcolor="white",
        plot_bgcolor="white",
        legend={"orientation": "h", "y": -0.3},
        xaxis={"title": {"text": axis_title}, "gridcolor": "#eee"},
        yaxis={"title": {"text": y_title}, "gridcolor": "#eee", "rangemode": "tozero"},
    )
    return fig


def results_by_state(samples: Sequence[Any]) -> go.Figure:
    """Stacked areas: the world's results unsent, in progress, and over by outcome."""
    divisor, axis = time_axis(samples)
    x = _xs(samples, divisor)
    fig = go.Figure(
        [
            go.Scatter(
                x=x,
                y=[getattr(s, name) for s in samples],
                name=label,
                mode="lines",
                stackgroup="results",
                line={"width": 0.5, "color": colour},
            )
            for name, label, colour in RESULT_BANDS
        ]
    )
    return _layout(fig, "Results by server state", axis, "results")


def differences(values: Iterable[float]) -> list[float]:
    """Per-interval increases of a running total (the first interval counts from 0)."""
    out: list[float] = []
    previous: float = 0
    for value in values:
        out.append(value - previous)
        previous = value
    return out


def rpcs(samples: Sequence[Any]) -> go.Figure:
    """Stacked bars: scheduler RPCs in each interval between samples, by outcome."""
    divisor, axis = time_axis(samples)
    x = _xs(samples, divisor)
    fig = go.Figure(
        [
            go.Bar(x=x, y=differences([getattr(s, name) for s in samples]), name=label, marker_color=colour)
            for name, label, colour in RPC_BANDS
        ]
    )
    fig.update_layout(barmode="stack", bargap=0)
    return _layout(fig, "Scheduler RPCs and their outcomes", axis, "RPCs per interval")


def _line(samples: Sequence[Any], value: Callable[[Any], float], title: str, y_title: str, colour: str) -> go.Figure:
    divisor, axis = time_axis(samples)
    fig = go.Figure(
        [
            go.Scatter(
                x=_xs(samples, divisor), y=[value(s) for s in samples], mode="lines", line={"color": colour}, name=title
            )
        ]
    )
    return _layout(fig, title, axis, y_title)


def hosts_active(samples: Sequence[Any]) -> go.Figure:
    """Hosts on and not gone at each sample."""
    return _line(samples, lambda s: s.hosts_active, "Hosts active", "hosts", "#1f5fbf")


def credit_granted(samples: Sequence[Any]) -> go.Figure:
    """Credit granted to the world's results so far."""
    return _line(samples, lambda s: round(s.credit, 3), "Credit granted", "credit", "#1b7f3b")


def bytes_downloaded(samples: Sequence[Any]) -> go.Figure:
    """Input bytes the hosts downloaded so far, in MB."""
    return _line(samples, lambda s: round(s.bytes_downloaded / 1e6, 3), "Input downloaded", "MB", "#8e44ad")


WORLD_FIGURES = (
    ("results", results_by_state),
    ("rpcs", rpcs),
    ("hosts", hosts_active),
    ("credit", credit_granted),
    ("bytes", bytes_downloaded),
)


def world_figures(samples: Sequence[Any]) -> dict[str, go.Figure]:
    """{name: Figure} of every chart of one world's page, in page order."""
    return {name: chart(samples) for name, chart in WORLD_FIGURES}


# Comparison: one line per world on one chart, as the lab overlays runs.
COMPARED = (
    ("bytes", "Input downloaded", "MB", lambda s: round(s.bytes_downloaded / 1e6, 3)),
    ("success", "Results over with success", "results", lambda s: s.success),
    ("credit", "Credit granted", "credit", lambda s: round(s.credit, 3)),
    ("rpcs", "Scheduler RPCs", "RPCs", lambda s: s.rpcs),
)


def compare_figures(series: Sequence[tuple[str, Sequence[Any]]]) -> dict[str, go.Figure]:
    """{name: Figure} overlaying the worlds of ``series``, a list of (label, samples)."""
    longest: Sequence[Any] = max((samples for _, samples in series), key=lambda s: s[-1].t if s else 0, default=[])
    divisor, axis = time_axis(longest)
    figures: dict[str, go.Figure] = {}
    for name, title, y_title, value in COMPARED:
        fig = go.Figure(
            [
                go.Scatter(
                    x=_xs(samples, divisor),
                    y=[value(s) for s in samples],
                    mode="lines",
                    name=label,
                    line={"color": PALETTE[i % len(PALETTE)]},
                )
                for i, (label, samples) in enumerate(series)
            ]
        )
        figures[name] = _layout(fig, title, axis, y_title)
    return figures


DAY = 86400.0


def days_words(days: float) -> str:
    """A world's days of new work: "1 day", "0.5 days", "3 days"."""
    return f"{number(days)} day{'' if days == 1 else 's'}"


def run_length_words(days: float, clock: float, *, finished: bool) -> str:
    """What a world's ``days`` mean and how long it has run, in simulated time.

    The project makes new work for ``days``; the world then runs on until every job is
    finished (hosts complete what they hold, the deadlines of hosts that vanished pass, failed
    jobs are retried), so a finished world has run longer than ``days``, and says how long.
    """
    work = f"{days_words(days)} of new work"
    end = days * DAY
    if finished:
        if clock <= end:
            return f"{work}: {duration(clock)} simulated in all"
        return f"{work}, then {duration(clock - end)} finishing it: {duration(clock)} simulated in all"
    if clock < end:
        return f"{work}, then as long as finishing it takes; now at {sim_time(clock)}"
    return f"{work}, done; finishing it since, now at {sim_time(clock)}"


def jobs_words(plain_jobs: int, local_jobs: int) -> str:
    """How much work each world did, as a comparison opens: "Locality scheduling sent 816 jobs
    and plain 570 (43% more)" or "Both worlds sent 570 jobs"."""
    if plain_jobs == local_jobs:
        return f"Both worlds sent {plain_jobs:,} jobs"
    more, fewer = sorted([("Plain", plain_jobs), ("locality", local_jobs)], key=lambda side: -side[1])
    return (
        f"{more[0].capitalize()} scheduling sent {more[1]:,} jobs and {fewer[0].lower()} {fewer[1]:,} "
        f"({more[1] / fewer[1] - 1:.0%} more)"
    )


def transfer_saved(plain: dict[str, Any], locality: dict[str, Any]) -> str:
    """The input transfer locality scheduling saved against plain scheduling, in words, from
    the two worlds' figures (their ``summary``: ``bytes_downloaded``, ``jobs_received``).

    The two worlds run the same days of new work, but their hosts do not get through the same
    number of jobs in them, so the difference in work comes first and the transfer is compared
    per job sent, with the totals after it. Sizes in decimal SI units (boincweb.human).
    """
    plain_bytes, local_bytes = plain.get("bytes_downloaded", 0), locality.get("bytes_downloaded", 0)
    plain_jobs, local_jobs = plain.get("jobs_received", 0), locality.get("jobs_received", 0)
    if not plain_jobs or not local_jobs:
        return "Neither world has sent enough work yet to compare their transfers."
    plain_per, local_per = plain_bytes / plain_jobs, local_bytes / local_jobs
    work = jobs_words(plain_jobs, local_jobs)
    per_job = "so" if plain_jobs != local_jobs else "and"
    totals = f" (in all {data_size(local_bytes)} against {data_size(plain_bytes)})."
    if plain_per <= 0:
        return f"{work}; plain scheduling downloaded no input, so there was nothing to save."
    saved = 1 - local_per / plain_per
    compared = (
        f"{work}, {per_job} their input transfer is compared per job sent: locality scheduling "
        f"downloaded {data_size(local_per)} per job against plain scheduling's {data_size(plain_per)}"
    )
    if saved >= 0:
        return f"{compared}, {saved:.0%} less input transfer per job{totals}"
    return f"{compared}, {-saved:.0%} more input transfer per job{totals}"
