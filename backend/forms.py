"""Forms of the project pages: the workunit filters, host preferences, admin action targets."""

from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.lookups import GreaterThan

from backend.events import event, record
from backend.keyset import BadCursor, decode_cursor
from backend.models import (
    App,
    AppVersion,
    AssimilateState,
    ErrorMask,
    FileDeleteState,
    Host,
    Outcome,
    Project,
    Result,
    ResultQuerySet,
    ServerState,
    ValidateState,
    Workunit,
    WorkunitQuerySet,
)
from boincweb.bounds import PREFS_MAX_BUFFER_DAYS, BufferDaysField, KeepsShownNumbers


def _with_results(**condition: Any) -> Q:
    """Workunits with a result matching ``condition`` (read off res_wuid per workunit)."""
    return Q(Exists(Result.objects.filter(workunit=OuterRef("pk"), **condition)))


# state filter -> the condition it selects; each is served by one of the workunit indexes, the
# result states by the workunit's results (res_wuid).
STATE_FILTERS = {
    "unsent": ("with a result unsent", _with_results(server_state__lte=ServerState.UNSENT)),
    "in_progress": ("with a result in progress", _with_results(server_state=ServerState.IN_PROGRESS)),
    "transition_due": ("transition due", None),  # needs the clock: see WorkunitFilterForm
    "need_validate": ("waiting for validation", Q(need_validate=True)),
    "assimilate_ready": ("waiting for assimilation", Q(assimilate_state=AssimilateState.READY)),
    "assimilated": ("assimilated", Q(assimilate_state=AssimilateState.DONE)),
    "delete_ready": ("waiting for file deletion", Q(file_delete_state=FileDeleteState.READY)),
    "files_deleted": ("files deleted", Q(file_delete_state=FileDeleteState.DONE)),
    "delete_error": ("file deletion error", Q(file_delete_state=FileDeleteState.ERROR)),
}

ERROR_FILTERS = [("", "any"), ("none", "no error"), ("some", "some error")] + [
    (flag.name, flag.name) for flag in ErrorMask
]

# Only keys a page reads straight off an index, so it costs 50 index entries whatever the
# table size: unique ones, and transition_time with id as its tie-breaker (wu_transition_id).
SORTS = {
    "-id": ("id", True),
    "id": ("id", False),
    "name": ("name", False),
    "-name": ("name", True),
    "transition_time": ("transition_time", False),
    "-transition_time": ("transition_time", True),
}

# One past the highest code point: the upper end of a name prefix range.
TOP = "\U0010ffff"


class WorkunitFilterForm(forms.Form):
    """The filters of a project's workunit list. The apps to choose from are the project's
    own; another project's app is an error of the form, not a filter that matches nothing."""

    app = forms.ModelChoiceField(
        App.objects.none(),
        required=False,
        empty_label="all apps",
        error_messages={"invalid_choice": "no app %(value)s in this project"},
    )
    state = forms.ChoiceField(
        required=False, choices=[("", "any state")] + [(k, v[0]) for k, v in STATE_FILTERS.items()]
    )
    error = forms.ChoiceField(required=False, choices=ERROR_FILTERS, label="Error mask")
    name = forms.CharField(required=False, max_length=254, label="Name starts with")
    sort = forms.ChoiceField(required=False, choices=[(k, k) for k in SORTS])
    after = forms.CharField(required=False, widget=forms.HiddenInput)
    before = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, data: Mapping[str, Any], *, project: Project) -> None:
        super().__init__(data)
        app_field = cast("forms.ModelChoiceField[App]", self.fields["app"])
        app_field.queryset = App.objects.filter(project=project).only("id", "name")

    def clean(self) -> dict[str, Any]:
        """A cursor must be one of the sort it pages (a cursor of another sort can be pasted
        into the URL)."""
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data
        field = Workunit._meta.get_field(self.sort_key[0])
        for name in ("after", "before"):
            if data.get(name):
                try:
                    decode_cursor(data[name], field)
                except BadCursor as exc:
                    self.add_error(name, str(exc))
        return data

    @property
    def sort_key(self) -> tuple[str, bool]:
        return SORTS[self.cleaned_data.get("sort") or "-id"]

    def filter(self, queryset: WorkunitQuerySet, now: int) -> WorkunitQuerySet:
        """``queryset`` narrowed by the valid filters; ``now`` is for "transition due"."""
        data = self.cleaned_data
        if data["app"]:
            queryset = queryset.filter(app=data["app"])
        state = data["state"]
        if state == "transition_due":
            queryset = queryset.transition_due(now)
        elif state:
            queryset = queryset.filter(STATE_FILTERS[state][1])
        error = data["error"]
        if error == "none":
            queryset = queryset.filter(error_mask=0)
        elif error == "some":
            queryset = queryset.exclude(error_mask=0)
        elif error:
            bit = ErrorMask[error].value
            queryset = queryset.filter(GreaterThan(F("error_mask").bitand(bit), 0))
        if data["name"]:
            # The range lets the unique name index serve the prefix (code-point collations).
            prefix = data["name"]
            queryset = queryset.filter(name__gte=prefix, name__lt=prefix + TOP, name__startswith=prefix)
        return queryset


PREF_FIELDS = [
    "work_buf_min_days",
    "work_buf_additional_days",
    "max_ncpus_pct",
    "cpu_usage_limit",
    "cpu_scheduling_period_minutes",
    "leave_apps_in_memory",
]


class HostPrefsForm(KeepsShownNumbers, forms.ModelForm):
    """A host's computing preferences, with the ranges BOINC's preference pages accept."""

    work_buf_min_days = BufferDaysField(high=PREFS_MAX_BUFFER_DAYS, label="Store at least (days of work)")
    work_buf_additional_days = BufferDaysField(high=PREFS_MAX_BUFFER_DAYS, label="Store up to an additional (days)")
    max_ncpus_pct = forms.FloatField(min_value=1, max_value=100, label="Use at most (% of the CPUs)")
    cpu_usage_limit = forms.FloatField(min_value=1, max_value=100, label="Use at most (% of CPU time)")
    cpu_scheduling_period_minutes = forms.FloatField(
        min_value=1, max_value=1440, label="Switch between applications every (minutes)"
    )
    leave_apps_in_memory = forms.BooleanField(required=False, label="Leave non-GPU tasks in memory while suspended")

    class Meta:
        model = Host
        fields = PREF_FIELDS

    def changes(self) -> list[tuple[str, float | bool, float | bool]]:
        """(field, old, new) for each preference the form changes."""
        return [
            (name, self.initial[name], self.cleaned_data[name])
            for name in PREF_FIELDS
            if self.cleaned_data[name] != self.initial[name]
        ]

    def save_changes(
        self, user: AbstractBaseUser | AnonymousUser, now: int
    ) -> list[tuple[str, float | bool, float | bool]]:
        """Write the changed preferences and prefs_mod_time, with one lifecycle event of the
        host per changed preference (actor: the username; the values in ``detail``, since
        old/new hold integers only). Returns the changes."""
        changes = self.changes()
        if not changes:
            return changes
        with transaction.atomic():
            Host.objects.filter(pk=self.instance.pk).update(
                prefs_mod_time=now, **{name: new for name, _, new in changes}
            )
            record(
                [
                    event(
                        time=now,
                        actor=user.get_username(),
                        host_id=self.instance.pk,
                        field=name,
                        old=None,
                        new=None,
                        reason="preferences form",
                        detail=f"{old} → {new}",
                    )
                    for name, old, new in changes
                ],
                self.instance.project_id,
            )
        return changes


class WorkunitIdsForm(forms.Form):
    """The workunits an admin action applies to: ``id`` repeated, at most MAX_IDS of them, each
    a workunit of ``project`` (another project's is an error, as a missing one is)."""

    MAX_IDS = 500  # below Django's DATA_UPLOAD_MAX_NUMBER_FIELDS, so the reason is ours

    id = forms.TypedMultipleChoiceField(
        coerce=int, required=True, error_messages={"required": "Tick at least one workunit."}
    )

    def __init__(self, data: Mapping[str, Any], *, project: Project) -> None:
        super().__init__(data)
        self.project = project
        # Any positive whole number is a valid choice; whether it exists is checked in clean.
        self.fields["id"].valid_value = lambda value: str(value).isdigit() and 0 < int(value) < 2**63  # type: ignore[attr-defined]

    def clean_id(self) -> list[int]:
        ids = sorted(set(self.cleaned_data["id"]))
        if len(ids) > self.MAX_IDS:
            raise forms.ValidationError(f"at most {self.MAX_IDS} workunits at a time")
        found = set(Workunit.objects.filter(project=self.project, id__in=ids).values_list("id", flat=True))
        missing = [i for i in ids if i not in found]
        if missing:
            raise forms.ValidationError(
                "no workunit with id " + ", ".join(str(i) for i in missing[:10]) + " in this project"
            )
        return ids


def _choices(empty: str, choices: list[tuple[int, str]]) -> list[tuple[str, str]]:
    return [("", empty)] + [(str(value), label) for value, label in choices]


class ResultFilterForm(forms.Form):
    """The filters of a project's results list, as BOINC's ops pages filter results
    (html/ops/db_action.php?table=result): outcome, exit status, app version, platform, host,
    validate state and server state. Every choice is checked against the project: another
    project's app version or host is an error of the form, with the value it was given."""

    server_state = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, choices=_choices("any server state", ServerState.choices)
    )
    outcome = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, choices=_choices("any outcome", Outcome.choices)
    )
    validate_state = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, choices=_choices("any validate state", ValidateState.choices)
    )
    exit_status = forms.IntegerField(
        required=False,
        min_value=-(2**31),
        max_value=2**31 - 1,
        widget=forms.NumberInput(attrs={"size": 6}),
        error_messages={"invalid": "exit status must be a whole number, such as 0 or -177"},
    )
    app_version = forms.ModelChoiceField(
        AppVersion.objects.none(),
        required=False,
        empty_label="any app version",
        error_messages={"invalid_choice": "no app version %(value)s in this project"},
    )
    platform = forms.ChoiceField(required=False)
    host = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=2**63 - 1,
        label="Host id",
        widget=forms.NumberInput(attrs={"size": 6}),
        error_messages={"invalid": "host must be a host's id, a whole number"},
    )
    after = forms.CharField(required=False, widget=forms.HiddenInput)
    before = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, data: Mapping[str, Any], *, project: Project) -> None:
        super().__init__(data)
        self.project = project
        versions = cast("forms.ModelChoiceField[AppVersion]", self.fields["app_version"])
        versions.queryset = AppVersion.objects.filter(project=project).select_related("app")
        platforms = sorted(set(AppVersion.objects.filter(project=project).values_list("platform", flat=True)))
        platform = cast(forms.ChoiceField, self.fields["platform"])
        platform.choices = [("", "any platform")] + [(p, p) for p in platforms]
        platform.error_messages["invalid_choice"] = "no app version of platform %(value)s in this project"

    def clean_host(self) -> int | None:
        host = self.cleaned_data["host"]
        if host is not None and not Host.objects.filter(project=self.project, pk=host).exists():
            raise forms.ValidationError(f"no host {host} in this project")
        return host

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data
        for name in ("after", "before"):
            if data.get(name):
                try:
                    decode_cursor(data[name], Result._meta.get_field("id"))
                except BadCursor as exc:
                    self.add_error(name, str(exc))
        return data

    def filter(self, queryset: ResultQuerySet) -> ResultQuerySet:
        """``queryset`` narrowed by the valid filters. An outcome means something only once a
        result is over (reference/server.md §1.2), so filtering by one selects OVER results."""
        data = self.cleaned_data
        for name in ("server_state", "validate_state", "exit_status"):
            if data[name] is not None:
                queryset = queryset.filter(**{name: data[name]})
        if data["outcome"] is not None:
            queryset = queryset.filter(server_state=ServerState.OVER, outcome=data["outcome"])
        if data["app_version"] is not None:
            queryset = queryset.filter(app_version=data["app_version"])
        if data["platform"]:
            queryset = queryset.filter(app_version__platform=data["platform"])
        if data["host"] is not None:
            queryset = queryset.filter(host_id=data["host"])
        return queryset
