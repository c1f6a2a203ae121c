"""The pages of a world's engine hosts: both sides of the loop on one screen.

An engine host's page (/project/worlds/<world>/engine/<index>/) draws what its client engine
did, with the lab's charts (scheduling/charts.py: the Gantt chart of its CPU and GPU time
slices, REC and buffer), and links every slice of the world's project to the result it computed
and that result's workunit, on the project's own pages; its RPCs to the world's scheduler are
listed with what they asked for and got. The workunit page links back: ``slice_links`` is
registered with the back end's ``RESULT_LINKS`` (world.apps), so a result computed on an
engine host names that host's page, at the slices of that result.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from backend.models import Result
from backend.templatetags.project_urls import project_reverse
from boincweb.figures import figure_script
from boincweb.htmx import render_page
from scheduling import charts
from world import engine_records
from world.models import EngineHostRun, World

# Slices listed in the page's table (the latest ones; the Gantt chart has them all).
MAX_SLICE_ROWS = 300
# Names per query when looking results up by name (SQLite's limit on variables is 999 at worst).
NAMES_PER_QUERY = 500


def results_by_name(names: set[str]) -> dict[str, tuple[int, int, str]]:
    """name -> (result id, workunit id, workunit name) of the results named."""
    found: dict[str, tuple[int, int, str]] = {}
    ordered = sorted(names)
    for i in range(0, len(ordered), NAMES_PER_QUERY):
        rows = Result.objects.filter(name__in=ordered[i : i + NAMES_PER_QUERY]).values_list(
            "name", "id", "workunit_id", "workunit__name"
        )
        for name, result_id, wu_id, wu_name in rows:
            found[name] = (result_id, wu_id, wu_name)
    return found


def slice_rows(data: dict[str, Any], project: str, found: dict[str, tuple[int, int, str]]) -> list[dict[str, Any]]:
    """The world project's slices, the latest first, with their result and workunit."""
    rows = []
    for s in sorted((s for s in data["slices"] if s["project"] == project), key=lambda s: -s["start"]):
        result = found.get(s["job"])
        rows.append(
            {
                "job": s["job"],
                "start_h": s["start"] / 3600,
                "end_h": s["end"] / 3600,
                "lane": f"{'CPU' if s['resource'] == 'cpu' else s['resource']} {s['instance']}",
                "why": charts.WHY_LABELS.get(s["why"], s["why"]),
                "result_id": result[0] if result else None,
                "wu_id": result[1] if result else None,
                "wu_name": result[2] if result else "",
            }
        )
    return rows


@require_GET
def engine_host(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """One engine host of a world: the engine's charts, its slices and its RPCs (module doc).
    ``?job=<result name>`` lists that result's slices first."""
    run = get_object_or_404(EngineHostRun.objects.select_related("world"), world_id=pk, index=index)
    data = engine_records.records(run)
    names = {s["job"] for s in data["slices"] if s["project"] == run.project}
    found = results_by_name(names)
    project = run.world.project
    links = {name: project_reverse(request, "result_detail", ids[0], project=project) for name, ids in found.items()}
    colours = charts.project_colours([p["name"] for p in data["projects"]])
    figures = {
        "gantt": charts.gantt(data, colours, links=links),
        "rec": charts.rec_chart(data, colours),
        "buffer": charts.buffer_chart(data, colours),
    }
    rows = slice_rows(data, run.project, found)
    job = request.GET.get("job", "")
    chosen = [r for r in rows if r["job"] == job]
    rpcs = [
        {
            "time_h": e["time"] / 3600,
            "reason": e["reason"].replace("_", " "),
            "ok": e["ok"],
            "asked": ", ".join(f"{name} {secs:.0f} s / {inst:g} inst" for name, (secs, inst) in e["requests"].items()),
            "got": ", ".join(f"{n} {name}" for name, n in e["jobs_received"].items()) or "none",
            "reported": e["reported"],
            "message": e["message"],
        }
        for e in reversed(data["rpcs"])
        if e["project"] == run.project
    ]
    running = run.world.status == World.Status.RUNNING
    context = {
        "run": run,
        "world": run.world,
        "boinc_project": project,
        "data": data,
        "figures": {name: figure_script(fig, f"engine-{name}") for name, fig in figures.items()},
        "rows": rows[:MAX_SLICE_ROWS],
        "more_rows": max(len(rows) - MAX_SLICE_ROWS, 0),
        "job": job,
        "chosen": chosen,
        "rpcs": rpcs[:MAX_SLICE_ROWS],
        "jobs_computed": len(names),
        "running": running,
        "others": [p for p in data["projects"] if p["name"] != run.project],
    }
    return render_page(request, "world/engine_host.html", context, "panel", polling_done=not running)


def slice_links(results: list[Result]) -> dict[int, list[tuple[str, str]]]:
    """For the workunit page (backend.views.RESULT_LINKS): a result computed on a world's engine
    host links to that host's page, at its slices."""
    host_ids = {r.host_id for r in results if r.host_id}
    if not host_ids:
        return {}
    runs = {run.host_id: run for run in EngineHostRun.objects.filter(host_id__in=host_ids).select_related("world")}
    links: dict[int, list[tuple[str, str]]] = {}
    for r in results:
        run = runs.get(r.host_id) if r.host_id else None
        if run is None:
            continue
        url = (
            reverse("worlds:engine_host", args=[run.world_id, run.index]) + "?" + urlencode({"job": r.name}) + "#slices"
        )
        links[r.id] = [(f"its time slices on engine host {run.name} ({run.policy}) in world {run.world.name}", url)]
    return links
