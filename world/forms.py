from django import forms

from world.models import World


class WorldForm(forms.ModelForm):
    class Meta:
        model = World
        fields = ["name", "hosts", "days", "seed", "locality", "speedup"]

    def clean_hosts(self):
        hosts = self.cleaned_data["hosts"]
        if not 1 <= hosts <= 100_000:
            raise forms.ValidationError("Choose between 1 and 100,000 hosts.")
        return hosts

    def clean_days(self):
        days = self.cleaned_data["days"]
        if not 0 < days <= 365:
            raise forms.ValidationError("Choose more than 0 and at most 365 days.")
        return days

    def clean_speedup(self):
        speedup = self.cleaned_data["speedup"]
        if not speedup >= 1:
            raise forms.ValidationError("The speed-up is simulated seconds per wall second, "
                                        "at least 1.")
        return speedup


class CompareForm(forms.Form):
    """Two worlds on one seed, plain and locality scheduling, to compare side by side."""

    hosts = forms.IntegerField(initial=100)
    days = forms.FloatField(initial=1.0)
    seed = forms.IntegerField(initial=1)
    speedup = forms.FloatField(initial=3600.0,
                               help_text="Simulated seconds per wall second.")

    clean_hosts = WorldForm.clean_hosts
    clean_days = WorldForm.clean_days
    clean_speedup = WorldForm.clean_speedup

    def save_pair(self):
        """Create the plain and the locality world; return them in that order."""
        d = self.cleaned_data
        common = dict(hosts=d["hosts"], days=d["days"], seed=d["seed"], speedup=d["speedup"])
        return [World.objects.create(name=f"seed {d['seed']} {label}", locality=locality,
                                     **common)
                for label, locality in (("plain", False), ("locality", True))]
