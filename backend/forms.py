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
    PREF_FIELDS,
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
    Venue,
    Workunit,
    WorkunitQuerySet,
)
from boincweb import human
from boincweb.bounds import PREFS_MAX_BUFFER_DAYS, BufferDaysField, KeepsShownNumbers, shown


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


# The headings the page groups the preferences under: (heading, first field of the group).
PREF_GROUPS = [
    ("Venue", "venue"),
    ("Computing", "run_on_batteries"),
    ("When", "start_hour"),
    ("Disk", "disk_max_used_gb"),
    ("Memory", "ram_max_used_busy_pct"),
    ("Network", "max_bytes_sec_down"),
    ("Work buffer and switching", "work_buf_min_days"),
]

# BOINC's web preference pages take rates and sizes up to this (html/inc/prefs_util.inc).
PREFS_MAX_AMOUNT = 9_999_999.0
KILO = 1000.0  # a kB is 1000 bytes, as every size on these pages (boincweb/human.py)
# the form's fields: the host's venue, then its preferences
FORM_FIELDS = ["venue", *PREF_FIELDS]


def plain(value: Any) -> Any:
    """A float as a person writes it: 100 rather than 100.0, 12.5 as it is."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return value


class NumberField(forms.FloatField):
    """A float field that shows 100 as 100, not 100.0."""

    def prepare_value(self, value: Any) -> Any:
        return plain(super().prepare_value(value))


class BufferDays(BufferDaysField):
    """A work buffer in days, shown as a NumberField shows its value."""

    def prepare_value(self, value: Any) -> Any:
        return plain(super().prepare_value(value))


def percent_field(label: str, help_text: str, *, low: float = 0) -> forms.FloatField:
    return NumberField(
        min_value=low,
        max_value=100,
        label=label,
        help_text=help_text,
        error_messages={"invalid": "Enter a percentage, a number from %s to 100." % f"{low:g}"},
    )


def hour_field(label: str, help_text: str) -> forms.FloatField:
    return NumberField(
        min_value=0,
        max_value=24,
        label=label,
        help_text=help_text,
        error_messages={
            "invalid": "Enter an hour of the day from 0 to 24, such as 8 or 17.5 (17:30).",
            "min_value": "An hour of the day is 0 (midnight) or later.",
            "max_value": "An hour of the day is at most 24 (midnight at the end of the day).",
        },
    )


def amount_field(label: str, help_text: str) -> forms.FloatField:
    return NumberField(
        min_value=0,
        max_value=PREFS_MAX_AMOUNT,
        label=label,
        help_text=help_text,
        error_messages={"min_value": "This can't be negative; 0 means no limit."},
    )


class YesNoField(forms.TypedChoiceField):
    """A yes/no preference as two radio buttons, as BOINC's preference pages show them: unlike a
    checkbox, a form that leaves it out can be told from one that answers "no"."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            choices=[("True", "Yes"), ("False", "No")],
            coerce=lambda value: value == "True",
            widget=forms.RadioSelect,
            error_messages={"required": "Choose yes or no.", "invalid_choice": "Choose yes or no."},
            **kwargs,
        )


class KilobytesPerSecondField(forms.FloatField):
    """A network rate shown in kB/s and kept in bytes per second (BOINC's max_bytes_sec_*)."""

    def prepare_value(self, value: Any) -> Any:
        return plain(shown(value / KILO)) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    def clean(self, value: Any) -> Any:
        rate = super().clean(value)
        return None if rate is None else rate * KILO


class HostPrefsForm(KeepsShownNumbers, forms.ModelForm):
    """A host's computing preferences: BOINC's global preferences, with the ranges BOINC's
    preference pages accept (html/inc/prefs_util.inc) and each in the unit a person thinks in.

    A preference the POST leaves out keeps its value, so that a script may set one alone; the
    checkbox is the exception, since a browser leaves an unticked box out.

    Venues are BOINC's: a volunteer's computers at one venue (home, school, work) share their
    preferences, which may differ from one venue to another. Saving a host at a venue sets the
    preferences it shows on the owner's other computers at that venue in the project.
    """

    venue = forms.ChoiceField(
        choices=Venue.choices,
        required=False,
        label="This computer is at (venue)",
        help_text="Your computers at one venue share their preferences: saving here sets them on your other "
        "computers at the same venue too, so the ones at work can compute less than the ones at home.",
        error_messages={"invalid_choice": "Choose a venue: none, home, school or work."},
    )

    run_on_batteries = YesNoField(
        label="Compute while the computer runs on batteries",
        help_text="No suspends computing when a laptop is unplugged.",
    )
    run_if_user_active = YesNoField(
        label="Compute while the computer is in use",
        help_text="No suspends computing while someone uses the keyboard or mouse.",
    )
    max_ncpus_pct = percent_field(
        "Use at most (% of the CPUs)",
        "Of a computer with 8 CPUs, 50 % uses 4; at least one is always used.",
        low=1,
    )
    cpu_usage_limit = percent_field(
        "Use at most (% of CPU time)",
        "Below 100 the client runs and pauses its tasks in turn, to keep a laptop cool.",
        low=1,
    )
    suspend_cpu_usage = percent_field(
        "Suspend when non-BOINC CPU usage is above (%)",
        "Computing pauses while other programs use more of the CPUs than this; 0 never pauses.",
    )
    start_hour = hour_field("Compute only between (hour)", "From this hour of the day; the same hour below: any time.")
    end_hour = hour_field("and (hour)", "An end before the start runs over midnight (22 to 6: nights).")
    net_start_hour = hour_field(
        "Transfer files only between (hour)", "From this hour of the day; the same hour below: any time."
    )
    net_end_hour = hour_field("and (hour)", "An end before the start runs over midnight.")
    disk_max_used_gb = amount_field(
        "Use at most (GB of disk)", "1 GB is 1,000,000,000 bytes; 0: no limit of this kind."
    )
    disk_max_used_pct = percent_field(
        "Use at most (% of the disk)", "Of the disk's total size; the smallest of the three disk limits holds."
    )
    disk_min_free_gb = amount_field("Leave at least (GB free)", "Stop using disk when less than this is free.")
    ram_max_used_busy_pct = percent_field(
        "Use at most (% of memory) while the computer is in use", "Tasks that need more wait.", low=1
    )
    ram_max_used_idle_pct = percent_field(
        "Use at most (% of memory) while the computer is idle", "Tasks that need more wait.", low=1
    )
    max_bytes_sec_down = KilobytesPerSecondField(
        min_value=0,
        max_value=PREFS_MAX_AMOUNT,
        label="Limit download rate to (kB/s)",
        help_text="1 kB is 1,000 bytes; 0: no limit.",
        error_messages={"min_value": "A rate can't be negative; 0 means no limit."},
    )
    max_bytes_sec_up = KilobytesPerSecondField(
        min_value=0,
        max_value=PREFS_MAX_AMOUNT,
        label="Limit upload rate to (kB/s)",
        help_text="1 kB is 1,000 bytes; 0: no limit.",
        error_messages={"min_value": "A rate can't be negative; 0 means no limit."},
    )
    work_buf_min_days = BufferDays(
        high=PREFS_MAX_BUFFER_DAYS,
        label="Store at least (days of work)",
        help_text="The client asks for more work when it holds less than this; at most 10 days.",
    )
    work_buf_additional_days = BufferDays(
        high=PREFS_MAX_BUFFER_DAYS,
        label="Store up to an additional (days of work)",
        help_text="When it asks, it asks for enough to hold this much more; at most 10 days.",
    )
    cpu_scheduling_period_minutes = NumberField(
        min_value=1,
        max_value=1440,
        label="Switch between tasks every (minutes)",
        help_text="How long a task runs before another project's gets its turn: 1 minute to a day.",
    )
    leave_apps_in_memory = forms.BooleanField(
        required=False,
        label="Leave non-GPU tasks in memory while suspended",
        help_text="Keeps their progress since the last checkpoint, at the cost of memory.",
    )

    class Meta:
        model = Host
        fields = FORM_FIELDS

    def __init__(self, data: Mapping[str, Any] | None = None, *, instance: Host) -> None:
        if data is not None:
            data = data.copy() if hasattr(data, "copy") else dict(data)
            for name in FORM_FIELDS:
                field = self.base_fields[name]
                if name not in data and not isinstance(field.widget, forms.CheckboxInput):
                    current = getattr(instance, name)
                    data[name] = str(current) if isinstance(current, bool) else field.prepare_value(current)
        super().__init__(data, instance=instance)
        # the owner's other hosts at the venue that saving also set (save_changes)
        self.shared_with: list[int] = []

    def sections(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The page's groups of fields under their headings, in PREF_FIELDS order."""
        starts = {first: heading for heading, first in PREF_GROUPS}
        groups: list[tuple[str, list[forms.BoundField]]] = []
        for name in FORM_FIELDS:
            if name in starts:
                groups.append((starts[name], []))
            groups[-1][1].append(self[name])
        return groups

    def changes(self) -> list[tuple[str, Any, Any]]:
        """(field, old, new) for each preference (and the venue) the form changes."""
        return [
            (name, self.initial[name], self.cleaned_data[name])
            for name in FORM_FIELDS
            if self.cleaned_data[name] != self.initial[name]
        ]

    def describe(self, name: str, value: Any) -> str:
        """A preference's value as the page shows it: yes/no, the venue, or the number in its
        field's unit."""
        if name == "venue":
            return Venue(value).label
        if isinstance(value, bool):
            return "yes" if value else "no"
        if name in ("max_bytes_sec_down", "max_bytes_sec_up"):
            value = value / KILO
        return human.number(value, 6)

    def saved_text(self, changes: list[tuple[str, float | bool, float | bool]]) -> str:
        """The changes by the labels the page shows: "Store at least (days of work): 0.5 (was 0.1)"."""
        return "; ".join(
            f"{self.fields[name].label}: {self.describe(name, new)} (was {self.describe(name, old)})"
            for name, old, new in changes
        )

    def save_changes(self, user: AbstractBaseUser | AnonymousUser, now: int) -> list[tuple[str, Any, Any]]:
        """Write the changed preferences and prefs_mod_time, with one lifecycle event of the
        host per changed preference (actor: the username; the values in ``detail``, since
        old/new hold integers only); at a venue, the same on the owner's other hosts of the
        project at that venue whose preferences differ (``shared_with`` lists their ids).
        Returns the host's own changes."""
        changes = self.changes()
        host = self.instance
        values = {name: self.cleaned_data[name] for name in PREF_FIELDS}
        venue = self.cleaned_data["venue"]
        others = []
        if venue:
            at_venue = Host.objects.filter(project_id=host.project_id, owner_id=host.owner_id, venue=venue)
            for row in at_venue.exclude(pk=host.pk).values("id", *PREF_FIELDS):
                differ = [(name, row[name], values[name]) for name in PREF_FIELDS if row[name] != values[name]]
                if differ:
                    others.append((row["id"], differ))
        self.shared_with = [hostid for hostid, _ in others]
        if not changes and not others:
            return changes
        actor = user.get_username()

        def events(hostid: int, changed: list[tuple[str, Any, Any]], reason: str) -> list[Any]:
            return [
                event(
                    time=now,
                    actor=actor,
                    host_id=hostid,
                    field=name,
                    old=None,
                    new=None,
                    reason=reason,
                    detail=f"{old} → {new}",
                )
                for name, old, new in changed
            ]

        with transaction.atomic():
            if changes:
                Host.objects.filter(pk=host.pk).update(prefs_mod_time=now, **{name: new for name, _, new in changes})
            if others:
                Host.objects.filter(pk__in=self.shared_with).update(prefs_mod_time=now, **values)
            shared = f"preferences form of host {host.pk} (venue {venue})"
            record(
                events(host.pk, changes, "preferences form")
                + [e for hostid, differ in others for e in events(hostid, differ, shared)],
                host.project_id,
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
