"""make_signing_keys, add_app_version and attach_client (reference/protocol.md §7, §11)."""

import pytest
from django.core.management import CommandError, call_command

from backend.daemons.hierarchy import download_path
from backend.models import AppVersion
from protocol import signing
from protocol.client import escape_project_url
from protocol.models import AppVersionFile
from tests.protocol.conftest import make_app


def test_make_signing_keys_writes_a_pair_once(data_dirs):
    call_command("make_signing_keys", "--bits", "512")
    key = signing.load_private_key()
    assert signing.load_public_key_text() == signing.public_key_text(key.public())
    with pytest.raises(CommandError, match="exists"):
        call_command("make_signing_keys", "--bits", "512")
    call_command("make_signing_keys", "--bits", "512", "--replace")
    assert signing.load_private_key() != key


@pytest.mark.django_db
def test_add_app_version_serves_and_signs_the_executable(data_dirs, tmp_path):
    app = make_app()
    exe = tmp_path / "worker.sh"
    exe.write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(CommandError, match="make_signing_keys"):
        call_command("add_app_version", app.name, "300", str(exe))
    call_command("make_signing_keys", "--bits", "512")
    call_command("add_app_version", app.name, "300", str(exe))
    version = AppVersion.objects.get(app=app, version_num=300)
    row = AppVersionFile.objects.get(app_version=version)
    assert download_path(row.name).read_bytes() == exe.read_bytes()
    public = signing.parse_public_key(signing.load_public_key_text())
    assert signing.verify_md5(row.md5_cksum, row.file_signature, public)
    with pytest.raises(CommandError, match="no app"):
        call_command("add_app_version", "nope", "1", str(exe))


@pytest.mark.django_db
def test_attach_client_needs_the_client_binary(monkeypatch):
    monkeypatch.setattr("protocol.management.commands.attach_client.client_binary", lambda: None)
    with pytest.raises(CommandError, match="apt-get install boinc-client"):
        call_command("attach_client")


def test_project_directory_names_are_escaped_as_the_client_does():
    assert escape_project_url("http://127.0.0.1:45743/proj/") == "127.0.0.1_45743_proj"
    assert escape_project_url("https://example.org/boinc/") == "example.org_boinc"
