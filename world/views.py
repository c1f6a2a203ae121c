"""/project/worlds/: start, pause and watch volunteer worlds (DESIGN.md URL contracts).

Anyone may watch; only staff may start, pause or resume a world, since a running world writes
hosts, workunits and results into the project's own database. The pages judge each running
world's slice job (``jobs.check_world``), so a world whose job died shows failed with the
reason, and staff may resume it. The POSTs that start worlds need Redis: when it is down they
create nothing and say why (``boincweb.redis_outage``).
"""

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from boincweb.figures import figure_script
from boincweb.htmx import render_page
from boincweb.id_lists import parse_ids
from boincweb.redis_outage import REDIS_DOWN, needs_redis
from scheduling.engine import scenario_to_dict
from scheduling.models import StoredScenario
from world import charts, jobs
from world.deletion import Refused, delete_world
from world.forms import SERVER_FIELDS, AttachForm, CompareForm, DeleteWorldForm, WorldForm
from world.models import EngineHostRun, World, WorldSample

# The most samples a page draws per world: the latest ones (83 minutes of a live demo, a
# simulated world's whole run at its default half-hour rounds for 20 days).
MAX_SAMPLES = 1000
MAX_COMPARE = 4


def check_worlds(worlds: Sequence[World]) -> str:
    """Mark failed the running worlds whose slice job can no longer run them. Returns '' or,
    when Redis is down, its error: the worlds are still shown, from the database, with it."""
    try:
        for world in worlds:
            jobs.check_world(world)
    except REDIS_DOWN as exc:
        return str(exc) or type(exc).__name__
    return ""


def world_list(request: HttpRequest) -> HttpResponse:
    return _list_page(request)


def _list_page(
    request: HttpRequest,
    *,
    form: WorldForm | None = None,
    compare_form: CompareForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """The list of worlds, with the start forms (``form`` or ``compare_form`` when one was
    sent back with its errors)."""
    worlds = list(World.objects.defer("state")[:50])
    redis_error = check_worlds(worlds)
    pair_worlds(worlds)
    context = {
        "worlds": worlds,
        "redis_error": redis_error,
        "form": form or WorldForm(initial={"hosts": 200, "days": 3}),
        "compare_form": compare_form or CompareForm(initial={"hosts": 100, "days": 1, "seed": 1}),
    }
    return render_page(request, "world/world_list.html", context, "panel", status=status)


def pair_worlds(worlds: list[World]) -> None:
    """Give each world of a plain and a locality world on the same seed, hosts, days and
    settings its ``partner`` (the latest such other world), for a link to their comparison."""

    def key(world: World, locality: bool) -> tuple[Any, ...]:
        return (world.seed, world.hosts, world.days, json.dumps(world.settings, sort_keys=True), locality)

    latest = {key(w, w.locality): w for w in sorted(worlds, key=lambda w: w.pk)}
    for world in worlds:
        world.partner = latest.get(key(world, not world.locality))  # type: ignore[attr-defined]


def staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @functools.wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("starting and pausing worlds is for staff")
        return view(request, *args, **kwargs)

    return checked


def start_new(worlds_of_form: Callable[[], list[World]]) -> list[World]:
    """Create worlds (``worlds_of_form()``) and start each; if Redis refuses a job, delete them
    again and let the error through (to ``boincweb.redis_outage``): no world is left that no
    job will run."""
    made: list[World] = []
    try:
        with transaction.atomic():
            made = worlds_of_form()
            for world in made:
                jobs.start(world.pk)
    except Exception:
        World.objects.filter(pk__in=[w.pk for w in made]).delete()
        raise
    return made


@login_required
@require_POST
@staff_required
@needs_redis
def world_create(request: HttpRequest) -> HttpResponse:
    form = WorldForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form=form, status=400)
    start_new(lambda: [form.save()])
    return redirect("worlds:list")


ACTIONS = ("pause", "start", "resume")


@login_required
@require_POST
@staff_required
def world_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if action not in ACTIONS:
        return HttpResponseBadRequest(f"unknown action {action!r}; use start, resume or pause")
    world = get_object_or_404(World.objects.defer("state"), pk=pk)
    if action == "pause":
        jobs.pause(world.pk)
    else:
        return _start(request, world)
    return redirect("worlds:list")


@needs_redis
def _start(request: HttpRequest, world: World) -> HttpResponse:
    jobs.start(world.pk)  # a failed world resumes from its last stored slice
    return redirect("worlds:list")


def samples_of(world: World) -> list[WorldSample]:
    rows = WorldSample.objects.filter(world=world).order_by("-t", "-id")[:MAX_SAMPLES]
    return list(reversed(rows))


def _world_panel(world: World) -> dict[str, str]:
    figures = charts.world_figures(samples_of(world))
    return {name: figure_script(fig, f"world-{name}") for name, fig in figures.items()}


@require_GET
def world_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One world: its figures and live charts over simulated time."""
    world = get_object_or_404(World.objects.defer("state"), pk=pk)
    return _detail_page(request, world)


def _detail_page(
    request: HttpRequest, world: World, *, delete_form: DeleteWorldForm | None = None, status: int = 200
) -> HttpResponse:
    """The world's page (``delete_form`` when one was sent back with its errors)."""
    redis_error = check_worlds([world])
    context = {
        "world": world,
        "run_words": charts.run_length_words(world.days, world.clock, finished=world.status == World.Status.FINISHED),
        # the world's project, whose pages show its rows (backend.templatetags.project_urls)
        "boinc_project": world.project,
        "redis_error": redis_error,
        "figures": _world_panel(world),
        "running": world.status == World.Status.RUNNING,
        "engine_hosts": list(EngineHostRun.objects.filter(world=world).only("world_id", "index", "name", "policy")),
        "engine_classes": (world.settings or {}).get("engine_hosts", []),
        "delete_form": delete_form or DeleteWorldForm(),
    }
    return render_page(
        request, "world/world_detail.html", context, "panel", polling_done=not context["running"], status=status
    )


@login_required
@require_POST
@staff_required
def world_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a world, and when asked its project (world.deletion); a running world is refused
    with the reason (409) and an unconfirmed form sent back (400), nothing deleted."""
    world = get_object_or_404(World.objects.defer("state"), pk=pk)
    form = DeleteWorldForm(request.POST)
    if not form.is_valid():
        return _detail_page(request, world, delete_form=form, status=400)
    try:
        deleted = delete_world(world.pk, with_project=form.cleaned_data["project"])
    except Refused as exc:
        form.add_error(None, str(exc))
        world = get_object_or_404(World.objects.defer("state"), pk=pk)  # as it is now
        return _detail_page(request, world, delete_form=form, status=409)
    what = f"World {deleted.name} deleted"
    if deleted.project:
        what += (
            f", with its project {deleted.project} ({deleted.project_rows} rows and its files) and its "
            f"{deleted.volunteers} simulated volunteers' users"
        )
    messages.success(request, what + ".")
    return redirect("worlds:list")


@require_GET
def world_compare(request: HttpRequest) -> HttpResponse:
    """Worlds side by side, one line each on shared charts, with the transfer locality
    scheduling saved in words when a plain and a locality world are compared."""
    ids = parse_ids(
        ",".join(request.GET.getlist("worlds")), noun="world", example="?worlds=1,2", minimum=2, maximum=MAX_COMPARE
    )
    if isinstance(ids, str):
        return HttpResponseBadRequest(ids, content_type="text/plain")
    found = {w.pk: w for w in World.objects.defer("state").filter(pk__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        return HttpResponse(f"No world {missing[0]}.", status=404, content_type="text/plain")
    worlds = [found[i] for i in ids]
    redis_error = check_worlds(worlds)
    series = [(f"{w.name} ({'locality' if w.locality else 'plain'})", samples_of(w)) for w in worlds]
    for world, (_, samples) in zip(worlds, series, strict=True):
        figures_of(world, samples)
    plain = [w for w in worlds if not w.locality]
    local = [w for w in worlds if w.locality]
    words = charts.transfer_saved(plain[0].summary, local[0].summary) if plain and local else ""
    same_seed = len({(w.seed, w.hosts, w.days) for w in worlds}) == 1
    jobs = {w.summary.get("jobs_received", 0) for w in worlds}
    for world in worlds:
        world.server_words = server_words(world.settings or {})  # type: ignore[attr-defined]
    localities = {w.locality for w in worlds}
    what_differs = (
        ("the scheduling differs", "scheduling")
        if len(localities) > 1
        else ("the server settings differ", "server settings")
    )
    running = any(w.status == World.Status.RUNNING for w in worlds)
    context = {
        "worlds": worlds,
        "redis_error": redis_error,
        "ids": ",".join(map(str, ids)),
        "words": words,
        "same_seed": same_seed,
        "days_words": charts.days_words(worlds[0].days),
        "same_jobs": len(jobs) == 1,
        "what_differs": what_differs,
        "any_engine": any((w.summary or {}).get("engine") for w in worlds),
        "running": running,
        "figures": {
            name: figure_script(fig, f"compare-{name}") for name, fig in charts.compare_figures(series).items()
        },
        "results_figures": [
            figure_script(charts.results_by_state(samples), f"compare-results-{n}")
            for n, (_, samples) in enumerate(series, start=1)
        ],
    }
    return render_page(request, "world/world_compare.html", context, "panel", polling_done=not running)


def figures_of(world: World, samples: Sequence[WorldSample]) -> None:
    """Give ``world`` the figures its column of the comparison shows: how long it ran, and its
    input and credit in all and per job sent. The credit is the last sample's, the one the
    credit chart ends at (a running world's summary holds none)."""
    summary = world.summary or {}
    jobs = summary.get("jobs_received", 0)
    nbytes = summary.get("bytes_downloaded", 0)
    credit = samples[-1].credit if samples else summary.get("credit_granted")
    world.run_words = charts.run_length_words(  # type: ignore[attr-defined]
        world.days, world.clock, finished=world.status == World.Status.FINISHED
    )
    world.input_bytes = nbytes  # type: ignore[attr-defined]
    world.input_per_job = nbytes / jobs if jobs else None  # type: ignore[attr-defined]
    world.credit = credit  # type: ignore[attr-defined]
    world.credit_per_job = credit / jobs if jobs and credit is not None else None  # type: ignore[attr-defined]


# World settings of the server, as the comparison names them.
SERVER_WORDS = (
    ("delay_bound", "deadline", lambda v: f"{v / 3600:g} h"),
    ("daily_result_quota", "daily quota", str),
    ("max_wus_to_send", "jobs per RPC per CPU", str),
    ("max_wus_in_progress", "jobs in progress per CPU", str),
    ("runtime_stats", "runtime estimates learn", lambda v: "yes" if v else "no"),
)


def server_words(settings: dict[str, Any]) -> list[tuple[str, str]]:
    """The server settings a world sets, in words: [(name, value)]."""
    return [(words, show(settings[name])) for name, words, show in SERVER_WORDS if name in settings]


@login_required
@require_POST
@staff_required
@needs_redis
def world_compare_start(request: HttpRequest) -> HttpResponse:
    """Start a plain and a locality world on one seed, then open their comparison."""
    form = CompareForm(request.POST)
    if not form.is_valid():
        return _list_page(request, compare_form=form, status=400)
    worlds = start_new(form.save_pair)
    return redirect(reverse("worlds:compare") + "?worlds=" + ",".join(str(w.pk) for w in worlds))


def _attach_page(request: HttpRequest, stored: StoredScenario, form: AttachForm, status: int = 200) -> HttpResponse:
    rows = [(label, form[f"{name}_a"], form[f"{name}_b"]) for name, (label, _help) in SERVER_FIELDS.items()]
    context = {"stored": stored, "form": form, "rows": rows}
    return render_page(request, "world/attach.html", context, "form", status=status)


@require_http_methods(["GET", "POST"])
def world_attach(request: HttpRequest, scenario: int) -> HttpResponse:
    """Attach a lab scenario's host to a world's project: copies of the host, each driven by
    the client engine, volunteer for the world (world.engine_host), beside their own projects;
    with two server settings, two worlds on the same seed to compare side by side. Anyone may
    look at the form; starting needs staff, as any world does."""
    stored = get_object_or_404(StoredScenario, pk=scenario)
    if request.method == "GET":
        return _attach_page(request, stored, AttachForm())
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not request.user.is_staff:
        raise PermissionDenied("Only staff may start worlds: a world writes into the project's database.")
    return _attach_start(request, stored)


@needs_redis
def _attach_start(request: HttpRequest, stored: StoredScenario) -> HttpResponse:
    form = AttachForm(request.POST)
    if not form.is_valid():
        return _attach_page(request, stored, form, status=400)
    try:
        engine_scenario = stored.engine_scenario()
    except ValueError as exc:
        form.add_error(None, f"The scenario cannot run: {exc}")
        return _attach_page(request, stored, form, status=400)
    data = scenario_to_dict(engine_scenario)
    try:
        worlds = start_new(lambda: form.worlds(stored.name, data))
    except ValueError as exc:  # a setting WorldSettings refuses
        form.add_error(None, str(exc))
        return _attach_page(request, stored, form, status=400)
    if len(worlds) == 1:
        return redirect("worlds:detail", worlds[0].pk)
    return redirect(reverse("worlds:compare") + "?worlds=" + ",".join(str(w.pk) for w in worlds))
