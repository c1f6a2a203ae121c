"""make_signing_keys, add_app_version and attach_client (reference/protocol.md §7, §11)."""

import pytest
from django.core.management import CommandError, call_command

from backend.daemons.hierarchy import download_path
from backend.models import AppVersion, Project
from protocol import signing
from protocol.client import escape_project_url
from protocol.models import Account, AppVersionFile
from tests.factories import ProjectFactory, demo_project
from tests.protocol.conftest import make_app


@pytest.mark.django_db
def test_make_signing_keys_writes_a_pair_once(data_dirs):
    call_command("make_signing_keys", "--bits", "512")
    key = signing.load_private_key(demo_project().keys_dir)
    assert signing.load_public_key_text(demo_project().keys_dir) == signing.public_key_text(key.public())
    with pytest.raises(CommandError, match="exists"):
        call_command("make_signing_keys", "--bits", "512")
    call_command("make_signing_keys", "--bits", "512", "--replace")
    assert signing.load_private_key(demo_project().keys_dir) != key


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
    assert download_path(demo_project(), row.name).read_bytes() == exe.read_bytes()
    public = signing.parse_public_key(signing.load_public_key_text(demo_project().keys_dir))
    assert signing.verify_md5(row.md5_cksum, row.file_signature, public)
    with pytest.raises(CommandError, match="no app"):
        call_command("add_app_version", "nope", "1", str(exe))


@pytest.mark.django_db
def test_attach_client_needs_the_client_binary(monkeypatch):
    monkeypatch.setattr("protocol.management.commands.attach_client.client_binary", lambda: None)
    with pytest.raises(CommandError, match="apt-get install boinc-client"):
        call_command("attach_client")


class FinishedClient:
    """Stands in for the client's process: it has already exited."""

    pid = 0
    returncode = 0

    def wait(self, timeout=None):
        return 0

    def poll(self):
        return 0


@pytest.fixture
def started(monkeypatch):
    """The commands attach_client starts the client with, instead of starting it."""
    commands = []
    module = "protocol.management.commands.attach_client"
    monkeypatch.setattr(f"{module}.client_binary", lambda: "/usr/bin/boinc")
    monkeypatch.setattr(f"{module}.start_client", lambda command: commands.append(command) or FinishedClient())
    monkeypatch.setattr(f"{module}.stop_client", lambda process: None)
    return commands


@pytest.mark.django_db
def test_attach_client_runs_the_demo_app_anonymously_on_boincweb_port(started, monkeypatch, tmp_path):
    monkeypatch.setenv("BOINCWEB_PORT", "8123")
    make_app("example_app")
    call_command("attach_client", "--dir", str(tmp_path / "client"))
    url = "http://127.0.0.1:8123/boinc/"
    [command] = started
    assert command[-3:-1] == ["--attach_project", url]
    app_info = tmp_path / "client" / "projects" / escape_project_url(url) / "app_info.xml"
    assert "<name>example_app</name>" in app_info.read_text()


@pytest.mark.django_db
def test_attach_client_defaults_to_port_8000(started, monkeypatch, tmp_path):
    monkeypatch.delenv("BOINCWEB_PORT", raising=False)
    make_app("example_app")
    call_command("attach_client", "--dir", str(tmp_path / "client"))
    assert "http://127.0.0.1:8000/boinc/" in started[0]


@pytest.mark.django_db
def test_attach_client_refuses_a_bad_boincweb_port(started, monkeypatch):
    monkeypatch.setenv("BOINCWEB_PORT", "eighty")
    make_app("example_app")
    with pytest.raises(CommandError, match="BOINCWEB_PORT='eighty' is not a whole number"):
        call_command("attach_client")
    assert not started


@pytest.mark.django_db
def test_attach_client_without_the_demo_app_says_to_seed_it(started):
    with pytest.raises(CommandError, match="no app named 'example_app'; run .*seed_demo"):
        call_command("attach_client")
    with pytest.raises(CommandError, match="no app named 'nope'"):
        call_command("attach_client", "--app", "nope")
    assert not started


@pytest.mark.django_db
def test_attach_client_signed_needs_a_signed_app_version(started, tmp_path):
    make_app("example_app")
    with pytest.raises(CommandError, match="no signed app version"):
        call_command("attach_client", "--signed")
    assert not started


@pytest.mark.django_db
def test_attach_client_signed_installs_no_anonymous_app(started, data_dirs, tmp_path):
    app = make_app()
    exe = tmp_path / "worker.sh"
    exe.write_text("#!/bin/sh\nexit 0\n")
    call_command("make_signing_keys", "--bits", "512")
    call_command("add_app_version", app.name, "300", str(exe))
    call_command("attach_client", "--signed", "--dir", str(tmp_path / "client"), "--url", "http://127.0.0.1:9/boinc/")
    assert started
    assert not list((tmp_path / "client").glob("projects/*/app_info.xml"))


def test_project_directory_names_are_escaped_as_the_client_does():
    assert escape_project_url("http://127.0.0.1:45743/proj/") == "127.0.0.1_45743_proj"
    assert escape_project_url("https://example.org/boinc/") == "example.org_boinc"


@pytest.mark.django_db
def test_attach_client_attaches_to_another_project_with_its_own_key(started, monkeypatch, tmp_path):
    monkeypatch.setenv("BOINCWEB_PORT", "8123")
    other = ProjectFactory(slug="science")
    make_app("example_app", project=other)
    call_command("attach_client", "--project", "science", "--dir", str(tmp_path / "client"))
    url = "http://127.0.0.1:8123/projects/science/boinc/"
    [command] = started
    key = Account.objects.get(project=other, user__username="volunteer").authenticator
    assert command[-3:] == ["--attach_project", url, key]
    assert not Account.objects.filter(project=demo_project()).exists()
    assert (tmp_path / "client" / "projects" / escape_project_url(url) / "app_info.xml").exists()


@pytest.mark.django_db
def test_attach_client_refuses_a_world_s_project_and_an_unknown_one(started):
    world = ProjectFactory(slug="world-3", kind=Project.Kind.WORLD)
    make_app("example_app", project=world)
    with pytest.raises(CommandError, match="world-3 is a simulated world's; real clients attach to live projects only"):
        call_command("attach_client", "--project", "world-3")
    with pytest.raises(CommandError, match="unknown project 'nope'"):
        call_command("attach_client", "--project", "nope")
    assert not started and not Account.objects.exists()
