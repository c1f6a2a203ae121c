"""A volunteer's forms: signing up, and their preferences for one project (BOINC's
"preferences for this project")."""

from typing import Any

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.forms import UserCreationForm, UsernameField
from django.contrib.auth.models import User

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


# Django's standard password validators, all four, for a volunteer's own password: the site's
# AUTH_PASSWORD_VALIDATORS (settings) keep to a minimum length for the staff's.
VOLUNTEER_PASSWORD_VALIDATORS = password_validation.get_password_validators(
    [
        {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
        {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
        {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
        {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    ]
)


class SignupForm(UserCreationForm):
    """A volunteer's sign-up: Django's user creation form (a unique username, the password twice,
    checked by Django's validators) with an email address, unique as in BOINC, whose projects
    know a person by it (html/inc/user_util.inc)."""

    email = forms.EmailField(
        label="Email address",
        max_length=254,
        help_text="Projects write to you here; no one else sees it.",
        error_messages={
            "required": "Enter your email address.",
            "invalid": "Enter an email address, such as ann@example.org.",
        },
    )

    class Meta:
        model = User
        fields = ("username", "email")
        field_classes = {"username": UsernameField}

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip()
        if User.objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account with that email address already exists.", code="email_taken")
        return email

    def validate_password_for_user(self, user: Any, password_field_name: str = "password2") -> None:
        password = self.cleaned_data.get(password_field_name)
        if password:
            try:
                password_validation.validate_password(password, user, password_validators=VOLUNTEER_PASSWORD_VALIDATORS)
            except forms.ValidationError as error:
                self.add_error(password_field_name, error)
