from typing import Any

from django import forms

from world.models import World
from world.simulation import WorldSettings

DEFAULTS = WorldSettings()


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
    SETTINGS = ("plan_classes", "cpu_speed_sigma", "mt_efficiency_min", "gpu_gflops_sigma", "gpu_efficiency_min")

    class Meta:
        model = World
        fields = ["name", "hosts", "days", "seed", "locality", "speedup"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        assert cleaned is not None  # ModelForm.clean returns cleaned_data
        overrides = {
            name: cleaned[name] for name in self.SETTINGS if cleaned.get(name) not in (None, getattr(DEFAULTS, name))
        }
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


class CompareForm(forms.Form):
    """Two worlds on one seed, plain and locality scheduling, to compare side by side."""

    hosts = forms.IntegerField(initial=100)
    days = forms.FloatField(initial=1.0)
    seed = forms.IntegerField(initial=1)
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
