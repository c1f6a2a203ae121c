"""Pages of the scheduling lab (DESIGN.md URL contracts: /lab/...)."""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent, ValidationError
from django.db import transaction
from django.db.models import Count
from django.http import (
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseForbidden,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from plotly.utils import PlotlyJSONEncoder

from boincweb.auth import DEMO_LOGIN, is_demo_account
from boincweb.figures import figure_script
from boincweb.htmx import render_page
from boincweb.id_lists import parse_ids
from scheduling import charts
from scheduling.engine import cost
from scheduling.engine.policies import NOTES as POLICY_NOTES
from scheduling.engine.readers import MAX_TEXT, scenario_to_dict
from scheduling.engine.scenario import MAX_DURATION, ScenarioError
from scheduling.exports import run_csv, write_client_state, write_pcdr
from scheduling.forms import MAX_COMPARE, CompareForm, ImportForm, RunForm, ScenarioForms, scenario_initial
from scheduling.jobs import check_job, enqueue_run, queue_problem
from scheduling.models import Run, StoredScenario
from scheduling.presets import BY_SLUG, PRESETS

# seed_demo's staff login, made only when DEBUG is on; the lab names it beside "log in"
# while that account still has this password, so a newcomer can try the lab at once


def _save(scenario_obj: StoredScenario | None, scenario, user, preset: str = "") -> StoredScenario:
    data = scenario_to_dict(scenario)
    if scenario_obj is None:
        return StoredScenario.objects.create(
            name=scenario.name, description=scenario.description, data=data, preset=preset, owner=user
        )
    scenario_obj.name, scenario_obj.description, scenario_obj.data = scenario.name, scenario.description, data
    scenario_obj.save()
    return scenario_obj


class NotStarted(Exception):
    """Why runs were not started, in words for the page, with the HTTP status to answer."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def seconds_text(seconds: float) -> str:
    """Engine time as a person reads it: "0.4 s", "12 s", "3.5 min", "2.1 h"."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def run_cost(stored: StoredScenario, *, duration: float, delta: float = 60.0, prefs=None) -> cost.Estimate:
    """The engine's cost estimate of one run of `stored` (scheduling/engine/cost.py);
    ScenarioError when the stored scenario, with `prefs`, is not valid."""
    scenario = stored.engine_scenario()
    if prefs:
        scenario = dataclasses.replace(scenario, prefs=dataclasses.replace(scenario.prefs, **prefs))
    return cost.estimate(scenario, duration, delta)


def start_runs(user, stored: StoredScenario, variants, *, duration, seed, compat, delta=60.0) -> list[Run]:
    """Create and queue one run of `stored` per (policy, prefs) in `variants`, or none.

    Nothing is created when Redis cannot take the jobs (503), when a run's estimated engine
    time is over LAB_RUN_BUDGET_SECONDS (400), or when the runs would take `user` past
    LAB_ACTIVE_RUNS_PER_USER queued and running runs (429): NotStarted says which. A
    comparison counts each of its runs."""
    problem = queue_problem()
    if problem:
        raise NotStarted(problem, 503)
    budget = settings.LAB_RUN_BUDGET_SECONDS
    try:
        estimates = [run_cost(stored, duration=duration, delta=delta, prefs=prefs) for _p, prefs in variants]
    except ScenarioError as exc:
        raise NotStarted(f"The scenario is not valid: {exc}", 400) from None
    worst = max(e.seconds for e in estimates)
    if worst > budget:
        raise NotStarted(
            f"A run would take about {seconds_text(worst)} of engine time (estimated); the lab's budget is "
            f"{seconds_text(budget)} a run (LAB_RUN_BUDGET_SECONDS). A shorter duration, fewer CPUs or "
            "projects, or longer jobs make it cheaper.",
            400,
        )
    cap = settings.LAB_ACTIVE_RUNS_PER_USER
    with transaction.atomic():
        # one start at a time per person, so two at once cannot both pass the cap
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        active = Run.objects.filter(owner=user, status__in=Run.ACTIVE).count()
        if cap and active + len(variants) > cap:
            raise NotStarted(
                f"You have {active} run{'s' if active != 1 else ''} queued or running and this would start "
                f"{len(variants)} more; the lab lets one person have {cap} at once (LAB_ACTIVE_RUNS_PER_USER). "
                "Start it again when some have finished.",
                429,
            )
        runs = []
        for policy, prefs in variants:
            run = Run.objects.create(
                scenario=stored,
                owner=user,
                policy=policy,
                duration=duration,
                seed=seed,
                compat=compat,
                delta=delta,
                prefs=prefs or {},
            )
            enqueue_run(run)
            runs.append(run)
    return runs


def cost_note(scenario, duration: float, runs: int = 1) -> dict:
    """What the scenario page says of a run's cost: the estimate for `duration` (of `runs`
    runs), the budget, and the longest duration the budget fits."""
    budget = settings.LAB_RUN_BUDGET_SECONDS

    def seconds(d):
        return cost.estimate(scenario, d).seconds

    one = seconds(duration)
    longest = MAX_DURATION
    most = seconds(longest)
    if most > budget:  # the estimate is a straight line in the duration (cost.py)
        slope = (most - seconds(longest / 2)) / (longest / 2)
        longest = max(0.0, longest - (most - budget) / slope) if slope > 0 else 0.0
    return {
        "duration": span(duration),
        "seconds": seconds_text(one),
        "runs": runs,
        "total": seconds_text(one * runs),
        "over": one > budget,
        "budget": seconds_text(budget),
        "longest": span(longest) if longest >= 60 else "under a minute",
        "capped": longest < MAX_DURATION,
    }


def _check_jobs(runs) -> None:
    """Fail the runs whose RQ job can no longer finish them, so no page waits forever."""
    now = timezone.now()
    for run in runs:
        if not run.is_over:
            check_job(run, now=now)


def demo_login() -> tuple[str, str] | None:
    """The demo login to show beside "log in": only with DEBUG on and while seed_demo's account
    exists, is active and still has its password (boincweb/auth.py)."""
    if not settings.DEBUG:
        return None
    user = get_user_model().objects.filter(username=DEMO_LOGIN[0], is_active=True).first()
    return DEMO_LOGIN if user is not None and is_demo_account(user) else None


def _login_hint(request) -> tuple[str, str] | None:
    return None if request.user.is_authenticated else demo_login()


def body_problem(request) -> str | None:
    """Why the POST body cannot be read as a form (over Django's DATA_UPLOAD_MAX_MEMORY_SIZE
    or DATA_UPLOAD_MAX_NUMBER_FIELDS), in words for the page; None when it can."""
    try:
        request.POST  # noqa: B018 (reading it is the test)
    except RequestDataTooBig:
        size = request.META.get("CONTENT_LENGTH") or "more"
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / (1024 * 1024)
        return (
            f"The form sent {size} bytes of text; a form may send at most {limit:g} MB besides its files, "
            f"and P(C, D, R) text may be at most {MAX_TEXT:,} characters. Nothing was saved."
        )
    except (TooManyFieldsSent, TooManyFilesSent):
        return (
            f"The form sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields; "
            "remove some rows. Nothing was saved."
        )
    return None


def readable_post(on_problem):
    """Read a POST body before the CSRF check would, so a body Django refuses to parse gets
    `on_problem(request, message)` (the page with the reason, status 413) instead of a bare
    400; a readable one goes through the CSRF check and the view as usual (Django's
    csrf_exempt + csrf_protect pattern for reading a request before the check). The page
    answered to an unreadable body changes nothing."""

    def decorate(view):
        protected = csrf_protect(view)

        @csrf_exempt
        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method == "POST":
                problem = body_problem(request)
                if problem:
                    return on_problem(request, problem, *args, **kwargs)
            return protected(request, *args, **kwargs)

        return wrapper

    return decorate


def _not_yours(stored: StoredScenario):
    return HttpResponseForbidden(
        f"Only the owner of “{stored.name}” or staff may change or delete it; duplicate it to "
        "change a copy of your own.",
        content_type="text/plain; charset=utf-8",
    )


# ---------------------------------------------------------------- scenarios


@require_GET
def index(request):
    scenarios = StoredScenario.objects.annotate(n_runs=Count("runs"))[:200]
    return render(
        request,
        "lab/index.html",
        {
            "scenarios": scenarios,
            "presets": PRESETS,
            "runs": Run.objects.select_related("scenario")[:15],
            "demo_login": _login_hint(request),
        },
    )


@require_POST
@login_required
def load_preset(request, slug):
    preset = BY_SLUG.get(slug)
    if preset is None:
        return HttpResponse(f"No preset named {slug!r}.", status=404, content_type="text/plain")
    stored = _save(None, preset.scenario(), request.user, preset=slug)
    messages.success(request, f"Loaded the preset “{stored.name}”.")
    return redirect("lab:scenario", stored.pk)


def _scenario_form_too_big(request, problem, pk=None):
    stored = get_object_or_404(StoredScenario, pk=pk) if pk is not None else None
    forms = ScenarioForms(initial=_initial_forms(stored))
    forms.errors.append(problem)
    return render(request, "lab/scenario_form.html", {"forms": forms, "stored": stored}, status=413)


@login_required
@require_http_methods(["GET", "POST"])
@readable_post(_scenario_form_too_big)
def scenario_new(request):
    return _scenario_form(request, None)


@login_required
@require_http_methods(["GET", "POST"])
@readable_post(_scenario_form_too_big)
def scenario_edit(request, pk):
    stored = get_object_or_404(StoredScenario, pk=pk)
    if not stored.editable_by(request.user):
        return _not_yours(stored)
    return _scenario_form(request, stored)


def _stored_scenario(stored: StoredScenario | None):
    """The engine scenario of `stored`, None when there is none or it is not valid."""
    if stored is None:
        return None
    try:
        return stored.engine_scenario()
    except ScenarioError:
        return None


def _scenario_form(request, stored: StoredScenario | None):
    if request.method == "POST":
        forms = ScenarioForms(request.POST, previous=_stored_scenario(stored))
        if forms.is_valid():
            saved = _save(stored, forms.scenario, request.user)
            messages.success(request, f"Saved “{saved.name}”.")
            return redirect("lab:scenario", saved.pk)
        status = 400
    else:
        forms = ScenarioForms(initial=_initial_forms(stored))
        status = 200
    return render(request, "lab/scenario_form.html", {"forms": forms, "stored": stored}, status=status)


def _initial_forms(stored: StoredScenario | None) -> dict:
    """The scenario form's initial data: the stored scenario's, or a two-project start."""
    previous = _stored_scenario(stored)
    return (
        scenario_initial(previous)
        if previous
        else {
            "projects": [{"name": "Alpha", "resource_share": 100}, {"name": "Beta", "resource_share": 100}],
            "apps": [{"project": "Alpha", "name": "alpha_app"}, {"project": "Beta", "name": "beta_app"}],
            "meta": {"name": "my scenario"},
        }
    )


def span(seconds: float) -> str:
    """A length of time in the unit a person would say it in: 6 min, 2.4 h, 1.5 days."""
    if seconds < 3600:
        return f"{seconds / 60:.3g} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def _duration_text(seconds: float) -> str:
    """A duration as the run forms take it back (forms.parse_duration)."""
    if seconds % 86400 == 0:
        return f"{seconds / 86400:g}d"
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    return f"{seconds:g}"


@require_GET
def scenario_detail(request, pk):
    stored = get_object_or_404(StoredScenario, pk=pk)
    context = _scenario_context(request, stored)
    # the polled list of runs stops polling once none is still going
    return render_page(request, "lab/scenario_detail.html", context, "runs", polling_done=not context["busy"])


def _compare_forms(stored: StoredScenario, bound: CompareForm | None = None) -> tuple[CompareForm, CompareForm]:
    """The scenario page's two comparison forms, policies and one parameter's values; a preset's
    scenario opens with the run length and the policies its text is about. `bound` (a form
    sent back with errors) takes the place of the one it was sent from."""
    preset = BY_SLUG.get(stored.preset)
    initial = {}
    if preset is not None:
        initial = {
            "duration": _duration_text(preset.duration),
            "policies": list(preset.policies),
            "policy": preset.policies[-1],
        }
    policies = CompareForm(initial=initial)
    parameter = CompareForm(initial=dict(initial, parameter="cpu_scheduling_period_minutes"), auto_id="vary_%s")
    if bound is not None and bound.data.get("parameter"):
        bound.auto_id = "vary_%s"
        parameter = bound
    elif bound is not None:
        policies = bound
    return policies, parameter


def _scenario_context(request, stored, run_form=None, compare_form=None) -> dict:
    """The scenario page's context; `run_form` or `compare_form`, sent back with errors, takes
    the place of the empty one."""
    try:
        scenario, problem = stored.engine_scenario(), ""
    except ScenarioError as exc:
        scenario, problem = None, str(exc)
    runs = list(stored.runs.all()[:50])
    _check_jobs(runs)
    preset = BY_SLUG.get(stored.preset)
    if run_form is None:
        run_form = RunForm(
            initial={"duration": _duration_text(preset.duration), "policy": preset.policies[-1]} if preset else {}
        )
    compare_policies, compare_parameter = _compare_forms(stored, compare_form)
    busy = any(not r.is_over for r in runs)
    costs = {}
    if scenario is not None and not request.htmx:  # the polled list of runs shows none
        for key, form in (("run", run_form), ("policies", compare_policies), ("parameter", compare_parameter)):
            costs[key] = cost_note(scenario, _form_duration(form), _form_runs(form))
    buffer = ""
    if scenario is not None:
        prefs = scenario.prefs
        buffer = (
            f"at least {span(prefs.work_buf_min_days * 86400)}, "
            f"up to {span((prefs.work_buf_min_days + prefs.work_buf_additional_days) * 86400)}"
        )
    return {
        "stored": stored,
        "scenario": scenario,
        "problem": problem,
        "runs": runs,
        "buffer": buffer,
        "busy": busy,
        "run_form": run_form,
        "compare_form": compare_policies,
        "parameter_form": compare_parameter,
        "preset": preset,
        "pcdr_preview": write_pcdr(scenario) if scenario else "",
        "costs": costs,
        "can_edit": stored.editable_by(request.user),
        "demo_login": _login_hint(request),
    }


def _scenario_page_with_errors(request, stored, status: int, **forms):
    """The scenario page again, with the run or compare form that was sent and its errors."""
    return render(request, "lab/scenario_detail.html", _scenario_context(request, stored, **forms), status=status)


def _form_duration(form) -> float:
    """The duration a run or compare form holds: the one sent when it is valid, else its
    initial one (the field's default when the page gives none)."""
    if form.is_bound and form.is_valid():
        return form.cleaned_data["duration"]
    initial = form.initial.get("duration", form.fields["duration"].initial)
    try:
        return form.fields["duration"].to_python(initial)
    except ValidationError:
        return form.fields["duration"].to_python(form.fields["duration"].initial)


def _form_runs(form) -> int:
    """How many runs a form starts: one, or a comparison's variants (its ticked policies, or
    the values sent; two before any are)."""
    if not isinstance(form, CompareForm):
        return 1
    if form.is_bound and form.is_valid():
        return len(form.cleaned_data["variants"])
    if form.initial.get("parameter"):
        return 2
    return max(2, len(form.initial.get("policies") or form.fields["policies"].initial))


@require_POST
@login_required
def scenario_duplicate(request, pk):
    stored = get_object_or_404(StoredScenario, pk=pk)
    copy = StoredScenario.objects.create(
        name=f"{stored.name} (copy)"[:120],
        description=stored.description,
        data=stored.data,
        preset=stored.preset,
        owner=request.user,
    )
    messages.success(request, f"Duplicated as “{copy.name}”.")
    return redirect("lab:scenario", copy.pk)


@require_POST
@login_required
def scenario_delete(request, pk):
    stored = get_object_or_404(StoredScenario, pk=pk)
    if not stored.editable_by(request.user):
        return _not_yours(stored)
    name = stored.name
    stored.delete()
    messages.success(request, f"Deleted “{name}” and its runs.")
    return redirect("lab:index")


def _import_too_big(request, problem):
    form = ImportForm()
    form.cleaned_data = {}
    form.add_error(None, problem)
    return render(request, "lab/import.html", {"form": form}, status=413)


@login_required
@require_http_methods(["GET", "POST"])
@readable_post(_import_too_big)
def scenario_import(request):
    if request.method == "POST":
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            stored = _save(None, form.cleaned_data["scenario"], request.user)
            messages.success(request, f"Imported “{stored.name}”.")
            return redirect("lab:scenario", stored.pk)
        return render(request, "lab/import.html", {"form": form}, status=400)
    return render(request, "lab/import.html", {"form": ImportForm()})


def _download(content, content_type, filename):
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


SCENARIO_EXPORTS = {
    "pcdr": (write_pcdr, "text/plain; charset=utf-8", "scenario-{pk}.txt"),
    "client_state": (write_client_state, "application/zip", "scenario-{pk}-client_state.zip"),
    "json": (lambda s: json.dumps(scenario_to_dict(s), indent=1), "application/json", "scenario-{pk}.json"),
}


@require_GET
def export_scenario(request, pk, fmt):
    """The scenario as P(C, D, R) text, a zip of client_state.xml and prefs, or our JSON."""
    stored = get_object_or_404(StoredScenario, pk=pk)
    try:
        scenario = stored.engine_scenario()
    except ScenarioError as exc:
        return HttpResponseBadRequest(f"The stored scenario is not valid: {exc}", content_type="text/plain")
    write, content_type, filename = SCENARIO_EXPORTS[fmt]
    return _download(write(scenario), content_type, filename.format(pk=stored.pk))


# ---------------------------------------------------------------- runs


@require_POST
@login_required
def run_start(request, pk):
    stored = get_object_or_404(StoredScenario, pk=pk)
    form = RunForm(request.POST)
    if not form.is_valid():
        return _scenario_page_with_errors(request, stored, 400, run_form=form)
    d = form.cleaned_data
    try:
        [run] = start_runs(
            request.user,
            stored,
            [(d["policy"], {})],
            duration=d["duration"],
            seed=d["seed"],
            compat=d["compat"],
            delta=d["delta"],
        )
    except NotStarted as exc:
        form.add_error(None, str(exc))
        return _scenario_page_with_errors(request, stored, exc.status, run_form=form)
    return redirect("lab:run", run.pk)


@require_POST
@login_required
def compare_start(request, pk):
    """Start one run per variant on the same scenario and seed: one per chosen policy, or one
    per value of a preference under one policy; then open the comparison."""
    stored = get_object_or_404(StoredScenario, pk=pk)
    form = CompareForm(request.POST)
    if not form.is_valid():
        return _scenario_page_with_errors(request, stored, 400, compare_form=form)
    d = form.cleaned_data
    try:
        runs = start_runs(
            request.user, stored, d["variants"], duration=d["duration"], seed=d["seed"], compat=d["compat"]
        )
    except NotStarted as exc:
        form.add_error(None, str(exc))
        return _scenario_page_with_errors(request, stored, exc.status, compare_form=form)
    return redirect(reverse("lab:compare") + "?runs=" + ",".join(str(r.pk) for r in runs))


# what boinc5's debt charts show, and what it leaves out (reference/debt-era.md §3, §5)
DEBT_NOTE = (
    "Short-term debt is the CPU time the client owes a project: at each accounting step every "
    "project with a runnable job is owed its resource share of the time the CPUs ran and "
    "charged the time its own jobs ran; the client keeps the smallest at 0 and caps them at one "
    "day (BOINC 5's rule), and a project with nothing to run has none. The charts and the log "
    "show them less their mean over the runnable projects, as BOINC 6 kept them, which changes "
    "no order: the job scheduler runs the project with the most, so a project that runs all "
    "the time sits below 0 and one that waits climbs above. Long-term debt is the same over every "
    "project that could run, and decides which project is asked for work. GPUs have their own "
    "short- and long-term debts, as in BOINC 6; the charts show the CPU's. Not modelled: "
    "BOINC 6's per-project work-fetch back-off per processor type and its 'overworked' rule "
    "for GPUs beyond the long-term debt threshold."
)


def _run_context(run: Run) -> dict:
    """A finished run's charts, card and facts; a running one's charts so far (partial records)."""
    records = run.records() if run.status in (Run.Status.DONE, Run.Status.RUNNING) else None
    ctx: dict[str, Any] = {
        "run": run,
        "records": records,
        "policy_note": POLICY_NOTES.get(run.policy, ""),
        "debt_note": DEBT_NOTE if run.policy == "boinc5" else "",
        "partial": run.status == Run.Status.RUNNING and records is not None,
    }
    if records is not None:
        ctx["chart_scripts"] = chart_scripts(run, records)
        if not ctx["partial"]:
            ctx["card"] = charts.figure_card(records["figures"])
            ctx["facts"] = charts.run_facts(records)
            ctx["compare_with"] = list(_comparable(run)[: MAX_COMPARE - 1])
    return ctx


def _comparable(run: Run):
    """The scenario's other finished runs a comparison with `run` is fair against: same seed,
    length, step and compat, so only the policy or a preference differs."""
    return (
        Run.objects.filter(
            scenario_id=run.scenario_id,
            status=Run.Status.DONE,
            seed=run.seed,
            duration=run.duration,
            delta=run.delta,
            compat=run.compat,
        )
        .exclude(pk=run.pk)
        .order_by("pk")
    )


def chart_data(run: Run, records: dict, colours: dict | None = None) -> dict[str, Any]:
    """A run's four figures and its decision log by the ids the page knows them by:
    run-<id>-gantt, run-<id>-rec, run-<id>-priority and run-<id>-buffer, drawn by
    static/js/charts.js, and run-<id>-log, the decisions and the run's length that
    static/js/lab.js's time cursor reads."""
    colours = colours or charts.project_colours([p["name"] for p in records["projects"]])
    figures = {
        "gantt": charts.gantt(records, colours),
        "rec": charts.rec_chart(records, colours),
        "priority": charts.priority_chart(records, colours),
        "buffer": charts.buffer_chart(records, colours),
    }
    log = {
        "decisions": [
            [round(d["time"] / 3600, 4), d["kind"], d["project"], d["job"], d["text"]] for d in records["decisions"]
        ],
        "run": {
            "id": run.pk,
            "label": run.label,
            "duration_h": records["duration"] / 3600,
            "partial": bool(records.get("partial")),
        },
    }
    data: dict[str, Any] = {f"run-{run.pk}-{name}": fig for name, fig in figures.items()}
    data[f"run-{run.pk}-log"] = log
    return data


def chart_scripts(run: Run, records: dict, colours: dict | None = None) -> str:
    """chart_data as the page embeds it: one <script type="application/json"> per id
    (boincweb.figures)."""
    scripts = [figure_script(value, element_id) for element_id, value in chart_data(run, records, colours).items()]
    return mark_safe("\n".join(scripts))  # each made safe by json_script


@require_GET
def run_charts(request, pk):
    """A finished run's charts and decision log as JSON (chart_data), which the comparison page
    loads after its HTML, each run's at once. ``project`` (repeated) names the projects of every
    run on that page, so that each project has one colour across them; it must include each of
    this run's. Cached by the browser: a finished run's charts never change."""
    run = get_object_or_404(Run, pk=pk)
    if run.status != Run.Status.DONE:
        return HttpResponse(
            f"Run {run.pk} is {run.status}; it has no charts yet.", status=409, content_type="text/plain"
        )
    records = run.records()
    assert records is not None  # a done run has its records
    names = set(request.GET.getlist("project"))
    missing = sorted({p["name"] for p in records["projects"]} - names) if names else []
    if missing:
        return HttpResponseBadRequest(
            f"project must name each of run {run.pk}'s projects; {missing[0]!r} is not among them.",
            content_type="text/plain",
        )
    colours = charts.project_colours(names) if names else None
    body = json.dumps(chart_data(run, records, colours), cls=PlotlyJSONEncoder)
    response = HttpResponse(body, content_type="application/json")
    response["Cache-Control"] = "private, max-age=86400"
    return response


@require_GET
def run_detail(request, pk):
    run = get_object_or_404(Run.objects.select_related("scenario"), pk=pk)
    _check_jobs([run])
    return render_page(request, "lab/run_detail.html", _run_context(run), "status", polling_done=run.is_over)


@require_GET
def export_run(request, pk, fmt):
    """A finished run's records as JSON or CSV; a run still going has none yet (409)."""
    run = get_object_or_404(Run, pk=pk)
    if run.status != Run.Status.DONE:
        return HttpResponse(
            f"Run {run.pk} is {run.status}; it has no records to export.", status=409, content_type="text/plain"
        )
    if fmt == "json":
        return JsonResponse(run.records())
    return _download(run_csv(run.records()), "text/csv; charset=utf-8", f"run-{run.pk}.csv")


# ---------------------------------------------------------------- compare


def difference_labels(runs: list[Run]) -> list[str]:
    """Each run named by what sets it apart from the others on one page: its scenario, policy,
    preferences, seed, compat or length, whichever differ; its number is added when that
    still leaves two runs with one name."""
    aspects = (
        lambda r: r.scenario.name,
        lambda r: r.policy,
        lambda r: r.variant or "the scenario's preferences",
        lambda r: f"seed {r.seed}",
        lambda r: r.get_compat_display(),
        lambda r: span(r.duration),
    )
    parts: list[list[str]] = [[] for _r in runs]
    for aspect in aspects:
        values = [aspect(r) for r in runs]
        if len(set(values)) > 1:
            for part, value in zip(parts, values):
                part.append(value)
    labels = [", ".join(p) for p in parts]
    if len(set(labels)) < len(labels):
        labels = [f"{label} (#{r.pk})" if label else f"#{r.pk}" for label, r in zip(labels, runs)]
    return labels


def _picker(request, run: Run):
    """One run given: the scenario's other runs to compare it with, the fair ones ticked."""
    fair = set(_comparable(run).values_list("pk", flat=True)[: MAX_COMPARE - 1])
    others = list(run.scenario.runs.exclude(pk=run.pk)[:50])
    return render(
        request,
        "lab/compare.html",
        {
            "picker": run,
            "candidates": [(r, r.pk in fair) for r in others],
            "max_others": MAX_COMPARE - 1,
            "runs": [run],
            "same_scenario": True,
        },
    )


def _charts_url(run: Run, records: dict, names: set[str]) -> str:
    """Where the comparison page loads ``run``'s charts (run_charts), naming every project on
    the page when ``run`` lacks some of them, so that colours agree across its runs."""
    url = reverse("lab:run_charts", args=[run.pk])
    if names != {p["name"] for p in records["projects"]}:
        url += "?" + urlencode({"project": sorted(names)}, doseq=True)
    return url


def _rec_heading(policies: set[str]) -> str:
    if policies == {"boinc5"}:
        return "Long-term debt per project"
    if "boinc5" not in policies:
        return "REC per project"
    return "REC (" + ", ".join(sorted(policies - {"boinc5"})) + ") and long-term debt (boinc5) per project"


@require_GET
def compare(request):
    """Runs side by side; a single run id opens a picker of the scenario's runs to compare it
    with. `runs` is one comma-separated list or the picker's repeated parameter."""
    ids = parse_ids(
        ",".join(request.GET.getlist("runs")),
        noun="run",
        example="/lab/compare/?runs=1,2",
        minimum=1,
        maximum=MAX_COMPARE,
    )
    if isinstance(ids, str):
        return HttpResponseBadRequest(ids, content_type="text/plain")
    found = {r.pk: r for r in Run.objects.select_related("scenario").filter(pk__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        return HttpResponse(f"No run {missing[0]}.", status=404, content_type="text/plain")
    runs = [found[i] for i in ids]
    if len(runs) == 1:
        return _picker(request, runs[0])
    _check_jobs(runs)
    labels = dict(zip(ids, difference_labels(runs)))
    over = all(r.is_over for r in runs)
    ctx = {
        "runs": [(r, labels[r.pk]) for r in runs],
        "over": over,
        "ids": ",".join(map(str, ids)),
        "same_scenario": len({r.scenario_id for r in runs}) == 1,
        "scenario": runs[0].scenario,
        "title": " and ".join(labels.values()),
    }
    done = [r for r in runs if r.status == Run.Status.DONE]
    if over and done:
        loaded = [(r, r.records()) for r in done]
        names = {p["name"] for _r, rec in loaded for p in rec["projects"]}
        ctx["panels"] = [
            {
                "run": r,
                "label": labels[r.pk],
                "card": charts.figure_card(rec["figures"]),
                "facts": charts.run_facts(rec),
                "note": POLICY_NOTES.get(r.policy, ""),
                "rec_label": "long-term debt" if r.policy == "boinc5" else "REC",
                "priority_label": "short-term debt" if r.policy == "boinc5" else "scheduling priority",
                "charts_url": _charts_url(r, rec, names),
            }
            for r, rec in loaded
        ]
        ctx["rec_heading"] = _rec_heading({r.policy for r, _rec in loaded})
        ctx["rows"] = charts.compare_figures([rec for _r, rec in loaded])
        if len(loaded) > 1:
            ctx["why"] = charts.explain_differences([(labels[r.pk], rec) for r, rec in loaded])
    return render_page(request, "lab/compare.html", ctx, "panels", polling_done=over)
