"""The project pages: server status, workunits, results, hosts, users, preferences, actions."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.db.models import Count, F, Max, Model, Q, QuerySet, Sum
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.middleware import HtmxDetails

from backend import charts, server_status
from backend.actions import ACTIONS
from backend.daemons.sched_types import SchedulerConfig
from backend.daemons.sched_version import app_version_table, runtime_estimates
from backend.forms import TOP, HostPrefsForm, ResultFilterForm, WorkunitFilterForm, WorkunitIdsForm
from backend.keyset import BadCursor, keyset_page
from backend.models import (
    App,
    AppVersion,
    AssimilateState,
    ClientState,
    CreditHistory,
    FileDeleteState,
    Host,
    HostAppVersion,
    LifecycleEvent,
    Outcome,
    Project,
    Result,
    ServerState,
    Team,
    TeamAppCredit,
    UserAppCredit,
    UserCredit,
    Workunit,
    WorkunitQuerySet,
)
from backend.server_config import ConfigError
from backend.statemachine import RESULT_MACHINE, WORKUNIT_MACHINE, Drawing, draw_row
from backend.templatetags.boinc_time import clock_origin, time_text
from backend.templatetags.project_urls import project_reverse
from boincweb.figures import figure_script
from boincweb.htmx import render_page

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from django.forms import ModelChoiceField

PAGE_SIZE = 50
# Matching rows a list counts at most: a count past it says "more than"; a COUNT(*) over a
# million rows would cost a page more than the rows it shows.
COUNT_LIMIT = 10_000
RECENT = 50  # results shown on a host or user page

K = TypeVar("K")
V = TypeVar("V")


class HtmxHttpRequest(HttpRequest):
    """A request as django_htmx's middleware leaves it, with ``request.htmx``."""

    htmx: HtmxDetails


# --- server status --------------------------------------------------------------------------


# The status page's panels, each a partial of its own that polls at its own pace: the daemons
# and queues (2 s), the users, computers and run times, cached for a minute (60 s), and the
# charts: the tasks by app and the queues' recent history, a sample per pass of the periodic
# daemon job (10 s). A chart is drawn anew at each swap of its panel, so none polls at 2 s.
STATUS_PANELS = ("panel", "community", "history")


@require_GET
def status(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    panel = request.GET.get("panel", "panel")
    if panel not in STATUS_PANELS:
        return HttpResponse(
            f"no panel {panel!r}; choose one of {', '.join(STATUS_PANELS)}", status=400, content_type="text/plain"
        )
    now = project.now()
    whole = not request.htmx
    context: dict[str, Any] = {"config_project": project}
    if whole or panel == "panel":
        state = server_status.server_status(now, project=project, cached=True)
        context["status"] = state
        context["figures_age"] = now - state.figures_time
        context["figures_max_age"] = server_status.FIGURES_MAX_AGE
    if whole or panel == "community":
        figures = server_status.cached_community(now, project)
        context["community"] = figures
        context["runtimes"] = [
            (app, figures.runtime(app.id))
            for app in App.objects.filter(project=project).only("id", "name").order_by("name")
        ]
    if whole:
        try:
            config = project.scheduler_config()
        except ConfigError:
            # the configuration panel (the server_options tag) says why it is unreadable
            config = SchedulerConfig()
        context["app_versions"] = app_version_table(config, project)
    if whole or panel == "history":
        if whole:
            apps = context["status"].apps
        else:
            apps = [server_status.AppTasks(**app) for app in server_status.cached_figures(now, project)["apps"]]
        [(_id, context["apps_figure"])] = _figure_scripts(
            ("apps", tuple(apps)), lambda: [("apps-figure", charts.app_tasks_figure(apps))]
        )
        samples = server_status.queue_history(project)
        origin = clock_origin(project)
        key = ("history", origin, json.dumps(samples, sort_keys=True))
        context["history"] = _figure_scripts(key, lambda: charts.queue_history_figures(samples, origin))
        context["history_samples"] = len(samples)
    return render_page(request, "project/status.html", context, panel)


def _kept(store: dict[K, V], limit: int, key: K, make: Callable[[], V]) -> V:
    """``store[key]``, made by ``make()`` the first time it is asked for; ``store`` is a dict of
    this process's, emptied when it holds ``limit`` entries (the pages keep there what costs
    them most to make and is the same for many requests)."""
    if key not in store:
        if len(store) >= limit:
            store.clear()
        store[key] = make()
    return store[key]


# Figures as <script> elements by what they were drawn from: building one costs milliseconds,
# and the status page's figures change only when the periodic daemon job records a sample.
_FIGURES: dict[object, list[tuple[str, str]]] = {}


def _figure_scripts(key: object, build: Callable[[], Iterable[tuple[str, go.Figure]]]) -> list[tuple[str, str]]:
    """``build()``'s (element id, figure) pairs as (element id, <script> element) pairs
    (boincweb.figures.figure_script), made once for the same ``key``."""
    return _kept(
        _FIGURES, 16, key, lambda: [(element_id, figure_script(fig, element_id)) for element_id, fig in build()]
    )


@require_GET
def status_json(request: HttpRequest, project: Project) -> JsonResponse:
    state = server_status.server_status(project.now(), project=project, with_community=True, cached=True)
    return JsonResponse(state.as_dict())


@require_GET
def status_xml(request: HttpRequest, project: Project) -> HttpResponse:
    state = server_status.server_status(project.now(), project=project, with_community=True, cached=True)
    return HttpResponse(server_status.status_xml(state), content_type="application/xml")


# --- workunits ------------------------------------------------------------------------------


def _filtered_workunits(request: HttpRequest, project: Project) -> tuple[WorkunitFilterForm, WorkunitQuerySet | None]:
    """The bound filter form and, when it is valid, the project's workunits it filters."""
    form = WorkunitFilterForm(request.GET, project=project)
    if not form.is_valid():
        return form, None
    return form, form.filter(Workunit.objects.filter(project=project), project.now())


# The filter form's HTML by the apps to choose from and the filters asked for: rendering its
# five widgets costs the list page as much as its 50 rows do.
_FILTER_FORMS: dict[tuple, str] = {}


def _filter_form_html(request: HttpRequest, form: WorkunitFilterForm, project: Project) -> str:
    """The filter fields of ``form`` as HTML (the page's "filters" partial)."""
    app_field = cast("ModelChoiceField[App]", form.fields["app"])  # fields holds the Field declared as app
    choices = [
        ("", app_field.empty_label),
        *App.objects.filter(project=project).order_by("name").values_list("id", "name"),
    ]
    # the choices as a plain list: the field would read them through a server-side cursor
    app_field.choices = choices
    key = (
        tuple(choices),
        tuple(sorted((name, tuple(values)) for name, values in request.GET.lists() if name not in ("after", "before"))),
    )
    return _kept(
        _FILTER_FORMS, 128, key, lambda: render_to_string("project/workunit_list.html#filters", {"form": form}, request)
    )


def _page_url(request: HttpRequest, **cursor: str) -> str:
    query = request.GET.copy()
    query.pop("after", None)
    query.pop("before", None)
    for key, value in cursor.items():
        query[key] = value
    return f"?{query.urlencode()}"


ASSIMILATE_LABELS = dict(AssimilateState.choices)
FILE_DELETE_LABELS = dict(FileDeleteState.choices)


@require_GET
def workunit_list(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    form, queryset = _filtered_workunits(request, project)
    context: dict[str, Any]
    if queryset is None:
        context = {"form": form, "page": None}
        if not request.htmx:
            context["filters"] = _filter_form_html(request, form, project)
        return render_page(request, "project/workunit_list.html", context, "table", status=400)
    field, descending = form.sort_key
    try:
        page = keyset_page(
            queryset.select_related("app").annotate(canonical_name=F("canonical_result__name")),
            field,
            descending,
            after=form.cleaned_data["after"],
            before=form.cleaned_data["before"],
            size=PAGE_SIZE,
        )
    except BadCursor as exc:  # the form checked the cursors; this guards a race in parsing
        return HttpResponse(str(exc), status=400)
    summaries = result_summaries(project, [wu.pk for wu in page.rows])
    for wu in page.rows:  # the labels the rows show, without get_FOO_display's dict per call
        wu.assimilate_label = ASSIMILATE_LABELS.get(wu.assimilate_state, wu.assimilate_state)
        wu.file_delete_label = FILE_DELETE_LABELS.get(wu.file_delete_state, wu.file_delete_state)
        wu.result_summary = summaries.get(wu.pk, "no results yet")
    context = {
        "form": form,
        "page": page,
        "matches": bounded_count(queryset),
        "count_limit": COUNT_LIMIT,
        "result_base": project_reverse(request, "result_detail", 0)[:-2],
        "next_url": _page_url(request, after=page.next_cursor) if page.next_cursor else "",
        "prev_url": _page_url(request, before=page.prev_cursor) if page.prev_cursor else "",
        "csv_url": project_reverse(request, "workunit_csv") + _page_url(request),
        "now": project.now(),
    }
    if not request.htmx:
        context["filters"] = _filter_form_html(request, form, project)
    return render_page(request, "project/workunit_list.html", context, "table")


def bounded_count(queryset: QuerySet[Any]) -> int:
    """How many rows ``queryset`` has, counted up to COUNT_LIMIT + 1 (more is "more than")."""
    return queryset.order_by().values("id")[: COUNT_LIMIT + 1].count()


def result_label(server_state: int, outcome: int) -> str:
    """A result's state in a word or two: its outcome once it is over, else its server state."""
    if server_state == ServerState.OVER:
        return str(Outcome(outcome).label).lower()
    return "unsent" if server_state <= ServerState.UNSENT else "in progress"


def result_summaries(project: Project, wu_ids: list[int]) -> dict[int, str]:
    """{workunit id: "2 success, 1 client error, 1 in progress"} of the workunits' results,
    in one query over res_wuid."""
    counts: dict[int, dict[str, int]] = {}
    rows = (
        Result.objects.filter(project=project, workunit_id__in=wu_ids)
        .values("workunit_id", "server_state", "outcome")
        .annotate(n=Count("id"))
        .order_by("workunit_id", "-server_state", "outcome")
    )
    for row in rows:
        label = result_label(row["server_state"], row["outcome"])
        by_label = counts.setdefault(row["workunit_id"], {})
        by_label[label] = by_label.get(label, 0) + row["n"]
    return {wu: ", ".join(f"{n} {label}" for label, n in by_label.items()) for wu, by_label in counts.items()}


# (header, values_list field, how a value is written); times on the project's clock
CSV_COLUMNS = [
    ("id", "id", None),
    ("name", "name", None),
    ("app_name", "app__name", None),
    ("create_time", "create_time", "time"),
    ("error_mask", "error_mask", None),
    ("need_validate", "need_validate", None),
    ("assimilate_state", "assimilate_state", None),
    ("file_delete_state", "file_delete_state", None),
    ("transition_time", "transition_time", "time"),
    ("canonical_result_id", "canonical_result_id", None),
    ("canonical_result_name", "canonical_result__name", None),
    ("canonical_credit", "canonical_credit", None),
    ("min_quorum", "min_quorum", None),
    ("target_nresults", "target_nresults", None),
]


class _Echo:
    def write(self, value: str) -> str:
        return value


@require_GET
def workunit_csv(request: HttpRequest, project: Project) -> HttpResponse | StreamingHttpResponse:
    form, queryset = _filtered_workunits(request, project)
    if queryset is None:
        return HttpResponse("bad filter: " + form.errors.as_text(), status=400, content_type="text/plain")
    field, descending = form.sort_key
    order = [f"-{field}", "-id"] if descending else [field, "id"]
    return _csv_response(queryset.order_by(*order), CSV_COLUMNS, project, "workunits.csv")


def _csv_response(
    queryset: QuerySet[Any], columns: list[tuple[str, str, str | None]], project: Project, filename: str
) -> StreamingHttpResponse:
    """``queryset``'s ``columns`` as a streamed CSV file (Python's csv module), times written
    as the pages show them, on the project's clock (backend.templatetags.boinc_time)."""
    origin = clock_origin(project)
    times = [i for i, (_, _, kind) in enumerate(columns) if kind == "time"]

    def shown(row: tuple[Any, ...]) -> list[Any]:
        values = list(row)
        for i in times:
            values[i] = time_text(values[i], origin)
        return values

    rows = queryset.values_list(*(field for _, field, _ in columns)).iterator(chunk_size=2000)
    writer = csv.writer(_Echo())
    lines = (writer.writerow(row) for row in _prepend([h for h, _, _ in columns], (shown(r) for r in rows)))
    response = StreamingHttpResponse(lines, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _prepend(first: V, rest: Iterable[V]) -> Iterator[V]:
    yield first
    yield from rest


# State machine drawings as SVG by the drawing: most workunits and results of a project are
# drawn alike (finished, by the same path), and the template costs a page milliseconds each.
_MACHINES: dict[str, str] = {}


def _machine_svg(drawing: Drawing) -> str:
    return _kept(_MACHINES, 256, repr(drawing), lambda: render_to_string("project/_machine.html", {"drawing": drawing}))


def _results_with_drawings(results: Iterable[Result], events: Iterable[LifecycleEvent]) -> list[tuple[Result, str]]:
    by_result: dict[int, list[LifecycleEvent]] = {}
    for e in events:
        if e.result_id:
            by_result.setdefault(e.result_id, []).append(e)
    return [(r, _machine_svg(draw_row(RESULT_MACHINE, r, by_result.get(r.id, [])))) for r in results]


# Other apps' links for results, shown on the workunit page: each function takes the results and
# returns {result id: [(text, url)]}. The back end never imports the apps that drive it; they
# add themselves here when they load (the volunteer world links its engine hosts' time slices).
RESULT_LINKS: list[Callable[[list[Result]], dict[int, list[tuple[str, str]]]]] = []


def result_links(results: list[Result]) -> dict[int, list[tuple[str, str]]]:
    links: dict[int, list[tuple[str, str]]] = {}
    for source in RESULT_LINKS:
        for result_id, found in source(results).items():
            links.setdefault(result_id, []).extend(found)
    return links


@require_GET
def workunit_detail(request: HtmxHttpRequest, pk: int, project: Project) -> HttpResponse:
    wu = get_object_or_404(
        Workunit.objects.filter(project=project).select_related("app__project", "canonical_result"), pk=pk
    )
    results = list(wu.results.select_related("host", "app_version").order_by("id"))
    events = list(
        LifecycleEvent.objects.filter(
            Q(workunit_id=wu.pk) | Q(result_id__in=[r.id for r in results]), project=project
        ).order_by("time", "id")
    )
    wu_events = [e for e in events if not e.result_id]
    _label_events(events, {r.id: r.name for r in results})
    timeline = charts.lifecycle_timeline(events, {r.id: r.name for r in results}, clock_origin(project))
    finished = wu.file_delete_state == FileDeleteState.DONE and all(r.server_state == ServerState.OVER for r in results)
    links = result_links(results)
    context = {
        "wu": wu,
        "results": _results_with_drawings(results, events),
        "links": [(r, found) for r in results if (found := links.get(r.id))],
        "machine": _machine_svg(draw_row(WORKUNIT_MACHINE, wu, wu_events)),
        "events": events,
        "timeline": figure_script(timeline, "timeline-figure"),
        "finished": finished,
        "actions": ACTIONS,
    }
    return render_page(request, "project/workunit_detail.html", context, "live", polling_done=finished)


def _label_events(events: Iterable[Any], result_names: dict[int, str]) -> None:
    """What the lifecycle table shows of each event: its result by name, and whether its old
    and new values are times (transition_time, a deadline), which it shows on the project's
    clock rather than as Unix seconds."""
    for e in events:
        e.result_name = result_names.get(e.result_id, f"result {e.result_id}") if e.result_id else ""
        e.is_time = e.field.endswith(("_time", "deadline"))


# --- results --------------------------------------------------------------------------------


@require_GET
def result_detail(request: HtmxHttpRequest, pk: int, project: Project) -> HttpResponse:
    result = get_object_or_404(
        Result.objects.filter(project=project).select_related("workunit", "app", "host", "user", "app_version__app"),
        pk=pk,
    )
    events = list(result.events.order_by("time", "id"))
    _label_events(events, {result.id: result.name})
    timeline = charts.lifecycle_timeline(events, {result.id: result.name}, clock_origin(project))
    finished = result.file_delete_state == FileDeleteState.DONE
    context = {
        "result": result,
        "machine": _machine_svg(draw_row(RESULT_MACHINE, result, events)),
        "events": events,
        "timeline": figure_script(timeline, "timeline-figure"),
        "finished": finished,
    }
    return render_page(request, "project/result_detail.html", context, "live", polling_done=finished)


def _filtered_results(request: HttpRequest, project: Project) -> tuple[ResultFilterForm, QuerySet[Result] | None]:
    """The bound filter form and, when it is valid, the project's results it filters."""
    form = ResultFilterForm(request.GET, project=project)
    if not form.is_valid():
        return form, None
    return form, form.filter(Result.objects.filter(project=project))


def _bad_filter(form: Any) -> HttpResponse:
    """A 400 naming each bad filter and why, as plain text."""
    reasons = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
    return HttpResponse(f"bad filter: {reasons}", status=400, content_type="text/plain; charset=utf-8")


@require_GET
def result_list(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """The project's results, newest first, filtered as BOINC's ops pages filter them; a bad
    filter is a 400 with the form saying why."""
    form, queryset = _filtered_results(request, project)
    context: dict[str, Any] = {"form": form, "page": None}
    if queryset is None:
        return render_page(request, "project/result_list.html", context, "table", status=400)
    try:
        page = keyset_page(
            queryset.select_related("workunit", "host", "app_version__app"),
            "id",
            True,
            after=form.cleaned_data["after"],
            before=form.cleaned_data["before"],
            size=PAGE_SIZE,
        )
    except BadCursor as exc:  # the form checked the cursors; this guards a race in parsing
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    for r in page.rows:
        r.state_label = result_label(r.server_state, r.outcome)
    context.update(
        page=page,
        matches=bounded_count(queryset),
        count_limit=COUNT_LIMIT,
        next_url=_page_url(request, after=page.next_cursor) if page.next_cursor else "",
        prev_url=_page_url(request, before=page.prev_cursor) if page.prev_cursor else "",
        csv_url=project_reverse(request, "result_csv") + _page_url(request),
    )
    return render_page(request, "project/result_list.html", context, "table")


RESULT_CSV_COLUMNS = [
    ("id", "id", None),
    ("name", "name", None),
    ("workunit_id", "workunit_id", None),
    ("workunit_name", "workunit__name", None),
    ("app_name", "app__name", None),
    ("app_version_num", "app_version__version_num", None),
    ("platform", "app_version__platform", None),
    ("plan_class", "app_version__plan_class", None),
    ("host_id", "host_id", None),
    ("server_state", "server_state", None),
    ("outcome", "outcome", None),
    ("client_state", "client_state", None),
    ("validate_state", "validate_state", None),
    ("exit_status", "exit_status", None),
    ("create_time", "create_time", "time"),
    ("sent_time", "sent_time", "time"),
    ("report_deadline", "report_deadline", "time"),
    ("received_time", "received_time", "time"),
    ("elapsed_time", "elapsed_time", None),
    ("cpu_time", "cpu_time", None),
    ("granted_credit", "granted_credit", None),
]


@require_GET
def result_csv(request: HttpRequest, project: Project) -> HttpResponse | StreamingHttpResponse:
    """Every result the list's filters match, newest first, as CSV."""
    form, queryset = _filtered_results(request, project)
    if queryset is None:
        return _bad_filter(form)
    return _csv_response(queryset.order_by("-id"), RESULT_CSV_COLUMNS, project, "results.csv")


# --- failure summaries ----------------------------------------------------------------------

# The outcomes a failure summary counts: the result came back with an error, or never came
# back, or its output was rejected (reference/server.md §1.2).
ERROR_OUTCOMES = (Outcome.CLIENT_ERROR, Outcome.NO_REPLY, Outcome.VALIDATE_ERROR, Outcome.CLIENT_DETACHED)
# Windows a summary looks back over, on the project's clock: (query value, label, seconds).
FAILURE_WINDOWS = {"1": ("past day", 86400), "7": ("past week", 7 * 86400), "all": ("all time", None)}
# Exit codes with a name (lib/error_numbers.h, reference/server.md §1.4).
EXIT_NAMES = {194: "EXIT_ABORTED_BY_CLIENT", 202: "EXIT_ABORTED_BY_PROJECT", 203: "EXIT_ABORTED_VIA_GUI"}
FAILURE_HOSTS = 50  # hosts listed by the summary by host


def _failed_results(request: HttpRequest, project: Project) -> tuple[dict[str, Any], QuerySet[Result]] | HttpResponse:
    """The window asked for and the project's failed results in it, or a 400 saying why."""
    days = request.GET.get("days", "7")
    if days not in FAILURE_WINDOWS:
        return HttpResponse(
            f"bad filter: days: {days!r} is not one of {', '.join(FAILURE_WINDOWS)}",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    label, seconds = FAILURE_WINDOWS[days]
    failed = Result.objects.filter(project=project, server_state=ServerState.OVER, outcome__in=ERROR_OUTCOMES)
    if seconds is not None:
        since = project.now() - seconds
        # a result that never came back has no received_time: its deadline is when it failed
        failed = failed.filter(Q(received_time__gt=since) | Q(outcome=Outcome.NO_REPLY, report_deadline__gt=since))
    windows = [(value, text, value == days) for value, (text, _) in FAILURE_WINDOWS.items()]
    return {"days": days, "window": label, "windows": windows}, failed


@require_GET
def failures_by_version(request: HttpRequest, project: Project) -> HttpResponse:
    """Failed results by app version and platform, then by outcome, client state (where the
    client was when it failed) and exit status, most first: BOINC's
    html/ops/failure_result_summary_by_platform.php, over every error outcome."""
    found = _failed_results(request, project)
    if isinstance(found, HttpResponse):
        return found
    context, failed = found
    rows = list(
        failed.values("app_version_id", "outcome", "client_state", "exit_status")
        .annotate(n=Count("id"))
        .order_by("-n", "app_version_id", "outcome", "exit_status")
    )
    versions = {
        av.pk: av
        for av in AppVersion.objects.filter(project=project, pk__in={r["app_version_id"] for r in rows}).select_related(
            "app"
        )
    }
    for row in rows:
        row["version"] = versions.get(row["app_version_id"])
        row["outcome_label"] = Outcome(row["outcome"]).label
        row["client_state_label"] = ClientState(row["client_state"]).label
        row["exit_name"] = EXIT_NAMES.get(row["exit_status"], "")
    context.update(rows=rows, total=sum(r["n"] for r in rows), results_url=project_reverse(request, "result_list"))
    return render(request, "project/failures_by_version.html", context)


@require_GET
def failures_by_host(request: HttpRequest, project: Project) -> HttpResponse:
    """The hosts with the most failed results, with their results in the window and their
    last failure: BOINC's html/ops/failure_result_summary_by_host.php."""
    found = _failed_results(request, project)
    if isinstance(found, HttpResponse):
        return found
    context, failed = found
    rows = list(
        failed.exclude(host=None)
        .values("host_id")
        .annotate(
            n=Count("id"), client_errors=Count("id", filter=Q(outcome=Outcome.CLIENT_ERROR)), last=Max("received_time")
        )
        .order_by("-n", "host_id")[:FAILURE_HOSTS]
    )
    hosts = Host.objects.filter(project=project, pk__in=[r["host_id"] for r in rows]).select_related("owner")
    by_id = {h.pk: h for h in hosts}
    totals = dict(
        Result.objects.filter(project=project, host_id__in=list(by_id), server_state=ServerState.OVER)
        .values("host_id")
        .annotate(n=Count("id"))
        .values_list("host_id", "n")
    )
    for row in rows:
        row["host"] = by_id[row["host_id"]]
        row["over"] = totals.get(row["host_id"], 0)
    context.update(rows=rows, limit=FAILURE_HOSTS, results_url=project_reverse(request, "result_list"))
    return render(request, "project/failures_by_host.html", context)


# --- search ---------------------------------------------------------------------------------

SEARCH_MATCHES = 20  # names listed per kind for a prefix


@require_GET
def search(request: HttpRequest, project: Project) -> HttpResponse:
    """A workunit, result, host or user of the project by its name or id: its page when one
    row matches exactly, else a list of what matched (names that start with the text too).

    A host is found by its domain name only by those who may see it (its owner and staff, as
    on BOINC's host pages); anyone can find it by its id."""
    query = request.GET.get("q", "").strip()
    context: dict[str, Any] = {"q": query, "matches": [], "searched": bool(query)}
    if len(query) > 254:
        context["error"] = "The text is too long: names have at most 254 characters."
        return render(request, "project/search.html", context, status=400)
    if not query:
        return render(request, "project/search.html", context)
    exact: list[tuple[str, str, str]] = []  # (kind, label, url)
    if query.isdigit() and 0 < int(query) < 2**63:
        pk = int(query)
        for kind, model, page in (("workunit", Workunit, "workunit_detail"), ("result", Result, "result_detail")):
            name = model.objects.filter(project=project, pk=pk).values_list("name", flat=True).first()
            if name is not None:
                exact.append((kind, name, project_reverse(request, page, pk)))
        host = Host.objects.filter(project=project, pk=pk).first()
        if host is not None:
            exact.append(("host", _shown_host_name(request.user, host), project_reverse(request, "host_detail", pk)))
        person = get_user_model().objects.filter(pk=pk).first()
        if person is not None and _in_project(person, project):
            exact.append(("user", person.get_username(), project_reverse(request, "user_detail", pk)))
    for kind, model, page in (("workunit", Workunit, "workunit_detail"), ("result", Result, "result_detail")):
        named = model.objects.filter(project=project, name=query).values_list("id", flat=True).first()
        if named is not None:
            exact.append((kind, query, project_reverse(request, page, named)))
    user = request.user
    if user.is_authenticated:
        hosts = Host.objects.filter(project=project, domain_name=query)
        if not user.is_staff:
            hosts = hosts.filter(owner=user)
        exact += [
            ("host", h.domain_name, project_reverse(request, "host_detail", h.pk)) for h in hosts[:SEARCH_MATCHES]
        ]
    person = get_user_model().objects.filter(username=query).first()
    if person is not None and _in_project(person, project):
        exact.append(("user", person.get_username(), project_reverse(request, "user_detail", person.pk)))
    if len(exact) == 1:
        return redirect(exact[0][2])
    matches = list(exact)
    seen = {url for _, _, url in exact}
    for kind, model, page in (("workunit", Workunit, "workunit_detail"), ("result", Result, "result_detail")):
        # the unique name index serves the prefix as a range (code-point collations)
        rows = (
            model.objects.filter(project=project, name__gte=query, name__lt=query + TOP, name__startswith=query)
            .order_by("name")
            .values_list("id", "name")[:SEARCH_MATCHES]
        )
        for pk, name in rows:
            url = project_reverse(request, page, pk)
            if url not in seen:
                matches.append((kind, name, url))
    context["matches"] = matches
    context["limit"] = SEARCH_MATCHES
    return render(request, "project/search.html", context)


def _shown_host_name(user: User | AnonymousUser, host: Host) -> str:
    """A host's name as backend.templatetags.host_names shows it to ``user``."""
    return host.domain_name if _can_edit_prefs(user, host) else f"host {host.pk}"


def _in_project(person: Any, project: Project) -> bool:
    """Whether ``person`` is one of the project's users: a host, a result or credit in it (as
    on the user page)."""
    return (
        Host.objects.filter(project=project, owner=person).exists()
        or UserCredit.objects.filter(project=project, user=person).exists()
        or Result.objects.filter(project=project, user=person).exists()
    )


# --- hosts and users ------------------------------------------------------------------------


@require_GET
def host_list(request: HttpRequest, project: Project) -> HttpResponse:
    try:
        page = keyset_page(
            Host.objects.filter(project=project).select_related("owner"),
            "id",
            False,
            after=request.GET.get("after", ""),
            before=request.GET.get("before", ""),
            size=PAGE_SIZE,
        )
    except BadCursor as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    context = {
        "page": page,
        "next_url": _page_url(request, after=page.next_cursor) if page.next_cursor else "",
        "prev_url": _page_url(request, before=page.prev_cursor) if page.prev_cursor else "",
    }
    return render(request, "project/host_list.html", context)


def _result_counts(results: QuerySet[Result]) -> dict[str, int]:
    """{label: n} of a host's or user's results by server state and outcome."""
    counts: dict[str, int] = {}
    for row in results.values("server_state", "outcome").annotate(n=Count("id")):
        if row["server_state"] == ServerState.OVER:
            label = Result(outcome=row["outcome"]).get_outcome_display()
        else:
            label = ServerState(row["server_state"]).label
        counts[label] = counts.get(label, 0) + row["n"]
    return counts


def _can_edit_prefs(user: User | AnonymousUser, host: Host) -> bool:
    return user.is_authenticated and (user.is_staff or user.pk == host.owner_id)


@require_GET
def host_detail(request: HtmxHttpRequest, pk: int, project: Project) -> HttpResponse:
    host = get_object_or_404(Host.objects.filter(project=project).select_related("owner"), pk=pk)
    results = Result.objects.filter(host=host)
    history = host.events.order_by("-time", "-id")[:20]
    context: dict[str, Any] = {
        "host": host,
        "recent": results.select_related("workunit").order_by("-id")[:RECENT],
        "counts": _result_counts(results),
        "granted": results.aggregate(total=Sum("granted_credit"))["total"] or 0.0,
        "app_versions": HostAppVersion.objects.filter(host=host)
        .select_related("app_version__app")
        .order_by("app_version__app__name"),
        "files": host.files.order_by("name")[:200],
        "history": history,
        "can_edit": _can_edit_prefs(request.user, host),
    }
    if not request.htmx:
        # read once, for the table and the chart's learnt estimates
        context["app_versions"] = list(context["app_versions"])
        series = runtime_estimates(host, havs=context["app_versions"])
        context["estimates"] = (
            figure_script(charts.runtime_estimates_figure(series, clock_origin(project)), "estimates-figure")
            if series
            else ""
        )
    return render_page(request, "project/host_detail.html", context, "results")


@require_GET
def user_detail(request: HttpRequest, pk: int, project: Project) -> HttpResponse:
    """A volunteer's page in ``project``: their hosts, results and credit there. A user is the
    project's when they have a host, a result or a credit row in it (BOINC's user row is the
    project's own); anyone else is a 404 here, as another project's rows are."""
    person = get_object_or_404(get_user_model(), pk=pk)
    results = Result.objects.filter(project=project, user=person)
    hosts = list(Host.objects.filter(project=project, owner=person).order_by("id"))
    credit = _user_credit(person, project)
    if not hosts and credit["credit"] is None and not results.exists():
        raise Http404(f"user {pk} has no hosts, results or credit in project {project.slug}")
    context = {
        "person": person,
        "hosts": hosts,
        "recent": results.select_related("workunit", "host").order_by("-id")[:RECENT],
        "counts": _result_counts(results),
        **credit,
    }
    return render(request, "project/user_detail.html", context)


def _user_credit(person: User, project: Project) -> dict[str, Any]:
    """The user page's credit: the user's credit row (what the validator granted), credit by
    app and the RAC chart."""
    credit = UserCredit.objects.select_related("team").filter(project=project, user=person).first()
    return {
        "credit": credit,
        "total_credit": credit.total_credit if credit else 0.0,
        "expavg_credit": credit.expavg_credit if credit else 0.0,
        "by_app": UserAppCredit.objects.filter(project=project, user=person).select_related("app").order_by("-expavg"),
        **_rac_chart(project, CreditHistory.Kind.USER, person.pk, "user-rac-figure"),
    }


def _rac_chart(project: Project, kind: CreditHistory.Kind, owner_id: int, figure_id: str) -> dict[str, Any]:
    """The context of a RAC chart over time from a user's or team's CreditHistory."""
    history = list(
        CreditHistory.objects.filter(project=project, kind=kind, owner_id=owner_id)
        .order_by("day")
        .values_list("expavg_time", "expavg_credit", "total_credit")
    )
    if not history:
        return {"rac_figure": None}
    figure = charts.rac_figure(history, clock_origin(project))
    return {"rac_figure": figure_script(figure, figure_id), "rac_figure_id": figure_id}


def _ranked_page(request: HttpRequest, queryset: QuerySet[Model]) -> dict[str, Any]:
    """The context of one page of ``queryset`` (ordered by recent average credit) for
    ``?page=N``, as BOINC's top_users.php pages by offset."""
    paginator = Paginator(queryset, PAGE_SIZE)
    try:
        page = paginator.page(request.GET.get("page") or 1)
    except (EmptyPage, PageNotAnInteger):
        raise Http404("no such page") from None
    return {
        "page": page,
        "prev_url": f"?page={page.previous_page_number()}" if page.has_previous() else "",
        "next_url": f"?page={page.next_page_number()}" if page.has_next() else "",
    }


@require_GET
def user_list(request: HttpRequest, project: Project) -> HttpResponse:
    """Users by recent average credit (BOINC's top_users.php)."""
    page = _ranked_page(
        request,
        UserCredit.objects.filter(project=project).select_related("user", "team").order_by("-expavg_credit", "user_id"),
    )
    return render(request, "project/user_list.html", page)


@require_GET
def team_list(request: HttpRequest, project: Project) -> HttpResponse:
    """Teams by recent average credit (BOINC's top_teams.php)."""
    page = _ranked_page(
        request,
        Team.objects.filter(project=project).annotate(nusers=Count("members")).order_by("-expavg_credit", "id"),
    )
    return render(request, "project/team_list.html", page)


@require_GET
def team_detail(request: HttpRequest, pk: int, project: Project) -> HttpResponse:
    team = get_object_or_404(Team.objects.filter(project=project), pk=pk)
    members = UserCredit.objects.filter(project=project, team=team)
    context = {
        "team": team,
        "members": members.select_related("user").order_by("-expavg_credit", "user_id")[:PAGE_SIZE],
        "nusers": members.count(),
        "by_app": TeamAppCredit.objects.filter(project=project, team=team).select_related("app").order_by("-expavg"),
        **_rac_chart(project, CreditHistory.Kind.TEAM, team.pk, "team-rac-figure"),
    }
    return render(request, "project/team_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def host_prefs(request: HttpRequest, pk: int, project: Project) -> HttpResponse:
    host = get_object_or_404(Host.objects.filter(project=project).select_related("owner"), pk=pk)
    if not _can_edit_prefs(request.user, host):
        raise PermissionDenied("only the host's owner and staff may edit its preferences")
    if request.method == "POST":
        form = HostPrefsForm(request.POST, instance=host)
        if form.is_valid():
            changes = form.save_changes(request.user, project.now())
            if changes:
                messages.success(
                    request, f"Saved: {form.saved_text(changes)}. The host takes them at its next scheduler request."
                )
            elif not form.shared_with:
                messages.info(request, "Nothing changed.")
            if form.shared_with:
                messages.success(
                    request,
                    f"The same preferences are set on your other computers at {form.cleaned_data['venue']}: "
                    + ", ".join(f"host {hostid}" for hostid in form.shared_with)
                    + ".",
                )
            return redirect(project_reverse(request, "host_prefs", host.pk))
        status = 400
    else:
        form = HostPrefsForm(instance=host)
        status = 200
    return render(request, "project/host_prefs.html", {"host": host, "form": form}, status=status)


# --- admin actions --------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def workunit_action(request: HttpRequest, action: str, project: Project) -> HttpResponse:
    if action not in ACTIONS:
        raise Http404(f"no action {action!r}")
    if not request.user.is_staff:
        raise PermissionDenied("admin actions are for staff")
    run, verb, description = ACTIONS[action]
    form = WorkunitIdsForm(request.POST if request.method == "POST" else request.GET, project=project)
    context: dict[str, Any] = {"form": form, "verb": verb, "description": description, "action": action}
    if not form.is_valid():
        return render(request, "project/workunit_action.html", context, status=400)
    ids = form.cleaned_data["id"]
    if request.method == "POST":
        done = run(ids, now=project.now(), actor=request.user.username, project=project)
        messages.success(request, f"{verb}: {done} of {len(ids)} workunit(s) changed.")
        if len(ids) == 1:
            return redirect(project_reverse(request, "workunit_detail", ids[0]))
        return redirect(project_reverse(request, "workunit_list"))
    context["ids"] = ids
    context["workunits"] = Workunit.objects.filter(project=project, id__in=ids).select_related("app")[:100]
    return render(request, "project/workunit_action.html", context)


# --- projects -------------------------------------------------------------------------------


@require_GET
def config(request: HttpRequest, project: Project) -> HttpResponse:
    """The project's server options (BOINC's config.xml names) and its own config.xml."""
    return render(request, "project/config.html", {"boinc_project": project})


@require_GET
def project_list(request: HttpRequest) -> HttpResponse:
    """Every project: the live ones and the worlds', with their hosts, their workunits in
    flight (not yet assimilated and deleted) and their daemons' last pass."""
    Project.demo()  # the demo project is listed from the first visit on
    in_flight = ~Q(workunits__assimilate_state=AssimilateState.DONE, workunits__file_delete_state=FileDeleteState.DONE)
    projects = Project.objects.annotate(
        nhosts=Count("hosts", distinct=True),
        in_flight=Count("workunits", filter=in_flight & Q(workunits__isnull=False), distinct=True),
        last_pass=Max("daemons__last_pass_time"),
    ).order_by("id")
    return render(request, "project/project_list.html", {"projects": projects})
