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
from django.db.models import Count, Max, Model, Q, QuerySet, Sum
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.middleware import HtmxDetails

from backend import charts, server_status
from backend.actions import ACTIONS
from backend.daemons.sched_types import SchedulerConfig
from backend.daemons.sched_version import app_version_table, runtime_estimates
from backend.forms import HostPrefsForm, WorkunitFilterForm, WorkunitIdsForm
from backend.keyset import BadCursor, keyset_page
from backend.models import (
    App,
    AssimilateState,
    CreditHistory,
    FileDeleteState,
    Host,
    HostAppVersion,
    LifecycleEvent,
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
from backend.templatetags.project_urls import project_reverse
from boincweb.figures import figure_script
from boincweb.htmx import render_page

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from django.forms import ModelChoiceField

PAGE_SIZE = 50
RECENT = 50  # results shown on a host or user page

K = TypeVar("K")
V = TypeVar("V")


class HtmxHttpRequest(HttpRequest):
    """A request as django_htmx's middleware leaves it, with ``request.htmx``."""

    htmx: HtmxDetails


# --- server status --------------------------------------------------------------------------


# The status page's panels, each a partial of its own that polls at its own pace: the daemons
# and queues (2 s), the users, computers and run times, cached for a minute (60 s), and the
# queues' recent history, a sample per pass of the periodic daemon job (10 s).
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
        [(_id, context["apps_figure"])] = _figure_scripts(
            ("apps", tuple(state.apps)), lambda: [("apps-figure", charts.app_tasks_figure(state.apps))]
        )
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
        samples = server_status.queue_history(project)
        key = ("history", json.dumps(samples, sort_keys=True))
        context["history"] = _figure_scripts(key, lambda: charts.queue_history_figures(samples))
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
            queryset.select_related("app"),
            field,
            descending,
            after=form.cleaned_data["after"],
            before=form.cleaned_data["before"],
            size=PAGE_SIZE,
        )
    except BadCursor as exc:  # the form checked the cursors; this guards a race in parsing
        return HttpResponse(str(exc), status=400)
    for wu in page.rows:  # the labels the rows show, without get_FOO_display's dict per call
        wu.assimilate_label = ASSIMILATE_LABELS.get(wu.assimilate_state, wu.assimilate_state)
        wu.file_delete_label = FILE_DELETE_LABELS.get(wu.file_delete_state, wu.file_delete_state)
    context = {
        "form": form,
        "page": page,
        "result_base": project_reverse(request, "result_detail", 0)[:-2],
        "next_url": _page_url(request, after=page.next_cursor) if page.next_cursor else "",
        "prev_url": _page_url(request, before=page.prev_cursor) if page.prev_cursor else "",
        "csv_url": project_reverse(request, "workunit_csv") + _page_url(request),
        "now": project.now(),
    }
    if not request.htmx:
        context["filters"] = _filter_form_html(request, form, project)
    return render_page(request, "project/workunit_list.html", context, "table")


CSV_COLUMNS = [
    "id",
    "name",
    "app__name",
    "create_time",
    "error_mask",
    "need_validate",
    "assimilate_state",
    "file_delete_state",
    "transition_time",
    "canonical_result_id",
    "canonical_credit",
    "min_quorum",
    "target_nresults",
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
    rows = queryset.order_by(*order).values_list(*CSV_COLUMNS).iterator(chunk_size=2000)
    writer = csv.writer(_Echo())
    header = [c.replace("__", "_") for c in CSV_COLUMNS]
    lines = (writer.writerow(row) for row in _prepend(header, rows))
    response = StreamingHttpResponse(lines, content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="workunits.csv"'
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
    timeline = charts.lifecycle_timeline(events, {r.id: r.name for r in results})
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


# --- results --------------------------------------------------------------------------------


@require_GET
def result_detail(request: HtmxHttpRequest, pk: int, project: Project) -> HttpResponse:
    result = get_object_or_404(
        Result.objects.filter(project=project).select_related("workunit", "app", "host", "user", "app_version__app"),
        pk=pk,
    )
    events = list(result.events.order_by("time", "id"))
    timeline = charts.lifecycle_timeline(events, {result.id: result.name})
    finished = result.file_delete_state == FileDeleteState.DONE
    context = {
        "result": result,
        "machine": _machine_svg(draw_row(RESULT_MACHINE, result, events)),
        "events": events,
        "timeline": figure_script(timeline, "timeline-figure"),
        "finished": finished,
    }
    return render_page(request, "project/result_detail.html", context, "live", polling_done=finished)


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
            figure_script(charts.runtime_estimates_figure(series), "estimates-figure") if series else ""
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
    return {"rac_figure": figure_script(charts.rac_figure(history), figure_id), "rac_figure_id": figure_id}


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
