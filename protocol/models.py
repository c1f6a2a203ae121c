"""Rows only the wire protocol needs: account keys and the files of signed app versions."""

import secrets

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models

from backend.models import AppVersion, project_field


def new_authenticator() -> str:
    return secrets.token_hex(16)


class Account(models.Model):
    """A volunteer's account key (BOINC's ``user.authenticator``), one per Django user.

    A client attaches with the key and sends it in every scheduler request
    (reference/protocol.md §2, §4.2); it is the only credential a client has.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="boinc_account")
    authenticator = models.CharField(max_length=64, unique=True, default=new_authenticator)

    def __str__(self) -> str:
        return f"account of {self.user}"

    @classmethod
    def for_user(cls, user: AbstractBaseUser) -> "Account":
        account, _ = cls.objects.get_or_create(user=user)
        return account


class AppVersionFile(models.Model):
    """A file of a (non-anonymous) app version: served from the download directory, signed.

    ``file_signature`` is the MD5 of the file signed with the project's code-signing key
    (reference/protocol.md §7); the client refuses to run an unsigned executable.
    """

    project = project_field()
    app_version = models.ForeignKey(AppVersion, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=254, unique=True)
    nbytes = models.BigIntegerField()
    md5_cksum = models.CharField(max_length=32)
    file_signature = models.TextField()
    main_program = models.BooleanField(default=True)
    open_name = models.CharField(max_length=254, blank=True)

    class Meta:
        ordering = ["app_version", "-main_program", "name"]

    def __str__(self) -> str:
        return self.name
