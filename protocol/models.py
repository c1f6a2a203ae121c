"""Rows only the wire protocol needs: account keys and the files of signed app versions."""

import secrets

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models

from backend.models import AppVersion, Project, project_field


def new_authenticator() -> str:
    return secrets.token_hex(16)


class Account(models.Model):
    """A volunteer's account in one project: its key (BOINC's ``user.authenticator``).

    As in BOINC, where each project has its own user table, a person's Django user has one
    account per project they join, each with its own key. A client attaches to a project with
    that project's key and sends it in every scheduler request (reference/protocol.md §2,
    §4.2); it is the only credential a client has, and a project knows only its own keys.
    """

    project = project_field("accounts")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="boinc_accounts")
    authenticator = models.CharField(max_length=64, unique=True, default=new_authenticator)

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
