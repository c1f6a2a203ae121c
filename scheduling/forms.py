"""Forms of the scheduling lab: the host and its preferences, formsets of GPUs, projects and
apps, import of P(C, D, R) text or client_state.xml, and the run and compare choices.

Units on the forms are the ones people think in (GFLOPS, hours, minutes); `ScenarioForms`
turns them into the engine's dataclasses (FLOPS and seconds) and back. Every field's range
is the engine's limit (scheduling/engine/scenario.py, "Limits") in the field's unit, so a
number the engine would refuse is refused on the field that holds it, with the limit.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from typing import cast

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.forms.formsets import TOTAL_FORM_COUNT

from boincweb.bounds import BufferDaysField, KeepsShownNumbers, seed_field
from scheduling.engine import scenario as limits
from scheduling.engine.readers import MAX_FILE_BYTES, MAX_TEXT, read_client_state, read_json, read_pcdr
from scheduling.engine.scenario import (
    GPU_TYPES,
    App,
    AppVersion,
    Availability,
    GpuType,
    Host,
    Prefs,
    Project,
    Scenario,
    ScenarioError,
)
from scheduling.engine.units import parse_duration
from scheduling.models import VARIABLE_PREFS, Run

HOUR = 3600.0
GIGA = 1e9
MAX_UPLOAD = MAX_FILE_BYTES
MAX_DURATION = limits.MAX_DURATION
MAX_COMPARE = 6  # runs on one comparison page
# the engine's limits in the forms' units
MAX_HOURS = limits.MAX_TIME / HOUR
MIN_LAMBDA_HOURS = limits.MIN_LAMBDA / HOUR
MIN_GFLOPS, MAX_GFLOPS = limits.MIN_FLOPS / GIGA, limits.MAX_FLOPS / GIGA


def _fraction(label, help_text=""):
    return forms.FloatField(
        label=label, initial=1.0, help_text=help_text, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )


def _positive(label, initial, help_text="", *, high, low=None, **kw):
    """A number above 0 (at least `low` when given) and at most `high`."""
    low_validator = (
        MinValueValidator(low, f"At least {low:g}.")
        if low is not None
        else MinValueValidator(1e-9, "Must be more than 0.")
    )
    return forms.FloatField(
        label=label,
        initial=initial,
        help_text=help_text,
        validators=[low_validator, MaxValueValidator(high, f"At most {high:g}.")],
        **kw,
    )


def _zero_to(high):
    return [MinValueValidator(0.0, "Cannot be negative."), MaxValueValidator(high, f"At most {high:g}.")]


def _at_least_zero(label, initial, help_text="", *, high):
    return forms.FloatField(label=label, initial=initial, help_text=help_text, validators=_zero_to(high))


def _buffer_days(label, initial, help_text):
    return BufferDaysField(
        label=label,
        initial=initial,
        help_text=help_text,
        high=limits.MAX_BUFFER_DAYS,
        validators=_zero_to(limits.MAX_BUFFER_DAYS),
    )


def _hours(label, initial=1.0, help_text=""):
    """A mean availability period in hours, within the engine's lambda limits."""
    return _positive(label, initial, help_text, low=MIN_LAMBDA_HOURS, high=MAX_HOURS)


def _gflops(label, initial, help_text=""):
    return _positive(label, initial, help_text, low=MIN_GFLOPS, high=MAX_GFLOPS)


class ScenarioMetaForm(forms.Form):
    name = forms.CharField(max_length=120)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class HostForm(forms.Form):
    """The host: BOINC's host_info and time_stats (reference/client.md §2)."""

    ncpus = forms.IntegerField(label="CPUs", initial=2, min_value=1, max_value=limits.MAX_CPUS, help_text="p_ncpus")
    cpu_gflops = _gflops("GFLOPS per CPU", 1.0, "p_fpops / 10⁹")
    on_frac = _fraction(
        "on fraction",
        "0 to 1: the part of the time the computer (and the BOINC client) is running, e.g. 0.8 for "
        "off one hour in five; BOINC's time_stats on_frac",
    )
    connected_frac = _fraction(
        "connected fraction",
        "0 to 1: the part of the running time it has a network connection; RPCs wait for one. "
        "BOINC's time_stats connected_frac",
    )
    active_frac = _fraction(
        "active fraction", "0 to 1: the part of the running time computing is allowed (active_frac)"
    )
    gpu_active_frac = _fraction(
        "GPU active fraction", "0 to 1: the part of the computing time GPU computing is allowed (gpu_active_frac)"
    )
    on_hours = _hours("mean on period (hours)", 1.0, "hours: the mean length of one stretch with the computer on")
    connected_hours = _hours("mean connected period (hours)", help_text="hours: the mean length of one connection")
    active_hours = _hours("mean active period (hours)", help_text="hours: the mean length of one stretch of computing")
    gpu_active_hours = _hours(
        "mean GPU-active period (hours)", help_text="hours: the mean length of one stretch of GPU computing"
    )


class PrefsForm(KeepsShownNumbers, forms.Form):
    """Host preferences: global_prefs.xml and cc_config.xml (reference/client.md §2)."""

    work_buf_min_days = _buffer_days(
        "min buffer (days)", 0.1, "days, as BOINC's work_buf_min_days: 0.25 is 6 hours; work is fetched below it"
    )
    work_buf_additional_days = _buffer_days(
        "additional buffer (days)",
        0.5,
        "days, as BOINC's work_buf_additional_days: the most work held is the min buffer plus this",
    )
    cpu_scheduling_period_minutes = _positive(
        "time slice (minutes)",
        60.0,
        "minutes, as BOINC's cpu_scheduling_period_minutes: how long a job keeps its CPU before the "
        "scheduler may switch",
        low=limits.MIN_SCHEDULING_PERIOD_MINUTES,
        high=limits.MAX_SCHEDULING_PERIOD_MINUTES,
    )
    leave_apps_in_memory = forms.BooleanField(label="leave apps in memory while preempted", required=False)
    max_ncpus_pct = forms.FloatField(
        label="use at most % of CPUs",
        initial=100.0,
        validators=[MinValueValidator(0.01, "Must be more than 0."), MaxValueValidator(100.0)],
    )
    cpu_usage_limit = forms.FloatField(
        label="use at most % of CPU time",
        initial=100.0,
        validators=[MinValueValidator(0.01, "Must be more than 0."), MaxValueValidator(100.0)],
    )
    rec_half_life_days = _positive(
        "REC half-life (days)", 10.0, "cc_config rec_half_life_days", high=limits.MAX_REC_HALF_LIFE_DAYS
    )
    ncpus = forms.IntegerField(
        label="cc_config ncpus",
        required=False,
        min_value=1,
        max_value=limits.MAX_CPUS,
        help_text="overrides the CPU count when set",
    )
    report_results_immediately = forms.BooleanField(required=False)
    fetch_minimal_work = forms.BooleanField(required=False)


class GpuForm(forms.Form):
    gpu_type = forms.ChoiceField(label="GPU type", required=False, choices=[("", "none")] + [(g, g) for g in GPU_TYPES])
    count = forms.IntegerField(min_value=1, max_value=limits.MAX_GPUS_PER_TYPE, initial=1)
    peak_gflops = _gflops("peak GFLOPS per device", 100.0)


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=60)
    resource_share = forms.FloatField(
        initial=100.0,
        validators=[
            MinValueValidator(0.0, "Cannot be negative."),
            MaxValueValidator(limits.MAX_SHARE, f"At most {limits.MAX_SHARE:g}."),
        ],
    )
    available_frac = _fraction("scheduler up fraction", "share of time its scheduler answers")
    available_hours = _hours("mean up period (h)")


RESOURCE_CHOICES = [("cpu", "CPU")] + [(g, g) for g in GPU_TYPES]


class AppForm(forms.Form):
    """One app version; rows of the same project and app become one app with several versions."""

    project = forms.CharField(max_length=60, help_text="a project's name above")
    name = forms.CharField(label="app", max_length=60)
    resource = forms.ChoiceField(choices=RESOURCE_CHOICES, initial="cpu")
    avg_ncpus = forms.FloatField(
        label="CPUs per job", initial=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(limits.MAX_CPUS)]
    )
    gpu_usage = forms.FloatField(
        label="GPUs per job",
        initial=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(limits.MAX_GPUS_PER_TYPE)],
    )
    gflops = _gflops("job speed (GFLOPS)", 1.0, "how fast this version computes")
    size_gflop = _positive("job size (GFLOP)", 3600.0, "fpops_est / 10⁹", high=limits.MAX_FPOPS / GIGA)
    latency_bound_hours = _positive("deadline (hours after receipt)", 240.0, high=MAX_HOURS)
    checkpoint_minutes = _at_least_zero("checkpoint every (min)", 0.0, high=limits.MAX_TIME / 60)
    resume_cost_minutes = _at_least_zero("restart cost (min)", 0.0, high=limits.MAX_TIME / 60)

    def clean(self):
        data = super().clean()
        if data.get("resource") == "cpu" and data.get("avg_ncpus") == 0:
            self.add_error("avg_ncpus", "A CPU app version needs more than 0 CPUs per job.")
        if data.get("resource", "cpu") != "cpu" and not data.get("gpu_usage"):
            self.add_error("gpu_usage", "A GPU app version needs more than 0 GPUs per job.")
        return data


# Each formset builds at most its max_num forms (absolute_max), whatever TOTAL_FORMS says;
# Django's default, max_num + 1000, built a thousand forms for a forged count.
class _Formset(forms.BaseFormSet):
    def total_form_count(self):
        """Django's count, but a TOTAL_FORMS over absolute_max, which the page never sends,
        builds only the rows it started with: Django still refuses it ("Please submit at most
        ..."), without building and showing absolute_max rows first."""
        total = super().total_form_count()
        if self.is_bound and self.management_form.cleaned_data[TOTAL_FORM_COUNT] > self.absolute_max:
            return min(self.initial_form_count(), total)
        return total

    def named_rows(self):
        return [f.cleaned_data for f in self.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]


# formset_factory makes a subclass of `formset`; the stubs type it as the base class.
GpuFormSet = cast(
    type[_Formset],
    forms.formset_factory(
        GpuForm,
        formset=_Formset,
        extra=1,
        can_delete=True,
        max_num=len(GPU_TYPES),
        absolute_max=len(GPU_TYPES),
        validate_max=True,
    ),
)
ProjectFormSet = cast(
    type[_Formset],
    forms.formset_factory(
        ProjectForm,
        formset=_Formset,
        extra=1,
        can_delete=True,
        min_num=1,
        validate_min=True,
        max_num=limits.MAX_PROJECTS,
        absolute_max=limits.MAX_PROJECTS,
        validate_max=True,
    ),
)
# The engine takes MAX_APP_VERSIONS; the form, eleven fields a row, sends at most this many
# rows within Django's DATA_UPLOAD_MAX_NUMBER_FIELDS (1000) beside 40 projects and the rest.
APP_ROWS = min(limits.MAX_APP_VERSIONS, 60)
AppFormSet = cast(
    type[_Formset],
    forms.formset_factory(
        AppForm,
        formset=_Formset,
        extra=1,
        can_delete=True,
        min_num=1,
        validate_min=True,
        max_num=APP_ROWS,
        absolute_max=APP_ROWS,
        validate_max=True,
    ),
)


def _h(seconds: float) -> float:
    return round(seconds / HOUR, 6)


def scenario_initial(scenario: Scenario) -> dict:
    """Initial data for every form of `ScenarioForms` from a scenario."""
    host, prefs = scenario.host, scenario.prefs
    host_initial = dict(ncpus=host.ncpus, cpu_gflops=host.cpu_flops / GIGA)
    for key in ("on", "connected", "active", "gpu_active"):
        a = getattr(host, key)
        host_initial[f"{key}_frac"] = a.frac
        host_initial[f"{key}_hours"] = _h(a.mean_up)
    apps = []
    for p in scenario.projects:
        for a in p.apps:
            for v in a.versions:
                apps.append(
                    dict(
                        project=p.name,
                        name=a.name,
                        resource=v.resource,
                        avg_ncpus=v.avg_ncpus,
                        gpu_usage=v.gpu_usage,
                        gflops=v.flops / GIGA,
                        size_gflop=a.fpops_est / GIGA,
                        latency_bound_hours=_h(a.latency_bound),
                        checkpoint_minutes=a.checkpoint_period / 60,
                        resume_cost_minutes=a.resume_cost / 60,
                    )
                )
    return dict(
        meta=dict(name=scenario.name, description=scenario.description),
        host=host_initial,
        prefs={f: getattr(prefs, f) for f in PrefsForm.base_fields},
        gpus=[dict(gpu_type=g.name, count=g.count, peak_gflops=g.peak_flops / GIGA) for g in host.gpus],
        projects=[
            dict(
                name=p.name,
                resource_share=p.resource_share,
                available_frac=p.available.frac,
                available_hours=_h(p.available.mean_up),
            )
            for p in scenario.projects
        ],
        apps=apps,
    )


class ScenarioForms:
    """The scenario page's forms together: meta, host, prefs and the three formsets.

    `previous` is the scenario being edited: what the forms do not show (initial jobs,
    scheduler URLs, downtime, fpops distributions) is kept from it where the project and app
    still exist.
    """

    def __init__(self, data=None, *, initial: dict | None = None, previous: Scenario | None = None):
        initial = initial or {}
        self.previous = previous
        self.meta = ScenarioMetaForm(data, prefix="meta", initial=initial.get("meta"))
        self.host = HostForm(data, prefix="host", initial=initial.get("host"))
        prefs = initial.get("prefs")
        if prefs is None and previous is not None:
            # what the form showed, so that a number sent back as shown keeps its exact value
            prefs = {f: getattr(previous.prefs, f) for f in PrefsForm.base_fields}
        self.prefs = PrefsForm(data, prefix="prefs", initial=prefs)
        self.gpus = GpuFormSet(data, prefix="gpus", initial=initial.get("gpus"))
        self.projects = ProjectFormSet(data, prefix="projects", initial=initial.get("projects"))
        self.apps = AppFormSet(data, prefix="apps", initial=initial.get("apps"))
        self.errors: list[str] = []
        self.scenario: Scenario | None = None

    @property
    def all(self):
        return [self.meta, self.host, self.prefs, self.gpus, self.projects, self.apps]

    def as_post_data(self) -> dict:
        """What a browser sends back for these forms as rendered, unchanged (tests and
        bench/hostile.py post it, edited)."""
        data: dict = {}
        for form in (self.meta, self.host, self.prefs):
            for bound in form:
                value = bound.value()
                if isinstance(value, bool):
                    if value:
                        data[bound.html_name] = "on"
                elif value is not None:
                    data[bound.html_name] = value
        for formset in (self.gpus, self.projects, self.apps):
            for key, value in formset.management_form.initial.items():
                data[f"{formset.prefix}-{key}"] = value
            for form in formset.forms:
                for bound in form:
                    value = bound.value()
                    if value is not None and not isinstance(value, bool):
                        data[bound.html_name] = value
        return data

    def is_valid(self) -> bool:
        valid = all([f.is_valid() for f in self.all])
        if not valid:
            return False
        try:
            self.scenario = self._build()
        except ScenarioError as exc:
            self.errors.append(str(exc))
        return self.scenario is not None and not self.errors and not self._has_row_errors()

    def _has_row_errors(self) -> bool:
        return any(f.errors for fs in (self.gpus, self.projects, self.apps) for f in fs.forms)

    def _build(self) -> Scenario | None:
        h = self.host.cleaned_data
        gpus = tuple(
            GpuType(r["gpu_type"], r["count"], r["peak_gflops"] * GIGA) for r in self.gpus.named_rows() if r["gpu_type"]
        )
        gpu_names = [g.name for g in gpus]
        if len(set(gpu_names)) != len(gpu_names):
            self._row_error(
                self.gpus,
                "gpu_type",
                lambda r: r["gpu_type"] and gpu_names.count(r["gpu_type"]) > 1,
                "Each GPU type once; put the devices in its count.",
            )
            return None
        host = Host(
            ncpus=h["ncpus"],
            cpu_flops=h["cpu_gflops"] * GIGA,
            gpus=gpus,
            **{
                k: Availability(h[f"{k}_frac"], h[f"{k}_hours"] * HOUR)
                for k in ("on", "connected", "active", "gpu_active")
            },
        )
        prefs = Prefs(**self.prefs.cleaned_data)
        project_rows = self.projects.named_rows()
        names = [r["name"] for r in project_rows]
        if len(set(names)) != len(names):
            self._row_error(self.projects, "name", lambda r: names.count(r["name"]) > 1, "Two projects have this name.")
            return None
        app_rows = self.apps.named_rows()
        self._row_error(self.apps, "project", lambda r: r["project"] not in names, "No project above has this name.")
        self._row_error(
            self.apps,
            "resource",
            lambda r: r["resource"] != "cpu" and r["resource"] not in gpu_names,
            "The host has no GPU of this type; add it under GPUs.",
        )
        seen = set()
        for form in self.apps.forms:
            r = form.cleaned_data
            if r and not r.get("DELETE") and not form.errors:
                key = (r["project"], r["name"], r["resource"])
                if key in seen:
                    form.add_error("resource", "This app already has a version for this resource.")
                seen.add(key)
        if self._has_row_errors():
            return None
        projects = []
        for row in project_rows:
            old = next((p for p in self.previous.projects if p.name == row["name"]), None) if self.previous else None
            apps = self._apps_of(row["name"], app_rows, old)
            if not apps:
                # the name read now: marking a row's error takes the field out of its cleaned_data
                # (Django's add_error), and `row` is one of those rows
                self._row_error(
                    self.projects,
                    "name",
                    lambda r, name=row["name"]: r["name"] == name,
                    "This project has no app; add one below.",
                )
                return None
            app_names = {a.name for a in apps}
            jobs = tuple(
                j
                for j in (old.jobs if old else ())
                if j.app in app_names
                and (
                    j.resource is None
                    or any(v.resource == j.resource for v in next(a for a in apps if a.name == j.app).versions)
                )
            )
            projects.append(
                Project(
                    name=row["name"],
                    resource_share=row["resource_share"],
                    apps=tuple(apps),
                    available=Availability(row["available_frac"], row["available_hours"] * HOUR),
                    master_url=old.master_url if old else "",
                    scheduler_urls=old.scheduler_urls if old else (),
                    downtime=old.downtime if old else (),
                    jobs=jobs,
                )
            )
        meta = self.meta.cleaned_data
        return Scenario(
            host=host,
            projects=tuple(projects),
            prefs=prefs,
            name=meta["name"],
            description=meta["description"],
            source="form",
        )

    @staticmethod
    def _apps_of(project: str, rows: list[dict], old: Project | None) -> list[App]:
        grouped: dict[str, list[dict]] = {}
        for r in rows:
            if r["project"] == project:
                grouped.setdefault(r["name"], []).append(r)
        apps = []
        for name, versions in grouped.items():
            first = versions[0]
            old_app = old.app(name) if old else None
            apps.append(
                App(
                    name=name,
                    versions=tuple(
                        AppVersion(
                            avg_ncpus=v["avg_ncpus"],
                            flops=v["gflops"] * GIGA,
                            gpu_type=None if v["resource"] == "cpu" else v["resource"],
                            gpu_usage=v["gpu_usage"] if v["resource"] != "cpu" else 0.0,
                            plan_class=next(
                                (ov.plan_class for ov in old_app.versions if ov.resource == v["resource"]), ""
                            )
                            if old_app
                            else "",
                        )
                        for v in versions
                    ),
                    latency_bound=first["latency_bound_hours"] * HOUR,
                    fpops_est=first["size_gflop"] * GIGA,
                    fpops_mean=old_app.fpops_mean if old_app else None,
                    fpops_std_dev=old_app.fpops_std_dev if old_app else 0.0,
                    weight=old_app.weight if old_app else 1.0,
                    checkpoint_period=first["checkpoint_minutes"] * 60,
                    resume_cost=first["resume_cost_minutes"] * 60,
                    max_concurrent=old_app.max_concurrent if old_app else 0,
                )
            )
        return apps

    @staticmethod
    def _row_error(formset, field, predicate, message):
        for form in formset.forms:
            r = form.cleaned_data
            if r and not r.get("DELETE") and not form.errors and predicate(r):
                form.add_error(field, message)


class ImportForm(forms.Form):
    """A scenario from P(C, D, R) text, a client_state.xml with its prefs, or our JSON."""

    name = forms.CharField(max_length=120, required=False, help_text="defaults to the file's or the notation's")
    pcdr = forms.CharField(
        label="P(C, D, R) notation",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
        help_text="e.g. P1(0.1, 1, .5) P2(1, 24, .25) NCPUS = 2 (times in hours)",
    )
    client_state = forms.FileField(label="client_state.xml", required=False)
    global_prefs = forms.FileField(label="global_prefs.xml", required=False)
    cc_config = forms.FileField(label="cc_config.xml", required=False)
    scenario_json = forms.FileField(label="scenario JSON", required=False, help_text="our own format")

    def clean(self):
        data = super().clean()
        sources = [k for k in ("pcdr", "client_state", "scenario_json") if data.get(k)]
        if not sources:
            raise forms.ValidationError("Paste P(C, D, R) text or upload a client_state.xml or a scenario JSON.")
        if len(sources) > 1:
            raise forms.ValidationError("Give one source: P(C, D, R) text, client_state.xml or scenario JSON.")
        for key in ("global_prefs", "cc_config"):
            if data.get(key) and not data.get("client_state"):
                self.add_error(key, "Upload it together with a client_state.xml.")
        for key in ("client_state", "global_prefs", "cc_config", "scenario_json"):
            upload = data.get(key)
            if upload and upload.size > MAX_UPLOAD:
                self.add_error(key, f"The file is larger than {MAX_UPLOAD // (1024 * 1024)} MB.")
        if self.errors:
            return data
        source = sources[0]
        try:
            if source == "pcdr":
                scenario = read_pcdr(data["pcdr"], name=data.get("name") or "P(C, D, R) scenario")
            elif source == "scenario_json":
                scenario = read_json(data["scenario_json"].read().decode("utf-8", "replace"))
            else:
                scenario = self._read_client_state(data)
        except ScenarioError as exc:
            self.add_error(source, str(exc))
            return data
        if data.get("name"):
            try:
                scenario = dataclasses.replace(scenario, name=data["name"])
            except ScenarioError as exc:
                self.add_error("name", str(exc))
                return data
        data["scenario"] = scenario
        return data

    @staticmethod
    def _read_client_state(data) -> Scenario:
        with tempfile.TemporaryDirectory() as directory:
            for key, fname in (
                ("client_state", "client_state.xml"),
                ("global_prefs", "global_prefs.xml"),
                ("cc_config", "cc_config.xml"),
            ):
                if data.get(key):
                    with open(os.path.join(directory, fname), "wb") as fh:
                        for chunk in data[key].chunks():
                            fh.write(chunk)
            scenario = read_client_state(directory)
        # the file's name, without what a scenario name cannot hold
        name = "".join(ch for ch in os.path.splitext(data["client_state"].name)[0] if ch.isprintable())
        name = name[: limits.MAX_SCENARIO_NAME]
        return dataclasses.replace(scenario, name=name if name not in ("", "client_state") else "imported client_state")


class DurationField(forms.CharField):
    """Seconds, or a number with a unit: `90m`, `36h`, `10d` (DESIGN.md, simulate --duration),
    up to the engine's MAX_DURATION."""

    def to_python(self, value):
        try:
            seconds = parse_duration(super().to_python(value) or "")
        except ValueError:
            raise forms.ValidationError("Give seconds or a number with a unit, e.g. 36h or 10d, more than 0.") from None
        if seconds > MAX_DURATION:
            raise forms.ValidationError(f"At most {MAX_DURATION / 86400:g} days.")
        return seconds


COMPAT_HELP = (
    "Compat: intended runs BOINC's rules as its documents state them; BOINC's emulator repeats "
    "what BOINC's own client emulator does, its known bugs included, so results can be checked "
    "against it (docs/engine-fidelity.md)."
)


class RunForm(forms.Form):
    policy = forms.ChoiceField(choices=Run.Policy.choices, initial="boinc7")
    duration = DurationField(initial="2d", help_text="seconds, or with a unit: 36h, 10d")
    seed = seed_field()
    compat = forms.ChoiceField(choices=Run.Compat.choices, initial="intended", help_text=COMPAT_HELP)
    delta = forms.FloatField(
        label="step (s)",
        initial=60.0,
        validators=[
            MinValueValidator(limits.MIN_DELTA, f"At least {limits.MIN_DELTA:g} second."),
            MaxValueValidator(limits.MAX_DELTA),
        ],
    )


YES = {"yes", "y", "true", "on", "1"}
NO = {"no", "n", "false", "off", "0"}


class CompareForm(forms.Form):
    """Runs of one scenario on one seed that differ in one thing: the policy (two or more of
    `policies`), or, when `parameter` is given, one preference across two or more `values`
    under one `policy`. `cleaned_data["variants"]` is the list of (policy, prefs) to run."""

    policies = forms.MultipleChoiceField(
        choices=Run.Policy.choices, initial=["boinc5", "boinc7"], required=False, widget=forms.CheckboxSelectMultiple
    )
    parameter = forms.ChoiceField(
        required=False,
        label="vary",
        choices=[("", "the policy")] + [(k, PrefsForm.base_fields[k].label) for k in VARIABLE_PREFS],
    )
    values = forms.CharField(
        required=False,
        max_length=200,
        help_text="two or more, separated by commas: 30, 60, 120 (yes, no for leave in memory)",
    )
    policy = forms.ChoiceField(
        choices=Run.Policy.choices, initial="boinc7", required=False, help_text="the policy every value runs under"
    )
    duration = DurationField(initial="2d")
    seed = seed_field()
    compat = forms.ChoiceField(choices=Run.Compat.choices, initial="intended", help_text=COMPAT_HELP)

    def clean(self):
        data = super().clean()
        parameter = data.get("parameter")
        if not parameter:
            policies = data.get("policies") or []
            if "policies" not in self.errors and len(policies) < 2:
                self.add_error("policies", "Pick at least two policies to compare.")
            elif len(policies) >= 2:
                data["variants"] = [(p, {}) for p in policies]
            return data
        if not data.get("policy") and "policy" not in self.errors:
            self.add_error("policy", "Pick the policy the values run under.")
        values = self._parse_values(parameter, data.get("values") or "")
        if values is not None and data.get("policy"):
            data["variants"] = [(data["policy"], {parameter: v}) for v in values]
        return data

    def _parse_values(self, parameter: str, text: str) -> list | None:
        """The values of `parameter`, each checked by the preferences form's own field."""
        tokens = [t for t in re.split(r"[,;\s]+", text.strip()) if t]
        if parameter == "leave_apps_in_memory" and not tokens:
            return [False, True]
        values, problems = [], []
        for token in tokens:
            if parameter == "leave_apps_in_memory":
                word = token.lower()
                if word not in YES | NO:
                    problems.append(f"{token}: say yes or no.")
                    continue
                values.append(word in YES)
                continue
            try:
                values.append(PrefsForm.base_fields[parameter].clean(token))
            except forms.ValidationError as exc:
                problems.append(f"{token}: {' '.join(exc.messages)}")
        if problems:
            self.add_error("values", problems)
            return None
        if len(set(values)) != len(values):
            self.add_error("values", "Give each value once.")
            return None
        if not 2 <= len(values) <= MAX_COMPARE:
            self.add_error("values", f"Give between 2 and {MAX_COMPARE} values to compare.")
            return None
        return values
