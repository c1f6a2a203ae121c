"""Master page, scheduler, upload handler and downloads over HTTP (reference/protocol.md §3-§5)."""

import hashlib
import logging
import time
from xml.etree import ElementTree

import pytest
from django.test import Client

from backend.daemons.hierarchy import download_path, upload_path
from backend.models import App, ClientState, Host, HostFile, Outcome, Result, ServerState
from tests.factories import demo_project
from tests.protocol.conftest import account, make_app, make_jobs
from tests.protocol.requests import report_request, work_request

pytestmark = pytest.mark.django_db

INPUT = b"abcdefghij" * 100


def post(client, path, body):
    return client.generic("POST", path, body, content_type="application/x-www-form-urlencoded")


def rpc(client, body):
    response = post(client, "/boinc/cgi", body)
    return response, ElementTree.fromstring(response.content)


@pytest.fixture
def project():
    app = make_app()
    wus = make_jobs(app, ["wu_a", "wu_b"], inputs=lambda name: INPUT)
    return app, wus


def fetch_job(client, key):
    """A first RPC that gets one job; returns (reply root, host, result)."""
    response, root = rpc(client, work_request(key.authenticator, cpu_req_secs=1))
    assert response.status_code == 200
    host = Host.objects.get(owner=key.user)
    result = Result.objects.get(name=root.find("result").findtext("name"))
    return root, host, result


def upload(client, name, data, *, offset=0, nbytes=None, md5=None):
    nbytes = len(data) if nbytes is None else nbytes
    md5 = md5 or hashlib.md5(data).hexdigest()
    header = (
        f"<data_server_request>\n<core_client_major_version>7</core_client_major_version>\n"
        f"<file_upload>\n<file_info>\n<name>{name}</name>\n<xml_signature>\n"
        f"</xml_signature>\n<max_nbytes>100000</max_nbytes>\n</file_info>\n"
        f"<nbytes>{nbytes}</nbytes>\n<md5_cksum>{md5}</md5_cksum>\n"
        f"<offset>{offset}</offset>\n"
        f"<data>\n"
    ).encode()
    return post(client, "/boinc/file_upload_handler", header + data[offset:])


def file_size(client, name):
    return post(
        client,
        "/boinc/file_upload_handler",
        f"<data_server_request>\n<get_file_size>{name}</get_file_size>\n</data_server_request>\n".encode(),
    )


def status(response):
    return int(ElementTree.fromstring(response.content).findtext("status"))


def test_master_page_names_the_scheduler_at_column_0_and_in_a_comment(client):
    response = client.get("/boinc/")
    text = response.content.decode()
    lines = text.splitlines()
    url = "http://testserver/boinc/cgi"
    assert f'<link rel="boinc_scheduler" href="{url}">' in lines
    assert any(f"<scheduler>{url}</scheduler>" in line for line in lines)
    assert all(len(line.encode()) < 255 for line in lines)


def test_a_new_host_gets_a_hostid_and_a_job_with_urls(client, project):
    key = account()
    root, host, result = fetch_job(client, key)
    assert root.findtext("hostid") == str(host.pk)
    assert host.p_ncpus == 2 and host.domain_name == "vm"
    assert result.server_state == ServerState.IN_PROGRESS and result.host == host
    names = [f.findtext("name") for f in root.findall("file_info")]
    assert f"{result.workunit.name}.in" in names
    assert result.output_file_name(0) in names
    assert root.find("app_version") is None
    assert int(root.find("result").findtext("report_deadline")) > time.time()


def test_an_unknown_account_key_is_refused_and_changes_nothing(client, project):
    response, root = rpc(client, work_request("not-a-key"))
    assert response.status_code == 200
    assert "account key" in root.findtext("message")
    assert root.find("result") is None
    assert not Host.objects.exists()
    assert not Result.objects.filter(server_state=ServerState.IN_PROGRESS).exists()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<scheduler_request><hostid>",
        b"\x00\xff garbage",
        b"<scheduler_request><hostid>x</hostid></scheduler_request>",
    ],
)
def test_a_malformed_request_gets_an_error_reply_and_changes_nothing(client, project, body):
    """An HTTP 200 scheduler reply carrying the reason, as BOINC's scheduler answers: the
    client reads no message from a 4xx reply (reference/protocol.md §4.1)."""
    account()
    response, root = rpc(client, body)
    assert response.status_code == 200
    assert root.tag == "scheduler_reply"
    assert "Can't parse" in root.findtext("message")
    assert root.find("result") is None
    assert not Host.objects.exists()


def test_a_request_too_large_to_read_gets_an_error_reply(client, project, monkeypatch):
    monkeypatch.setattr("protocol.views.MAX_REQUEST_BYTES", 100)
    key = account()
    response, root = rpc(client, work_request(key.authenticator))
    assert response.status_code == 200
    assert "over 100 bytes" in root.findtext("message")
    assert not Host.objects.exists()


def test_the_scheduler_takes_only_post(client):
    assert client.get("/boinc/cgi").status_code == 405


def test_a_reported_success_with_its_output_uploaded_is_a_success(client, project):
    key = account()
    _, host, result = fetch_job(client, key)
    output = b"RESULT\n" * 10
    name = result.output_file_name(0)
    assert status(upload(client, name, output)) == 0
    _, root = rpc(
        client,
        report_request(
            key.authenticator, host.pk, result.name, name, nbytes=len(output), md5=hashlib.md5(output).hexdigest()
        ),
    )
    assert root.find("result_ack").findtext("name") == result.name
    result.refresh_from_db()
    assert result.outcome == Outcome.SUCCESS
    assert result.output_files.get().md5_cksum == hashlib.md5(output).hexdigest()


def test_a_reported_success_whose_output_never_arrived_is_a_client_error(client, project):
    key = account()
    _, host, result = fetch_job(client, key)
    _, root = rpc(client, report_request(key.authenticator, host.pk, result.name, result.output_file_name(0)))
    assert root.find("result_ack").findtext("name") == result.name
    result.refresh_from_db()
    assert result.outcome == Outcome.CLIENT_ERROR
    assert result.client_state == ClientState.UPLOAD_FAILED
    assert "never arrived" in result.stderr_out


def test_a_permanent_upload_error_reported_as_uploaded_is_a_client_error(client, project):
    key = account()
    _, host, result = fetch_job(client, key)
    _, root = rpc(
        client,
        report_request(
            key.authenticator, host.pk, result.name, result.output_file_name(0), error_msg="permanent upload error"
        ),
    )
    result.refresh_from_db()
    assert result.outcome == Outcome.CLIENT_ERROR
    assert "permanent upload error" in result.stderr_out
    assert not result.output_files.exists()


def test_a_report_of_a_result_not_sent_to_this_host_is_ignored_acked_and_logged(client, project, caplog):
    owner, other = account("owner"), account("other")
    _, host, result = fetch_job(client, owner)
    _, other_root = rpc(client, work_request(other.authenticator, cpu_req_secs=1))
    other_host = Host.objects.get(owner=other.user)
    with caplog.at_level(logging.WARNING, logger="protocol.scheduler"):
        _, root = rpc(
            client, report_request(other.authenticator, other_host.pk, result.name, result.output_file_name(0))
        )
    assert root.find("result_ack").findtext("name") == result.name
    assert f"1 reported result(s) not sent to it, ignored: {result.name}" in caplog.text
    assert "not sent to this host" in root.findtext("message")
    result.refresh_from_db()
    assert result.server_state == ServerState.IN_PROGRESS and result.received_time == 0


def test_a_hostid_of_another_account_makes_a_new_host(client, project):
    owner, other = account("owner"), account("other")
    _, host, _ = fetch_job(client, owner)
    _, root = rpc(client, work_request(other.authenticator, hostid=host.pk, cpu_req_secs=0))
    new = Host.objects.get(owner=other.user)
    assert root.findtext("hostid") == str(new.pk) != str(host.pk)


def test_sticky_files_listed_by_the_client_are_recorded_for_its_host(client, project):
    key = account()
    _, host, _ = fetch_job(client, key)
    rpc(client, work_request(key.authenticator, host.pk, cpu_req_secs=0, sticky=[("wu_a.in", 1000)]))
    assert list(HostFile.objects.filter(host=host).values_list("name", flat=True)) == ["wu_a.in"]


# --- the upload handler ------------------------------------------------------------------


def test_an_upload_can_resume_from_the_size_the_server_reports(client, project):
    _, _, result = fetch_job(client, account())
    name, data = result.output_file_name(0), bytes(range(256)) * 100
    assert status(file_size(client, name)) == 0
    assert ElementTree.fromstring(file_size(client, name).content).findtext("file_size") == "0"
    # The body stops after 10000 bytes: transient, and the part is kept.
    cut = upload(client, name, data[:10000], nbytes=len(data), md5=hashlib.md5(data).hexdigest())
    assert status(cut) == 1
    assert ElementTree.fromstring(file_size(client, name).content).findtext("file_size") == "10000"
    assert status(upload(client, name, data, offset=10000)) == 0
    assert upload_path(demo_project(), name).read_bytes() == data


def test_an_upload_with_the_wrong_md5_is_a_transient_error_and_keeps_nothing(client, project):
    _, _, result = fetch_job(client, account())
    name = result.output_file_name(0)
    assert status(upload(client, name, b"data", md5="0" * 32)) == 1
    assert not upload_path(demo_project(), name).exists()
    assert ElementTree.fromstring(file_size(client, name).content).findtext("file_size") == "0"


def test_an_upload_over_the_size_limit_is_a_permanent_error(client, project):
    _, _, result = fetch_job(client, account())
    name = result.output_file_name(0)
    assert status(upload(client, name, b"x" * 100_001)) == -1
    assert not upload_path(demo_project(), name).exists()


@pytest.mark.parametrize("nbytes", ["1e999", "-inf", "nan", "lots"])
def test_an_upload_whose_size_is_not_a_finite_number_is_a_permanent_error(client, project, nbytes):
    _, _, result = fetch_job(client, account())
    name = result.output_file_name(0)
    response = upload(client, name, b"data", nbytes=nbytes)
    assert response.status_code == 200 and status(response) == -1
    message = ElementTree.fromstring(response.content).findtext("message")
    assert message.startswith("<nbytes> is not a finite number")
    assert not upload_path(demo_project(), name).exists()


def test_more_bytes_than_declared_are_a_permanent_error(client, project):
    _, _, result = fetch_job(client, account())
    name = result.output_file_name(0)
    response = upload(client, name, b"x" * 200, nbytes=100)
    assert status(response) == -1
    assert not upload_path(demo_project(), name).exists()


@pytest.mark.parametrize("name", ["wu_a.in", "../etc/passwd", "wu_a_0_r1_0", "nothing"])
def test_uploads_of_files_that_are_not_outputs_of_sent_jobs_are_refused(client, project, name):
    assert status(upload(client, name, b"data")) == -1
    assert status(file_size(client, name)) == -1


def test_an_output_of_an_unsent_result_cannot_be_uploaded(client, project):
    result = Result.objects.filter(server_state=ServerState.UNSENT).first()
    assert status(upload(client, result.output_file_name(0), b"data")) == -1


def test_a_disk_error_while_storing_is_a_transient_error(client, project, monkeypatch):
    _, _, result = fetch_job(client, account())

    def full(part, final):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("protocol.uploads.finish_upload", full)
    response = upload(client, result.output_file_name(0), b"data")
    assert status(response) == 1
    assert b"No space left" in response.content


def test_a_request_without_a_command_is_a_permanent_error(client):
    assert status(post(client, "/boinc/file_upload_handler", b"<data_server_request/>")) == -1


# --- downloads ---------------------------------------------------------------------------


def test_downloads_serve_whole_files_and_ranges(client, project):
    whole = client.get("/boinc/download/wu_a.in")
    assert whole.status_code == 200
    assert b"".join(whole.streaming_content) == INPUT
    part = client.get("/boinc/download/wu_a.in", HTTP_RANGE="bytes=990-")
    assert part.status_code == 206
    assert part["Content-Range"] == f"bytes 990-999/{len(INPUT)}"
    assert b"".join(part.streaming_content) == INPUT[990:]
    middle = client.get("/boinc/download/wu_a.in", HTTP_RANGE="bytes=10-19")
    assert b"".join(middle.streaming_content) == INPUT[10:20]
    tail = client.get("/boinc/download/wu_a.in", HTTP_RANGE="bytes=-5")
    assert b"".join(tail.streaming_content) == INPUT[-5:]
    assert client.get("/boinc/download/wu_a.in", HTTP_RANGE="bytes=5000-").status_code == 416
    assert client.get("/boinc/download/wu_a.in", HTTP_RANGE="lines=1-2").status_code == 416


@pytest.mark.parametrize("name", ["missing.in", ".hidden", "..", "%2e%2e%2fsecret"])
def test_downloads_of_unknown_or_unsafe_names_are_404(client, project, name):
    download_path(demo_project(), "x").parent.mkdir(parents=True, exist_ok=True)
    (download_path(demo_project(), "x").parent / ".hidden").write_text("secret")
    assert client.get(f"/boinc/download/{name}").status_code == 404


def test_the_scheduler_and_upload_handler_take_raw_posts_without_a_csrf_token(project):
    strict = Client(enforce_csrf_checks=True)
    key = account()
    response, root = rpc(strict, work_request(key.authenticator, cpu_req_secs=1))
    assert response.status_code == 200 and root.find("result") is not None
    name = Result.objects.get(server_state=ServerState.IN_PROGRESS).output_file_name(0)
    assert status(upload(strict, name, b"data")) == 0


def test_an_upload_larger_than_djangos_in_memory_limit_is_streamed_to_disk(client, project, settings):
    app, _ = project
    App.objects.filter(pk=app.pk).update(max_output_nbytes=10**7)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1 << 20
    _, _, result = fetch_job(client, account())
    data = bytes(range(256)) * (3 << 12)  # 3 MiB
    name = result.output_file_name(0)
    assert status(upload(client, name, data)) == 0
    assert upload_path(demo_project(), name).read_bytes() == data
