"""Pure functions from a run's records (`RunResult.to_dict()`) to Plotly figures and to the
small tables the lab pages show.

Every chart has a numeric time axis in hours and carries, as its first shape, the cursor line
that static/js/lab.js moves across all charts at once.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import plotly.graph_objects as go
from plotly.colors import qualitative

from boincweb.human import number, sim_time

HOUR = 3600.0
PALETTE = qualitative.D3 + qualitative.Set2
CURSOR = dict(
    type="line", name="cursor", xref="x", yref="paper", x0=0, x1=0, y0=0, y1=1, line=dict(color="#b3261e", width=2)
)
WHY_LABELS = {
    "edf": "EDF: in deadline danger",
    "priority": "picked by project priority",
    "unfinished_time_slice": "kept: its time slice was not over",
    "fifo": "first in, first out",
}

# reference/client.md §5, in words; the pages show them on hover
FIGURES = (
    (
        "idle_fraction",
        "Idle",
        "Idle fraction: the share of the host's peak FLOPs that no job used "
        "(max(0, total − used) / total). Lower is better.",
    ),
    (
        "wasted_fraction",
        "Wasted",
        "Wasted fraction: the share of the host's peak FLOPs spent on jobs reported after their "
        "deadline, work the project may not use. Lower is better.",
    ),
    (
        "share_violation",
        "Share violation",
        "Share violation: Σ|U_p − U·share_p| / U over projects, how far each project's use of the "
        "host is from its resource share. 0 is exact; it can exceed 1. Lower is better.",
    ),
    (
        "monotony",
        "Monotony",
        "Monotony: 1 − 1/(x+1), where x grows with the RMS time a project waits between turns "
        "relative to the scheduling period. Near 0 the projects take turns often; near 1 one "
        "project runs for long stretches. Lower is better.",
    ),
    (
        "rpcs_per_job",
        "RPCs per job",
        "RPCs per job: scheduler RPCs that reached a project divided by twice the jobs the servers "
        "sent (nrpcs / 2·njobs). Fewer RPCs is lighter on the project's servers. Lower is better.",
    ),
)


# engine records.HostPeriod states shaded on the Gantt: (state, legend name, fill)
# A figure of up to this many points (lines and markers together) is drawn as SVG, above it
# with WebGL. In Chromium without a GPU (software WebGL) a WebGL chart costs about 200 ms to
# set up however few its points, an SVG one 20-40 ms for a day of slices, and the two meet near
# 10,000 points (bench/pages.py --charts; a 12-day run's Gantt chart: 8,800 points 170 ms
# as WebGL, 120 ms as SVG; 12,600 points 180 ms and 230 ms).
WEBGL_POINTS = 10_000


def line_trace(points: int) -> type[go.Scatter] | type[go.Scattergl]:
    """The trace class for a figure of ``points`` points: SVG up to WEBGL_POINTS, WebGL above."""
    return go.Scattergl if points > WEBGL_POINTS else go.Scatter


HOST_SHADES = (
    ("off", "host off", "rgba(90,100,120,0.22)"),
    ("not_active", "computing suspended", "rgba(200,140,40,0.18)"),
    ("gpu_suspended", "GPU suspended", "rgba(160,90,200,0.16)"),
)


# one line style and marker per project, so equal projects' lines that lie on each other can
# still be told apart (and read without colour)
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon")


def project_styles(names) -> dict[str, tuple[str, str]]:
    """A (dash, marker symbol) per project name, stable like its colour."""
    return {name: (DASHES[i % len(DASHES)], SYMBOLS[i % len(SYMBOLS)]) for i, name in enumerate(sorted(set(names)))}


def hours(seconds: float) -> float:
    return round(seconds / HOUR, 4)


def project_colours(names) -> dict[str, str]:
    """A stable colour per project name, the same in every chart and every run."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _project_names(records: dict) -> list[str]:
    return [p["name"] for p in records["projects"]]


def _layout(fig: go.Figure, records: dict, title: str, height: int, yaxis: dict) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, x=0, font=dict(size=14)),
        height=height,
        margin=dict(l=70, r=10, t=34, b=36),
        hovermode="closest",
        xaxis=dict(title="simulated time (hours)", range=[0, hours(records["duration"])], zeroline=False),
        yaxis=yaxis,
        shapes=[CURSOR],
        legend=dict(orientation="h", y=-0.22),
        plot_bgcolor="white",
        paper_bgcolor="white",
    )
    fig.update_xaxes(showgrid=True, gridcolor="#eceff4")
    fig.update_yaxes(gridcolor="#eceff4")
    return fig


def lanes(records: dict) -> list[tuple[str, int, str]]:
    """One lane per CPU and per GPU instance, CPUs first: (resource, instance, label)."""
    out = []
    resources = records.get("resources") or {}
    names = sorted(resources, key=lambda r: (r != "cpu", r))
    seen = {(s["resource"], s["instance"]) for s in records["slices"]}
    for r in names:
        for i in range(int(resources[r].get("instances", 0))):
            out.append((r, i, f"{'CPU' if r == 'cpu' else r} {i}"))
    # instances the resource table does not list (e.g. fractional GPU counts)
    for r, i in sorted(seen - {(a, b) for a, b, _ in out}, key=lambda k: (k[0] != "cpu", k)):
        out.append((r, i, f"{'CPU' if r == 'cpu' else r} {i}"))
    return out


def _boxes(intervals, y0, y1):
    xs, ys = [], []
    for start, end in intervals:
        xs += [hours(start), hours(end), hours(end), hours(start), hours(start), None]
        ys += [y0, y0, y1, y1, y0, None]
    return xs, ys


def gantt(records: dict, colours: dict | None = None, links: dict[str, str] | None = None) -> go.Figure:
    """CPU and GPU time slices, one lane per instance, one trace per project.

    Bars are thick line segments, one trace per project: past WEBGL_POINTS points WebGL, so
    10,000 slices draw in one GPU pass; below it SVG, quicker to draw for a few thousand. Each bar
    has one hover point at its middle with job, project and why. EDF runs get a dark core
    line; periods when the host was off, its computing suspended or its GPUs suspended are
    shaded (the engine's HostPeriod records). `links` maps a job's name to a page about it
    (a volunteer world's result): its bars' hover points carry it, and a click opens it
    (static/js/charts.js).
    """
    links = links or {}
    colours = colours or project_colours(_project_names(records))
    lane_list = lanes(records)
    index = {(r, i): n for n, (r, i, _label) in enumerate(lane_list)}
    bar_width = max(4, min(22, 240 // max(1, len(lane_list))))
    fig = go.Figure()
    top = len(lane_list) - 0.5
    gpu_lanes = [n for n, (r, _i, _l) in enumerate(lane_list) if r != "cpu"]
    periods = records.get("host_periods") or []
    for state, name, fill in HOST_SHADES:
        spans = [(p["start"], p["end"]) for p in periods if p["state"] == state]
        if not spans:
            continue
        if state == "gpu_suspended":
            if not gpu_lanes:
                continue
            xs, ys = _boxes(spans, min(gpu_lanes) - 0.5, max(gpu_lanes) + 0.5)
        else:
            xs, ys = _boxes(spans, -0.5, top)
        fig.add_trace(go.Scatter(x=xs, y=ys, fill="toself", mode="none", name=name, fillcolor=fill, hoverinfo="skip"))
    by_project = defaultdict(list)
    for s in records["slices"]:
        by_project[s["project"]].append(s)
    edf_x, edf_y = [], []
    trace = line_trace(4 * len(records["slices"]))  # a bar's two ends and gap, and its hover point
    for project in sorted(by_project):
        xs, ys, mx, my, text, urls = [], [], [], [], [], []
        for s in by_project[project]:
            y = index[(s["resource"], s["instance"])]
            a, b = hours(s["start"]), hours(s["end"])
            xs += [a, b, None]
            ys += [y, y, None]
            mx.append(round((a + b) / 2, 4))
            my.append(y)
            url = links.get(s["job"], "")
            urls.append(url)
            more = "<br>click to open its result" if url else ""
            text.append(f"{s['job']} · {project}<br>{WHY_LABELS.get(s['why'], s['why'])}<br>{a:g}–{b:g} h{more}")
            if s["why"] == "edf":
                edf_x += [a, b, None]
                edf_y += [y, y, None]
        colour = colours.get(project, "#888")
        fig.add_trace(
            trace(
                x=xs,
                y=ys,
                mode="lines",
                name=project,
                legendgroup=project,
                line=dict(color=colour, width=bar_width),
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            trace(
                x=mx,
                y=my,
                mode="markers",
                name=project,
                legendgroup=project,
                showlegend=False,
                marker=dict(color=colour, size=bar_width / 2, opacity=0.35),
                text=text,
                hovertemplate="%{text}<extra></extra>",
                **({"customdata": urls} if any(urls) else {}),
            )
        )
    if edf_x:
        fig.add_trace(
            trace(
                x=edf_x,
                y=edf_y,
                mode="lines",
                name="EDF run (deadline danger)",
                line=dict(color="#111", width=max(2, bar_width // 4)),
                hoverinfo="skip",
            )
        )
    height = 110 + 34 * max(1, len(lane_list))
    return _layout(
        fig,
        records,
        "Who ran where: one lane per CPU and GPU instance",
        height,
        dict(
            tickvals=list(range(len(lane_list))),
            ticktext=[label for _r, _i, label in lane_list],
            range=[top, -0.5],
            zeroline=False,
            showgrid=False,
        ),
    )


def _project_lines(fig, records: dict, colours: dict, value, name, hover: str) -> None:
    """One line per project of the value `value(sample)` of its REC samples, each project with
    its own colour, dash and a marker every few points."""
    styles = project_styles(_project_names(records))
    series = defaultdict(list)
    for s in records["rec"]:
        series[s["project"]].append(s)
    for project in sorted(series):
        rows = series[project]
        dash, symbol = styles.get(project, ("solid", "circle"))
        fig.add_trace(
            go.Scatter(
                x=[hours(s["time"]) for s in rows],
                y=[value(s) for s in rows],
                mode="lines+markers",
                name=name(project),
                legendgroup=project,
                line=dict(color=colours.get(project, "#888"), width=2, dash=dash),
                # a dozen markers per line, enough to tell the lines apart
                marker=dict(symbol=symbol, size=7, maxdisplayed=12, color=colours.get(project, "#888")),
                customdata=[sim_time(s["time"]) for s in rows],
                hovertemplate=f"{project}<br>%{{customdata}}<br>{hover}<extra></extra>",
            )
        )


def rec_chart(records: dict, colours: dict | None = None) -> go.Figure:
    """REC per project (boinc7, wrr, fifo), or long-term debt (boinc5): one line style per
    project; REC has a linear / log axis switch so a small project's REC is not flattened
    against a large one's."""
    colours = colours or project_colours(_project_names(records))
    debt = records["policy"] == "boinc5"
    fig = go.Figure()
    if debt:
        _project_lines(
            fig,
            records,
            colours,
            lambda s: round(s["long_term_debt"], 3),
            lambda p: f"{p} long-term debt",
            "long-term debt %{y:,.0f} s",
        )
        title = "Long-term debt per project (CPU seconds owed; work fetch asks the most indebted)"
        return _layout(fig, records, title, 300, dict(title="long-term debt (s)", zeroline=True))
    _project_lines(fig, records, colours, lambda s: round(s["rec"], 5), lambda p: p, "REC %{y:.4g} credits/day")
    fig = _layout(fig, records, "REC per project: recent estimated credit (credits/day)", 300, dict(title="REC"))
    fig.update_layout(
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=1,
                xanchor="right",
                y=1.18,
                yanchor="top",
                showactive=True,
                buttons=[
                    dict(label="linear", method="relayout", args=[{"yaxis.type": "linear"}]),
                    dict(label="log", method="relayout", args=[{"yaxis.type": "log"}]),
                ],
            )
        ]
    )
    return fig


def priority_chart(records: dict, colours: dict | None = None) -> go.Figure:
    """What the job scheduler compares, per project over time: the scheduling priority
    (-REC/share, reference/client.md §6.2; the highest runs next) or, for boinc5, the
    short-term debt (reference/debt-era.md §3: CPU time owed to the project, mean 0 over the
    runnable projects, bounded to +-1 day; the most indebted runs next)."""
    colours = colours or project_colours(_project_names(records))
    fig = go.Figure()
    if records["policy"] == "boinc5":
        _project_lines(
            fig,
            records,
            colours,
            lambda s: round(s["short_term_debt"], 3),
            lambda p: f"{p} short-term debt",
            "short-term debt %{y:,.0f} s",
        )
        title = "Short-term debt per project: CPU seconds owed to it (the most indebted runs next)"
        return _layout(fig, records, title, 280, dict(title="short-term debt (s)", zeroline=True))
    _project_lines(
        fig, records, colours, lambda s: round(s["priority"], 6), lambda p: p, "scheduling priority %{y:.3g}"
    )
    title = "Scheduling priority per project (−REC share over resource share; the highest runs next)"
    return _layout(fig, records, title, 280, dict(title="priority", zeroline=True))


def buffer_chart(records: dict, colours: dict | None = None) -> go.Figure:
    """Saturated time per resource against the min and max buffer, with RPC markers; periods
    when no RPC could be made (host off or disconnected) are shaded."""
    colours = colours or project_colours(_project_names(records))
    by_resource = defaultdict(list)
    for b in records["buffers"]:
        by_resource[b["resource"]].append(b)
    fig = go.Figure()
    trace = line_trace(3 * len(records["buffers"]))  # saturated time, and the min and max buffer
    dashes = iter(["solid", "dot", "dash", "longdash"])
    first = True
    for resource in sorted(by_resource, key=lambda r: (r != "cpu", r)):
        rows = by_resource[resource]
        x = [hours(b["time"]) for b in rows]
        label = "CPU" if resource == "cpu" else resource
        fig.add_trace(
            trace(
                x=x,
                y=[hours(b["saturated_time"]) for b in rows],
                mode="lines",
                name=f"{label} saturated time",
                line=dict(width=2, dash=next(dashes, "solid")),
            )
        )
        if first:
            fig.add_trace(
                trace(
                    x=x,
                    y=[hours(b["work_buf_min"]) for b in rows],
                    mode="lines",
                    name="min buffer",
                    line=dict(color="#b3261e", width=1, dash="dash"),
                )
            )
            fig.add_trace(
                trace(
                    x=x,
                    y=[hours(b["work_buf_total"]) for b in rows],
                    mode="lines",
                    name="max buffer",
                    line=dict(color="#1b7f3b", width=1, dash="dash"),
                )
            )
            first = False
    offline = [
        (p["start"], p["end"]) for p in records.get("host_periods") or [] if p["state"] in ("off", "disconnected")
    ]
    if offline and records["buffers"]:
        high = max(max(b["saturated_time"], b["work_buf_total"]) for b in records["buffers"])
        xs, ys = _boxes(offline, 0, high)
        ys = [hours(y) if y is not None else None for y in ys]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                fill="toself",
                mode="none",
                name="no network (off or disconnected)",
                fillcolor="rgba(90,100,120,0.12)",
                hoverinfo="skip",
            )
        )
    # the RPCs in a thin row of their own above the buffer, one line per project: a short
    # tick per RPC (a cross when it failed), its reason and reply on hover
    by_project = defaultdict(list)
    for r in records["rpcs"]:
        by_project[r["project"]].append(r)
    rows = sorted(by_project)
    for project in rows:
        sent = by_project[project]
        fig.add_trace(
            go.Scatter(
                x=[hours(r["time"]) for r in sent],
                y=[project] * len(sent),
                yaxis="y2",
                mode="markers",
                name=f"RPC to {project}",
                marker=dict(
                    color=colours.get(project, "#888"),
                    size=9,
                    symbol=["line-ns-open" if r["ok"] else "x-thin-open" for r in sent],
                    line=dict(width=2, color=colours.get(project, "#888")),
                ),
                text=[
                    f"{sim_time(r['time'])}: RPC to {project} ({r['reason']}), "
                    f"{'ok' if r['ok'] else 'failed'}<br>{r['message']}"
                    for r in sent
                ],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    band = min(0.3, 0.07 * len(rows)) if rows else 0.0
    fig = _layout(
        fig,
        records,
        "Work buffer: hours until an instance would idle; scheduler RPCs in the row above (| ok, ✕ failed)",
        320 + 18 * len(rows),
        dict(title="hours", rangemode="tozero", domain=[0, 1 - band - 0.04 if rows else 1]),
    )
    if rows:
        fig.update_layout(
            yaxis2=dict(
                domain=[1 - band, 1],
                type="category",
                categoryorder="array",
                categoryarray=rows,
                showgrid=False,
                zeroline=False,
                tickfont=dict(size=10),
                title=dict(text="RPCs", font=dict(size=10)),
            )
        )
    return fig


def figure_card(figures: dict) -> list[dict]:
    """The five figures of merit with their labels and definitions, in display order."""
    return [dict(key=key, label=label, definition=definition, value=figures[key]) for key, label, definition in FIGURES]


def compare_figures(summaries: list[dict]) -> list[dict]:
    """Rows of figures side by side, each run's value with its difference from the first run.

    All five figures are lower-is-better, so the lowest value of a row is marked best, as the
    page shows them (human.number, the rounding every lab page uses): values that read the
    same mark none.
    """
    rows = []
    for key, label, definition in FIGURES:
        values = [s["figures"][key] for s in summaries]
        shown = [number(v) for v in values]
        best = shown[values.index(min(values))]
        cells = [
            dict(value=v, diff=v - values[0], best=(r == best and len(set(shown)) > 1)) for v, r in zip(values, shown)
        ]
        rows.append(dict(key=key, label=label, definition=definition, cells=cells))
    return rows


def run_facts(records: dict) -> dict:
    """Counts that explain a run: preemptions, work lost to them, EDF slices, deadlines, RPCs."""
    kinds = Counter(d["kind"] for d in records["decisions"])
    projects = records["projects"]
    cpu = (records.get("resources") or {}).get("cpu") or {}
    cpu_flops = cpu.get("peak_flops", 1e9) / max(1, cpu.get("instances", 1))
    return dict(
        preemptions=kinds.get("preempt", 0),
        lost_hours=sum(p.get("flops_lost", 0.0) for p in projects) / cpu_flops / HOUR,
        edf_slices=sum(1 for s in records["slices"] if s["why"] == "edf"),
        slices=len(records["slices"]),
        deadlines_missed=sum(p["deadlines_missed"] for p in projects),
        jobs_completed=sum(p["jobs_completed"] for p in projects),
        rpcs=len(records["rpcs"]),
        rpc_failures=sum(1 for r in records["rpcs"] if not r["ok"]),
    )


def _times(n: float, one: str, many: str) -> str:
    return one if n == 1 else many.format(n=number(n))


FACT_SENTENCES = (
    (
        "preemptions",
        lambda p, v: (
            f"{p} preempted no running job"
            if v == 0
            else f"{p} preempted a running job {_times(v, 'once', '{n} times')}"
        ),
    ),
    (
        "lost_hours",
        lambda p, v: (
            f"{p} threw away no work"
            if v == 0
            else f"{p} threw away {number(v)} CPU-hours of work done since the last checkpoint"
        ),
    ),
    (
        "edf_slices",
        lambda p, v: (
            f"under {p} no time slices ran in EDF mode"
            if v == 0
            else f"{p} ran {_times(v, 'one time slice', '{n} time slices')} in EDF mode, for a deadline in danger"
        ),
    ),
    ("deadlines_missed", lambda p, v: f"{p} missed {'no' if v == 0 else number(v)} deadline{'' if v == 1 else 's'}"),
    ("jobs_completed", lambda p, v: f"{p} completed {'no' if v == 0 else number(v)} job{'' if v == 1 else 's'}"),
    ("rpcs", lambda p, v: f"{p} made {'no' if v == 0 else number(v)} scheduler RPC{'' if v == 1 else 's'}"),
)


def _share_sentences(runs: list[tuple[str, dict]]) -> list[str]:
    """Per project, its part of the computing done in each run against its resource share,
    when the runs differ by 5 percentage points or more in it (reference/client.md §5: the
    share violation sums these differences)."""
    parts = []
    for _label, records in runs:
        used = {p["name"]: p.get("flops_used", 0.0) for p in records["projects"]}
        total = sum(used.values())
        parts.append({name: (u / total if total > 0 else 0.0) for name, u in used.items()})
    first = runs[0][1]["projects"]
    shares = {p["name"]: p.get("resource_share", 0.0) for p in first}
    share_total = sum(shares.values())
    out = []
    for name in shares:
        values = [part.get(name, 0.0) for part in parts]
        if max(values) - min(values) < 0.05:
            continue
        each = [f"{v:.0%} under {label}" for v, (label, _r) in zip(values, runs)]
        share = shares[name] / share_total if share_total > 0 else 0.0
        out.append(
            f"{name} (resource share {share:.0%}) got {values[0]:.0%} of the computing under "
            f"{runs[0][0]}" + "".join(f", {e}" for e in each[1:-1]) + f" and {each[-1]}."
        )
    return out


def explain_differences(runs: list[tuple[str, dict]]) -> list[str]:
    """Plain sentences on where runs differ most, from their records: (label, records) pairs.

    A fact that is the same in every run is left out; a figure of merit is mentioned when the
    runs differ by more than 0.01 in it.
    """
    facts = [(label, run_facts(records)) for label, records in runs]
    out = []
    for key, sentence in FACT_SENTENCES:
        values = [f[key] for _l, f in facts]
        if max(values) - min(values) < (0.05 if key == "lost_hours" else 1):
            continue
        out.append("; ".join(sentence(label, f[key]) for label, f in facts) + ".")
    out += _share_sentences(runs)
    for key, label, _definition in FIGURES:
        values = [(name, records["figures"][key]) for name, records in runs]
        low = min(values, key=lambda v: v[1])
        high = max(values, key=lambda v: v[1])
        if high[1] - low[1] > 0.01:
            out.append(f"{label}: {low[0]} {number(low[1])} against {high[0]} {number(high[1])} (lower is better).")
    return out
