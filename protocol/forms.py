"""The volunteer's preferences for one project (BOINC's "preferences for this project")."""

from typing import Any

from django import forms

from protocol.models import MAX_RESOURCE_SHARE, Account


class ResourceShareField(forms.FloatField):
    """A resource share: from 0 to MAX_RESOURCE_SHARE, BOINC's largest
    (html/inc/prefs_project.inc). 0 makes this a backup project, as in BOINC: the client asks
    it for work only when its other projects have none (reference/client.md, work fetch)."""

    default_error_messages = {
        "invalid": "Enter the share as a number, such as 100.",
        "required": "Enter a resource share, such as 100 (BOINC's default).",
    }

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value is not None and value < 0:
            raise forms.ValidationError(
                "A resource share can't be negative: it is this project's part of your computers' "
                "time against your other projects' shares (0 makes it a backup project).",
                code="negative",
            )
        if value is not None and value > MAX_RESOURCE_SHARE:
            raise forms.ValidationError(
                f"A resource share can be at most {MAX_RESOURCE_SHARE:,.0f}, as in BOINC.", code="too_large"
            )


class ProjectPrefsForm(forms.ModelForm):
    resource_share = ResourceShareField(
        label="Resource share",
        help_text=(
            "This project's part of your computers' resources: with shares of 100 here and 200 in "
            "another project, this one gets a third; 0 makes it a backup project, asked for work only when the others "
            "have none. BOINC's default is 100."
        ),
    )

    class Meta:
        model = Account
        fields = ["resource_share"]
