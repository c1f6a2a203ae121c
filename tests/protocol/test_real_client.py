"""Debian's real BOINC client against the live server (reference/protocol.md §11).

Each scenario starts ``boinc`` in its own process group with a private data directory, waits
for it to exit on its own (``--exit_when_idle``: the result was reported and acked), at most
90 s, then checks the database. The group is killed at the end whatever happened. Skipped,
saying so, where the client is not installed; CI installs it.
"""

import hashlib

import pytest
from django.test import Client

from backend.daemons.hierarchy import download_path, upload_path, write_file
from backend.models import (
    AssimilateState,
    ClientState,
    FileDeleteState,
    Host,
    HostFile,
    LifecycleEvent,
    Outcome,
    ServerState,
    ValidateState,
)
from protocol import signing
from protocol.client import worker_script
from protocol.scheduler_rpc import scheduler_rpc
from protocol.uploads import finish_upload
from protocol.xml_request import parse_request
from tests.factories import AppVersionFactory, FileFactory, demo_project
from tests.pages import by_testid, parse, rows
from tests.protocol.conftest import (
    account,
    make_app,
    make_jobs,
    reload,
    result_of,
    run_daemons,
)

pytestmark = [pytest.mark.real_client, pytest.mark.django_db(transaction=True)]

INPUT = b"hello from the project\n" * 200


def compute_one_job(real_client, wu_name, *, script=None):
    """One workunit of app "upper" computed by a client on the anonymous platform.

    Returns (workunit, RealClient, Account) once the client has exited.
    """
    app = make_app()
    (wu,) = make_jobs(app, [wu_name], inputs=lambda name: INPUT)
    key = account()
    client = real_client()
    client.dir.install_anonymous_app(app.name, script=script)
    client.start(key.authenticator)
    client.wait()
    return wu, client, key


def test_the_client_fetches_computes_uploads_and_reports_a_job_that_goes_through_its_lifecycle(real_client):
    wu, client, key = compute_one_job(real_client, "wu_ok")

    result = result_of(wu)
    assert result.server_state == ServerState.OVER, client.diagnostics()
    assert result.outcome == Outcome.SUCCESS, result.stderr_out
    assert result.exit_status == 0
    assert result.client_state == ClientState.FILES_UPLOADED
    assert "worker starting" in result.stderr_out
    host = Host.objects.get(owner=key.user)
    assert result.host == host and host.p_ncpus >= 1
    output = upload_path(demo_project(), result.output_file_name(0)).read_bytes()
    assert output == INPUT.upper() + b"upper done\n"
    stored = result.output_files.get()
    assert stored.md5_cksum == hashlib.md5(output).hexdigest()
    assert stored.nbytes == len(output)

    run_daemons()
    wu = reload(wu)
    result = result_of(wu)
    assert result.validate_state == ValidateState.VALID
    assert wu.canonical_result_id == result.pk
    assert wu.assimilate_state == AssimilateState.DONE
    assert wu.file_delete_state == FileDeleteState.DONE
    assert not upload_path(demo_project(), result.output_file_name(0)).exists()
    changes = set(LifecycleEvent.objects.filter(workunit=wu).values_list("actor", "field"))
    assert {
        ("scheduler", "server_state"),
        ("scheduler", "outcome"),
        ("validator", "validate_state"),
        ("assimilator", "assimilate_state"),
        ("file_deleter", "file_delete_state"),
    } <= changes, changes
    # The workunit's page shows that lifecycle.
    events = rows(by_testid(parse(Client().get(f"/project/workunits/{wu.pk}/")), "events"))
    reasons = [why for *_, why in events]
    assert any(f"sent to host {host.pk}" in why for why in reasons), reasons
    assert any("reported by the host" in why for why in reasons), reasons
    assert {"scheduler", "validator", "assimilator", "file_deleter"} <= {by for *_, by, _why in events}


def test_an_app_that_exits_non_zero_is_reported_as_a_client_error(real_client):
    wu, client, _ = compute_one_job(real_client, "wu_fails", script=worker_script("upper", exit_code=3))

    result = result_of(wu)
    assert result.server_state == ServerState.OVER, client.diagnostics()
    assert result.outcome == Outcome.CLIENT_ERROR
    assert result.client_state == ClientState.COMPUTE_ERROR
    assert result.exit_status == 3
    assert "failing on purpose" in result.stderr_out
    # An output the client uploaded anyway is recorded (and deleted with the rest later).
    for stored in result.output_files.all():
        assert upload_path(demo_project(), stored.name).stat().st_size == stored.nbytes


def test_a_transient_upload_error_is_retried_and_the_job_succeeds(real_client, monkeypatch):
    failures = []

    def fail_once(part, final):
        if not failures:
            failures.append(final.name)
            raise OSError(28, "No space left on device")
        finish_upload(part, final)

    monkeypatch.setattr("protocol.uploads.finish_upload", fail_once)
    wu, client, _ = compute_one_job(real_client, "wu_retry")

    result = result_of(wu)
    assert failures == [result.output_file_name(0)]
    assert result.outcome == Outcome.SUCCESS, client.diagnostics()
    assert upload_path(demo_project(), result.output_file_name(0)).read_bytes() == INPUT.upper() + b"upper done\n"


def test_after_a_scheduler_error_500_the_client_retries_and_the_job_succeeds(real_client, monkeypatch):
    calls = []

    def fail_first(body, **kwargs):
        calls.append(len(body))
        if len(calls) == 1:
            return 500, b"internal error"
        return scheduler_rpc(body, **kwargs)

    monkeypatch.setattr("protocol.views.scheduler_rpc", fail_first)
    wu, client, _ = compute_one_job(real_client, "wu_after_500")

    assert len(calls) >= 3  # the failed one, the retry that fetched work, the report
    result = result_of(wu)
    assert result.outcome == Outcome.SUCCESS, client.diagnostics()


def test_two_jobs_share_a_sticky_input_that_the_client_then_lists(real_client):
    app = make_app()
    data = b"shared input\n" * 300
    shared = FileFactory(
        name="shared.in",
        nbytes=len(data),
        md5_cksum=write_file(download_path(demo_project(), "shared.in"), data),
        sticky=True,
    )
    wus = make_jobs(app, ["wu_s1", "wu_s2"], shared_input=shared)
    key = account()
    client = real_client()
    client.dir.install_anonymous_app(app.name)
    client.start(key.authenticator, fetch_minimal_work=False)
    client.wait()

    results = [result_of(wu) for wu in wus]
    assert [r.outcome for r in results] == [Outcome.SUCCESS] * 2, client.diagnostics()
    for result in results:
        assert upload_path(demo_project(), result.output_file_name(0)).read_bytes().startswith(data.upper())
    host = Host.objects.get(owner=key.user)
    assert list(HostFile.objects.filter(host=host).values_list("name", flat=True)) == ["shared.in"]
    last_request = next(client.dir.path.glob("sched_request_*.xml")).read_bytes()
    assert [f.name for f in parse_request(last_request).request.file_infos] == ["shared.in"]
    assert (client.dir.project_dir / "shared.in").read_bytes() == data


def test_a_signed_app_version_is_downloaded_verified_and_run(real_client, tmp_path):
    app = make_app()
    signing.write_key_pair(demo_project().keys_dir)
    version = AppVersionFactory(app=app, version_num=200, platform="x86_64-pc-linux-gnu", flops=1e9)
    script = tmp_path / "worker.sh"
    script.write_text(worker_script(app.name))
    signing.add_app_version_file(version, script)
    (wu,) = make_jobs(app, ["wu_signed"], inputs=lambda name: INPUT)
    key = account()
    client = real_client()
    client.start(key.authenticator)
    client.wait()

    result = result_of(wu)
    assert result.outcome == Outcome.SUCCESS, client.diagnostics()
    assert result.app_version == version
    state = (client.dir.path / "client_state.xml").read_text()
    assert signing.load_public_key_text(demo_project().keys_dir).strip() in state
