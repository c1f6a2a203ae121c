from typing import Any

from django import forms

from boincweb.bounds import seed_field
from boincweb.human import number
from scheduling.presets import PRESETS
from world.models import World
from world.simulation import WorldSettings

DEFAULTS = WorldSettings()

DAYS_LABEL = "Days of new work"
DAYS_HELP = (
    "Simulated days in which the project makes new work. The world then runs on until every job "
    "is finished: hosts complete what they hold, the deadlines of hosts that vanished pass and "
    f"failed jobs are sent again (at most {number(DEFAULTS.drain_days)} days more). So it runs "
    "longer than this, and its page says how long."
)


class WorldForm(forms.ModelForm):
    """A new world; the fields after the model's are WorldSettings overrides, kept in
    ``World.settings`` (the same names as ``manage.py world --set``)."""

    plan_classes = forms.BooleanField(
        required=False,
        label="Plan classes",
        help_text="The app gets a multi-threaded CPU version (mt) beside the sequential and GPU "
        "(cuda) ones, described by plan_class_spec.xml; each host is sent the one "
        "projected fastest on it, learnt from its runtimes.",
    )
    cpu_speed_sigma = forms.FloatField(
        required=False,
        initial=DEFAULTS.cpu_speed_sigma,
        min_value=0,
        help_text="Spread of hosts' real CPU speed below their benchmark (0: equal).",
    )
    mt_efficiency_min = forms.FloatField(
        required=False,
        initial=DEFAULTS.mt_efficiency_min,
        min_value=0.01,
        max_value=1,
        help_text="Lowest parallel efficiency of a multi-threaded job's threads (drawn up to 1).",
    )
    gpu_gflops_sigma = forms.FloatField(
        required=False,
        initial=DEFAULTS.gpu_gflops_sigma,
        min_value=0,
        help_text="Log-normal spread of GPUs' peak GFLOPS around the median.",
    )
    gpu_efficiency_min = forms.FloatField(
        required=False,
        initial=DEFAULTS.gpu_efficiency_min,
        min_value=0.01,
        max_value=1,
        help_text="Lowest share of its peak a GPU reaches (drawn up to 1).",
    )
    engine_hosts = forms.IntegerField(
        required=False,
        initial=0,
        min_value=0,
        max_value=2000,
        help_text="Hosts driven by the client engine beside the simple ones: each decides like BOINC's "
        "client what to run and when to ask for work, and has a page with its Gantt chart.",
    )
    engine_policy = forms.ChoiceField(
        required=False, choices=[("boinc7", "boinc7"), ("boinc5", "boinc5")], initial="boinc7"
    )
    engine_preset = forms.ChoiceField(
        required=False,
        label="Engine host",
        help_text="A lab preset's host, with its own projects beside the world's, or one drawn as the "
        "simple hosts are.",
    )
    seed = seed_field()
    SETTINGS = ("plan_classes", "cpu_speed_sigma", "mt_efficiency_min", "gpu_gflops_sigma", "gpu_efficiency_min")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        preset = self.fields["engine_preset"]
        assert isinstance(preset, forms.ChoiceField)
        preset.choices = [("", "drawn like the simple hosts")] + [(p.slug, f"{p.slug}: {p.title}") for p in PRESETS]

    class Meta:
        model = World
        fields = ["name", "hosts", "days", "seed", "locality", "speedup"]
        labels = {"days": DAYS_LABEL, "locality": "Locality scheduling"}
        help_texts = {
            "days": DAYS_HELP,
            "locality": "Send each host the jobs whose large input file it already holds, so that it "
            "downloads each file once for many jobs (BOINC's locality scheduling), instead of jobs in "
            "the order they were made.",
            "speedup": "Simulated seconds per wall second.",
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        assert cleaned is not None  # ModelForm.clean returns cleaned_data
        overrides: dict[str, Any] = {
            name: cleaned[name] for name in self.SETTINGS if cleaned.get(name) not in (None, getattr(DEFAULTS, name))
        }
        if cleaned.get("engine_hosts"):
            engine_class = {"count": cleaned["engine_hosts"], "policy": cleaned.get("engine_policy") or "boinc7"}
            if cleaned.get("engine_preset"):
                engine_class["preset"] = cleaned["engine_preset"]
            overrides["engine_hosts"] = [engine_class]
        try:
            WorldSettings.from_dict(overrides)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        self.instance.settings = {**(self.instance.settings or {}), **overrides}
        return cleaned

    def clean_hosts(self) -> int:
        hosts = self.cleaned_data["hosts"]
        if not 1 <= hosts <= 100_000:
            raise forms.ValidationError("Choose between 1 and 100,000 hosts.")
        return hosts

    def clean_days(self) -> float:
        days = self.cleaned_data["days"]
        if not 0 < days <= 365:
            raise forms.ValidationError("Choose more than 0 and at most 365 days.")
        return days

    def clean_speedup(self) -> float:
        speedup = self.cleaned_data["speedup"]
        if not speedup >= 1:
            raise forms.ValidationError("The speed-up is simulated seconds per wall second, at least 1.")
        return speedup


class DeleteWorldForm(forms.Form):
    """Delete a world (world.deletion): ``confirm`` must be ticked; ``project`` chooses whether
    its project, every row and file of it, goes too."""

    project = forms.BooleanField(
        required=False,
        label="and its project",
        help_text="Every row of the world's project (its app, hosts, volunteers' credit, work and "
        "results) and its data directory; without it, the project and its pages stay.",
    )
    confirm = forms.BooleanField(
        label="Yes, delete it: this cannot be undone",
        error_messages={"required": "Tick the box to confirm: deleting cannot be undone."},
    )


class CompareForm(forms.Form):
    """Two worlds on one seed, plain and locality scheduling, to compare side by side."""

    hosts = forms.IntegerField(initial=100)
    days = forms.FloatField(initial=1.0, label=DAYS_LABEL, help_text=DAYS_HELP)
    seed = seed_field()
    speedup = forms.FloatField(initial=3600.0, help_text="Simulated seconds per wall second.")

    clean_hosts = WorldForm.clean_hosts
    clean_days = WorldForm.clean_days
    clean_speedup = WorldForm.clean_speedup

    def save_pair(self) -> list[World]:
        """Create the plain and the locality world; return them in that order."""
        d = self.cleaned_data
        common = dict(hosts=d["hosts"], days=d["days"], seed=d["seed"], speedup=d["speedup"])
        return [
            World.objects.create(name=f"seed {d['seed']} {label}", locality=locality, **common)
            for label, locality in (("plain", False), ("locality", True))
        ]


# The server settings a world attached from the lab may set, once per side (A, and B when
# comparing): the deadline, the daily quota and the jobs in progress per CPU.
SERVER_FIELDS = {
    "delay_bound_hours": ("Deadline (hours)", "Report deadline of each job (the app's delay_bound)."),
    "daily_result_quota": (
        "Daily quota",
        "Jobs a host may get per app version per CPU per day (BOINC's daily_result_quota).",
    ),
    "max_wus_in_progress": (
        "Jobs in progress per CPU",
        "Jobs a host may hold unfinished per CPU (BOINC's max_wus_in_progress); 0 for no limit.",
    ),
}


class AttachForm(forms.Form):
    """A world whose engine hosts are a lab scenario's host with the world's project attached
    (world.engine_host), and optionally a second one on the same seed and volunteers with other
    server settings, to compare side by side."""

    engine_hosts = forms.IntegerField(
        initial=20, min_value=1, max_value=2000, help_text="Copies of this host, each its own volunteer."
    )
    simple_hosts = forms.IntegerField(
        initial=0, min_value=0, max_value=100_000, help_text="Simple hosts beside them (they fill their buffers)."
    )
    policy = forms.ChoiceField(choices=[("boinc7", "boinc7"), ("boinc5", "boinc5")], initial="boinc7")
    days = forms.FloatField(initial=2.0, label=DAYS_LABEL, help_text=DAYS_HELP)
    seed = seed_field()
    speedup = forms.FloatField(initial=3600.0, help_text="Simulated seconds per wall second.")
    resource_share = forms.FloatField(initial=100.0, help_text="The world project's share on these hosts.")
    compare = forms.BooleanField(
        required=False, label="Compare with other server settings (B)", help_text="Two worlds, the same volunteers."
    )

    clean_days = WorldForm.clean_days
    clean_speedup = WorldForm.clean_speedup

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        defaults = {
            "delay_bound_hours": DEFAULTS.delay_bound / 3600,
            "daily_result_quota": None,
            "max_wus_in_progress": None,
        }
        for side in ("a", "b"):
            for name, (label, help_text) in SERVER_FIELDS.items():
                field: forms.Field
                if name == "delay_bound_hours":
                    field = forms.FloatField(min_value=0.1, max_value=24 * 365, required=False)
                else:
                    field = forms.IntegerField(min_value=0, max_value=1_000_000, required=False)
                field.label = f"{label} ({side.upper()})"
                field.help_text = help_text + (" Empty: BOINC's default." if name != "delay_bound_hours" else "")
                field.initial = defaults[name]
                self.fields[f"{name}_{side}"] = field

    def server_settings(self, side: str) -> dict[str, Any]:
        """The WorldSettings overrides of side "a" or "b"."""
        d = self.cleaned_data
        values: dict[str, Any] = {}
        hours = d.get(f"delay_bound_hours_{side}")
        if hours is not None:
            values["delay_bound"] = int(hours * 3600)
        for name in ("daily_result_quota", "max_wus_in_progress"):
            if d.get(f"{name}_{side}") is not None:
                values[name] = d[f"{name}_{side}"]
        return values

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        assert cleaned is not None
        if self.errors:
            return cleaned
        if cleaned.get("compare") and self.server_settings("a") == self.server_settings("b"):
            raise forms.ValidationError("To compare, give B at least one server setting that differs from A.")
        return cleaned

    def worlds(self, scenario_name: str, scenario: dict[str, Any]) -> list[World]:
        """Create the world (and with ``compare``, its twin with B's settings); unsaved checks
        of every setting first, so a bad one creates nothing."""
        d = self.cleaned_data
        engine_class = {
            "count": d["engine_hosts"],
            "policy": d["policy"],
            "scenario": scenario,
            "scenario_name": scenario_name,
            "resource_share": d["resource_share"],
        }
        sides = ["a", "b"] if d.get("compare") else ["a"]
        made = []
        for side in sides:
            settings = {"engine_hosts": [engine_class], **self.server_settings(side)}
            WorldSettings.from_dict({**settings, "hosts": d["simple_hosts"], "days": d["days"], "seed": d["seed"]})
            label = f" ({side.upper()})" if len(sides) > 1 else ""
            made.append(
                World(
                    name=f"{scenario_name[:60]} attached{label}",
                    hosts=d["simple_hosts"],
                    days=d["days"],
                    seed=d["seed"],
                    speedup=d["speedup"],
                    settings=settings,
                )
            )
        for world in made:
            world.save()
        return made
