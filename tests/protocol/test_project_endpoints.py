"""Each project's BOINC endpoints under /projects/<slug>/boinc/, its accounts, keys and files
(DESIGN.md "Projects"; reference/protocol.md §3-§5, §7): nothing a client sends to one project
reads or writes another's rows or files."""

import hashlib
import re
from xml.etree import ElementTree

import pytest
from django.core.management import CommandError, call_command

from backend.daemons.hierarchy import download_path, project_dir, upload_path
from backend.models import Host, Project, Result, ServerState
from protocol import signing
from protocol.models import Account, AppVersionFile
from tests.factories import AppVersionFactory, ProjectFactory, UserFactory, demo_project
from tests.pages import by_testid, parse
from tests.protocol.conftest import account, make_app, make_jobs
from tests.protocol.requests import report_request, work_request
from tests.protocol.test_endpoints import INPUT, post, status

pytestmark = pytest.mark.django_db


def rpc(client, project, body):
    response = post(client, f"{base(project)}cgi", body)
    assert response.status_code == 200
    return ElementTree.fromstring(response.content)


def base(project):
    return f"/projects/{project.slug}/boinc/"


def upload_body(name, data):
    return (
        f"<data_server_request>\n<file_upload>\n<file_info>\n<name>{name}</name>\n</file_info>\n"
        f"<nbytes>{len(data)}</nbytes>\n<md5_cksum>{hashlib.md5(data).hexdigest()}</md5_cksum>\n"
        f"<offset>0</offset>\n<data>\n"
    ).encode() + data


@pytest.fixture
def other():
    """A second live project, "other", with an app and two jobs of its own."""
    project = ProjectFactory(slug="other", name="Other project")
    app = make_app(project=project)
    make_jobs(app, ["other_a", "other_b"], inputs=lambda name: INPUT)
    return project


@pytest.fixture
def world():
    return ProjectFactory(slug="world-7", name="A world", kind=Project.Kind.WORLD)


def snapshot():
    """Every row a scheduler request could write, as values."""
    return (
        list(Host.objects.order_by("id").values()),
        list(Result.objects.order_by("id").values()),
        list(Account.objects.order_by("id").values()),
    )


def test_the_master_page_names_the_project_s_own_scheduler_and_upload_urls(client, other):
    text = client.get(base(other)).content.decode()
    lines = text.splitlines()
    scheduler = "http://testserver/projects/other/boinc/cgi"
    assert f'<link rel="boinc_scheduler" href="{scheduler}">' in lines
    assert f"<!-- <scheduler>{scheduler}</scheduler> -->" in lines
    page = parse(client.get(base(other)))
    assert by_testid(page, "upload-url").text == "http://testserver/projects/other/boinc/file_upload_handler"
    assert "<title>Other project</title>" in lines
    # the demo project's stays at /boinc/, and names its own
    assert '<link rel="boinc_scheduler" href="http://testserver/boinc/cgi">' in client.get("/boinc/").content.decode()


def test_an_unknown_project_s_pages_are_404s_and_its_scheduler_says_so_in_a_reply(client):
    for path in ("", "account/", "download/wu.in"):
        assert client.get(f"/projects/nope/boinc/{path}").status_code == 404
    assert post(client, "/projects/nope/boinc/file_upload_handler", upload_body("x_r1_0", b"x")).status_code == 404
    root = rpc(client, Project(slug="nope"), work_request("any-key"))
    assert root.tag == "scheduler_reply"
    assert "no project 'nope'" in root.findtext("message")
    assert float(root.findtext("request_delay")) >= 3600
    assert not Host.objects.exists()


def test_a_project_whose_config_xml_cannot_be_read_refuses_requests_with_the_reason(client, other):
    other.config_xml = "<config><daily_result_quota>many</daily_result_quota></config>"
    other.save()
    key = account("volunteer", other)
    before = snapshot()
    root = rpc(client, other, work_request(key.authenticator))
    assert "server configuration cannot be read (<daily_result_quota> must be a number" in root.findtext("message")
    assert snapshot() == before


def test_a_scheduler_request_with_another_project_s_key_is_refused_and_changes_nothing(client, other):
    demo_app = make_app()
    make_jobs(demo_app, ["demo_a"], inputs=lambda name: INPUT)
    demo_key = account("volunteer")
    before = snapshot()
    root = rpc(client, other, work_request(demo_key.authenticator))
    assert "Invalid or missing account key" in root.findtext("message")
    assert root.find("result") is None
    assert snapshot() == before
    # and the other way round
    other_key = account("another", other)
    before = snapshot()
    root = post(client, "/boinc/cgi", work_request(other_key.authenticator))
    assert b"Invalid or missing account key" in root.content
    assert snapshot() == before


def test_one_person_has_a_key_per_project_and_a_host_in_each(client, other):
    make_jobs(make_app(), ["demo_a"], inputs=lambda name: INPUT)
    person = UserFactory(username="both")
    demo_key, other_key = Account.for_user(person, demo_project()), Account.for_user(person, other)
    assert demo_key.authenticator != other_key.authenticator
    assert Account.for_user(person, other) == other_key

    demo_root = ElementTree.fromstring(post(client, "/boinc/cgi", work_request(demo_key.authenticator)).content)
    other_root = rpc(client, other, work_request(other_key.authenticator))
    demo_host = Host.objects.get(pk=demo_root.findtext("hostid"))
    other_host = Host.objects.get(pk=other_root.findtext("hostid"))
    assert (demo_host.project, other_host.project) == (demo_project(), other)
    assert demo_host.owner == other_host.owner == person
    demo_job = Result.objects.get(name=demo_root.find("result").findtext("name"))
    other_job = Result.objects.get(name=other_root.find("result").findtext("name"))
    assert (demo_job.project, demo_job.host) == (demo_project(), demo_host)
    assert (other_job.project, other_job.host) == (other, other_host)
    # the reply names the project and its own URLs
    assert other_root.findtext("project_name") == "Other project"
    urls = {f.findtext("name"): f.findtext("url") or f.findtext("upload_url") for f in other_root.iter("file_info")}
    assert (
        urls[f"{other_job.workunit.name}.in"]
        == f"http://testserver/projects/other/boinc/download/{other_job.workunit.name}.in"
    )
    assert urls[other_job.output_file_name(0)] == "http://testserver/projects/other/boinc/file_upload_handler"

    # the demo host's id sent to the other project is not one of its hosts: a new host there
    root = rpc(client, other, work_request(other_key.authenticator, hostid=demo_host.pk))
    assert root.findtext("hostid") not in (str(demo_host.pk), "")
    assert Host.objects.get(pk=root.findtext("hostid")).project == other


def test_a_download_is_served_from_its_project_s_directory_only(client, other):
    demo_wu = make_jobs(make_app(), ["demo_a"], inputs=lambda name: b"demo input")[0]
    other_input = f"{Result.objects.filter(project=other).first().workunit.name}.in"
    assert download_path(other, other_input).read_bytes() == INPUT
    assert download_path(other, other_input).parent == project_dir(other, "download")
    response = client.get(f"{base(other)}download/{other_input}")
    assert response.status_code == 200 and b"".join(response.streaming_content) == INPUT
    # another project's file is no file of this project's
    assert client.get(f"{base(other)}download/{demo_wu.name}.in").status_code == 404
    assert client.get(f"/boinc/download/{other_input}").status_code == 404
    assert client.get(f"/boinc/download/{demo_wu.name}.in").status_code == 200


def test_an_upload_lands_in_its_project_s_upload_directory(client, other, settings):
    key = account("volunteer", other)
    root = rpc(client, other, work_request(key.authenticator))
    result = Result.objects.get(name=root.find("result").findtext("name"))
    name = result.output_file_name(0)
    data = b"OUTPUT OF OTHER\n"
    # the demo project's handler knows no such file
    assert status(post(client, "/boinc/file_upload_handler", upload_body(name, data))) == -1
    assert status(post(client, f"{base(other)}file_upload_handler", upload_body(name, data))) == 0
    assert upload_path(other, name).read_bytes() == data
    assert upload_path(other, name).parent == settings.BOINCWEB_DATA_DIR / "projects" / "other" / "upload"
    assert not (settings.UPLOAD_DIR / name).exists()

    # the report to the other project finds the output there
    report = report_request(
        key.authenticator,
        root.findtext("hostid"),
        result.name,
        name,
        nbytes=len(data),
        md5=hashlib.md5(data).hexdigest(),
    )
    rpc(client, other, report)
    result.refresh_from_db()
    assert result.server_state == ServerState.OVER and result.outcome == 1, result.stderr_out
    assert [(f.name, f.project) for f in result.output_files.all()] == [(name, other)]


def test_a_world_s_project_refuses_real_clients_with_a_message(client, world):
    user = UserFactory(username="volunteer")
    key = Account.objects.create(project=world, user=user)
    root = rpc(client, world, work_request(key.authenticator))
    assert "simulated world" in root.findtext("message") and "real clients" in root.findtext("message")
    assert float(root.findtext("request_delay")) >= 3600
    assert not Host.objects.exists()
    reply = post(client, f"{base(world)}file_upload_handler", upload_body("wu_0_r1_0", b"x")).content
    assert b"<status>-1</status>" in reply and b"simulated world" in reply
    assert client.get(f"{base(world)}download/wu.in").status_code == 404
    client.force_login(user)
    assert client.get(f"{base(world)}account/").status_code == 404
    # the master page is served, so that a client attached to it reads the scheduler's message
    page = client.get(base(world)).content.decode()
    assert f'<link rel="boinc_scheduler" href="http://testserver{base(world)}cgi">' in page.splitlines()
    assert "real BOINC clients cannot join it" in page


def test_the_account_page_shows_the_key_of_the_project_in_the_url(client, other):
    user = UserFactory(username="volunteer")
    client.force_login(user)
    page = parse(client.get(f"{base(other)}account/"))
    key = Account.objects.get(project=other, user=user).authenticator
    assert by_testid(page, "authenticator").text == key
    url = "http://testserver/projects/other/boinc/"
    assert by_testid(page, "attach-command").text == f"boinccmd --project_attach {url} {key}"
    demo_page = parse(client.get("/boinc/account/"))
    demo_key = Account.objects.get(project=demo_project(), user=user).authenticator
    assert demo_key != key
    assert (
        by_testid(demo_page, "attach-command").text == f"boinccmd --project_attach http://testserver/boinc/ {demo_key}"
    )
    assert Account.objects.filter(user=user).count() == 2


def test_project_directories_follow_one_rule(settings, other):
    demo = demo_project()
    data = settings.BOINCWEB_DATA_DIR
    assert project_dir(demo, "download") == settings.DOWNLOAD_DIR == demo.download_dir
    assert project_dir(demo, "upload") == settings.UPLOAD_DIR == demo.upload_dir
    assert project_dir(demo, "keys") == data / "keys" == demo.keys_dir
    assert project_dir(demo, "assimilated") == data / "assimilated"
    for kind in ("download", "upload", "keys", "assimilated"):
        assert project_dir(other, kind) == data / "projects" / "other" / kind
    with pytest.raises(ValueError, match="no project directory 'spool'"):
        project_dir(other, "spool")


def test_each_project_signs_with_its_own_keys_and_serves_its_own_app_versions(client, other, tmp_path):
    call_command("make_signing_keys", "--bits", "512", "--project", "other")
    assert signing.load_public_key_text(other.keys_dir)
    assert not signing.load_public_key_text(demo_project().keys_dir)
    assert other.keys_dir == project_dir(other, "keys")
    exe = tmp_path / "worker.sh"
    exe.write_text("#!/bin/sh\nexit 0\n")
    app = other.apps.get()
    call_command("add_app_version", app.name, "300", str(exe), "--project", "other")
    row = AppVersionFile.objects.get(project=other)
    assert download_path(other, row.name).read_bytes() == exe.read_bytes()
    assert not download_path(demo_project(), row.name).exists()
    public = signing.parse_public_key(signing.load_public_key_text(other.keys_dir))
    assert signing.verify_md5(row.md5_cksum, row.file_signature, public)
    # the demo project, without keys, cannot sign; a file of the same name is its own row
    demo_version = AppVersionFactory(app=make_app(), version_num=300)
    with pytest.raises(signing.SigningError, match="no private key"):
        signing.add_app_version_file(demo_version, exe, name=row.name)
    signing.write_key_pair(demo_project().keys_dir, bits=512)
    demo_row = signing.add_app_version_file(demo_version, exe, name=row.name)
    assert (demo_row.project, demo_row.pk != row.pk) == (demo_project(), True)
    assert AppVersionFile.objects.get(pk=row.pk).project == other
    # a client off the anonymous platform gets the other project's key and executable
    key = account("volunteer", other)
    body = re.sub(
        rb"<app_versions>.*</app_versions>\n",
        b"",
        work_request(key.authenticator).replace(b">anonymous<", b">x86_64-pc-linux-gnu<"),
        flags=re.DOTALL,
    )
    root = rpc(client, other, body)
    assert root.find("result") is not None, ElementTree.tostring(root)
    assert root.findtext("code_sign_key").strip() == signing.load_public_key_text(other.keys_dir).strip()
    urls = [f.findtext("url") for f in root.iter("file_info") if f.findtext("name") == row.name]
    assert urls == [f"http://testserver/projects/other/boinc/download/{row.name}"]
    with pytest.raises(CommandError, match="unknown project 'nope'"):
        call_command("make_signing_keys", "--project", "nope")
