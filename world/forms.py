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
