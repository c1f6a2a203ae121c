"""Fixtures for the wire-protocol tests: private file directories, a project, a real client.

The real-client tests skip, saying why, where Debian's ``boinc`` binary is missing. CI sets
``BOINCWEB_REQUIRE_REAL_CLIENT=1`` (``.ci/run``), and then a missing client fails them instead,
so CI cannot pass without having run them.
"""

import time

import pytest

from backend.daemons import run_pass
from backend.daemons.work_generator import create_work
from backend.models import Result, Workunit
from boincweb.env import envbool
from protocol.client import (
    ClientDir,
    boinccmd,
    client_binary,
    client_command,
    free_port,
    quit_client,
    start_client,
    stop_client,
    wait_for,
)
from protocol.models import Account
from tests.factories import AppFactory, UserFactory, demo_project

CLIENT_TIMEOUT = 90


@pytest.fixture(autouse=True)
def data_dirs(settings, tmp_path):
    """Each test gets its own download, upload, assimilated and keys directories."""
    settings.BOINCWEB_DATA_DIR = tmp_path / "project"
    settings.DOWNLOAD_DIR = tmp_path / "project" / "download"
    settings.UPLOAD_DIR = tmp_path / "project" / "upload"
    return tmp_path / "project"


def make_app(name="upper", **fields):
    """An app whose jobs take a second on the real client and upload a little."""
    params = dict(
        max_error_results=1,
        max_total_results=2,
        max_success_results=1,
        rsc_fpops_est=1e9,
        rsc_fpops_bound=1e12,
        max_output_nbytes=100_000,
    )
    params.update(fields)
    return AppFactory(name=name, **params)


def make_jobs(app, names, *, now=None, **kwargs):
    """Workunits with their first results (the transitioner makes those, §3.2)."""
    now = now or int(time.time())
    wus = create_work(app, names, now=now, **kwargs)
    run_pass("transitioner", project=app.project, now=now + 1)
    return wus


def account(username="volunteer", project=None):
    """A new volunteer's account in ``project`` (default the demo project)."""
    return Account.for_user(UserFactory(username=username), project or demo_project())


def run_daemons(rounds=4, project=None):
    """A few rounds of the back end's passes over ``project`` (default the demo project), as
    the daemons would run between RPCs.

    Each round is a second later than the one before: a workunit made due at ``now`` (the
    assimilator's ``transition_time = now``) is due for the transitioner only after ``now``.
    """
    start = int(time.time()) + 1
    for k in range(rounds):
        for name in ("transitioner", "validator", "assimilator", "transitioner", "file_deleter"):
            run_pass(name, project=project or demo_project(), now=start + k)


class RealClient:
    """One run of the real client against the live server, killed at the end whatever happens."""

    def __init__(self, tmp_path, master_url):
        self.dir = ClientDir(tmp_path / "client", master_url).prepare()
        self.log_path = tmp_path / "client.log"
        self.gui_rpc_port = free_port()
        self.process = None

    def start(self, authenticator, **options):
        command = client_command(self.dir, authenticator, gui_rpc_port=self.gui_rpc_port, **options)
        self.process = start_client(command, self.log_path)
        self.started = time.monotonic()
        return self

    def wait(self, seconds=CLIENT_TIMEOUT, until=None):
        """Wait for the client to exit (or ``until()``); fail with its logs on timeout."""
        left = max(CLIENT_TIMEOUT - (time.monotonic() - self.started), 1)
        if wait_for(self.process, min(seconds, left), until=until):
            return time.monotonic() - self.started
        # reference/protocol.md §11 step 6: save the state, ask the client to quit, give it
        # QUIT_WAIT seconds, then kill its process group.
        state = boinccmd(self.gui_rpc_port, "--get_state")
        quit_client(self.process, self.gui_rpc_port)
        self.stop()
        pytest.fail(
            f"the client did not finish within {seconds} s\n{self.diagnostics()}\n--- boinccmd --get_state\n{state}"
        )

    def diagnostics(self):
        log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- client log\n{log[-20000:]}\n{self.dir.sched_files()}"

    def stop(self):
        if self.process is not None:
            stop_client(self.process)


def need_client():
    """The client binary's path; skip the test where the client is missing, or fail it when CI
    requires the client."""
    binary = client_binary()
    if binary is not None:
        return binary
    missing = "Debian's boinc-client is not installed (the boinc binary is not on PATH); .ci/run installs it"
    if envbool("BOINCWEB_REQUIRE_REAL_CLIENT", False):
        pytest.fail(f"{missing}, and BOINCWEB_REQUIRE_REAL_CLIENT is set", pytrace=False)
    pytest.skip(missing)


@pytest.fixture
def real_client(tmp_path, live_server, transactional_db):
    """A factory of RealClient against ``/boinc/`` on 127.0.0.1 (the live server's port)."""
    need_client()
    clients = []

    def make():
        port = live_server.url.rsplit(":", 1)[1]
        client = RealClient(tmp_path, f"http://127.0.0.1:{port}/boinc/")
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.stop()


def result_of(wu):
    return Result.objects.filter(workunit=wu).order_by("id").first()


def reload(wu):
    return Workunit.objects.get(pk=wu.pk)
