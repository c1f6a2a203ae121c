"""Rows only the wire protocol needs: accounts (keys and project preferences) and the files of
signed app versions."""

import secrets

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models

from backend.models import AppVersion, Project, project_field

# BOINC's default resource share and the largest its preferences page accepts
# (html/inc/prefs_project.inc).
DEFAULT_RESOURCE_SHARE = 100.0
MAX_RESOURCE_SHARE = 9_999_999.0


def new_authenticator() -> str:
    return secrets.token_hex(16)


class Account(models.Model):
    """A volunteer's account in one project: its key (BOINC's ``user.authenticator``).

    As in BOINC, where each project has its own user table, a person's Django user has one
    account per project they join, each with its own key. A client attaches to a project with
    that project's key and sends it in every scheduler request (reference/protocol.md §2,
    §4.2); it is the only credential a client has, and a project knows only its own keys.
    The account also holds the person's preferences for the project (``resource_share``): they
    edit them on the project's preferences page, and every scheduler reply sends them.
    """

    project = project_field("accounts")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="boinc_accounts")
    authenticator = models.CharField(max_length=64, unique=True, default=new_authenticator)
    # The volunteer's preferences for this project (BOINC's user.project_prefs), sent in every
    # scheduler reply as <project_preferences> (reference/protocol.md §4.3): the share of their
    # computers' resources this project gets against the other projects they run.
    resource_share = models.FloatField(default=DEFAULT_RESOURCE_SHARE)

    class Meta:
        constraints = [
            # one account per person per project; also the index of for_user
            models.UniqueConstraint(fields=["project", "user"], name="account_project_user"),
        ]

    def __str__(self) -> str:
        return f"account of {self.user} in {self.project.slug}"

    @classmethod
    def for_user(cls, user: AbstractBaseUser, project: Project) -> "Account":
        """The user's account in ``project``, made (joining the project) when missing."""
        account, _ = cls.objects.get_or_create(project=project, user=user)
        return account

    @classmethod
    def by_key(cls, project: Project, authenticator: str) -> "Account | None":
        """The account of ``project`` with this key; None for a key of no account there,
        another project's included."""
        if not authenticator:
            return None
        return cls.objects.filter(project=project, authenticator=authenticator).first()


class AppVersionFile(models.Model):
    """A file of a (non-anonymous) app version: served from its project's download directory, signed.

    ``file_signature`` is the MD5 of the file signed with the project's code-signing key
    (reference/protocol.md §7); the client refuses to run an unsigned executable.
    """

    project = project_field()
    app_version = models.ForeignKey(AppVersion, on_delete=models.CASCADE, related_name="files")
    # unique in its project, as a file in the project's download directory
    name = models.CharField(max_length=254)
    nbytes = models.BigIntegerField()
    md5_cksum = models.CharField(max_length=32)
    file_signature = models.TextField()
    main_program = models.BooleanField(default=True)
    open_name = models.CharField(max_length=254, blank=True)

    class Meta:
        ordering = ["app_version", "-main_program", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="app_version_file_project_name"),
        ]

    def __str__(self) -> str:
        return self.name
