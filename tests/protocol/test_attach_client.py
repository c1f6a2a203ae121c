"""``attach_client`` never leaves its BOINC client behind: stopped by SIGTERM, SIGINT or SIGHUP,
or at its own time limit, it asks the real client to quit by GUI RPC, waits, and only then
kills what is left (reference/protocol.md §11 step 6)."""

import os
import re
import signal
import subprocess
import time

import pytest

from protocol.client import QUIT_WAIT, boinccmd
from protocol.management.commands.attach_client import DEMO_APP
from tests.protocol.conftest import make_app, make_jobs, need_client
from tests.web.serving import MANAGE, child_env

pytestmark = [pytest.mark.real_client, pytest.mark.django_db(transaction=True)]

START_SECONDS = 60


def gone(pid):
    """Whether no process of the client's process group is left."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


class Attached:
    """``manage.py attach_client`` as a child process, its output in a file."""

    def __init__(self, tmp_path, live_server, *options):
        self.log_path = tmp_path / "attach_client.log"
        self.log = open(self.log_path, "w+")
        port = live_server.url.rsplit(":", 1)[1]
        self.process = subprocess.Popen(
            [
                *MANAGE,
                "attach_client",
                "--url",
                f"http://127.0.0.1:{port}/boinc/",
                "--dir",
                str(tmp_path / "client"),
                *options,
            ],
            env=child_env(BOINCWEB_DATA_DIR=tmp_path / "project", PYTHONUNBUFFERED=1),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.client_pid = self.gui_rpc_port = None

    def output(self):
        return self.log_path.read_text()

    def wait_for_the_client(self):
        """Wait until the client answers GUI RPCs and has attached to the project."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            found = re.search(r"client started: pid (\d+), GUI RPC port (\d+)", self.output())
            if found:
                self.client_pid, self.gui_rpc_port = map(int, found.groups())
                if "master URL" in boinccmd(self.gui_rpc_port, "--get_project_status"):
                    return
            time.sleep(0.5)
        pytest.fail(f"the client did not attach within {START_SECONDS} s\n{self.output()}")

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.client_pid and not gone(self.client_pid):
            os.killpg(self.client_pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture
def attach(tmp_path, live_server, settings):
    need_client()
    make_jobs(make_app(DEMO_APP), [f"attach_{i}" for i in range(3)])
    started = []

    def attach(*options):
        started.append(Attached(tmp_path, live_server, *options))
        return started[-1]

    yield attach
    for attached in started:
        attached.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_attach_client_quits_its_client_by_gui_rpc(attach, stop):
    attached = attach()
    attached.wait_for_the_client()
    signalled = time.monotonic()
    attached.process.send_signal(stop)
    assert attached.process.wait(timeout=QUIT_WAIT + 20) == 0, attached.output()
    output = attached.output()
    assert f"stopping the client ({stop.name})" in output
    assert "the client quit" in output and "killing it" not in output
    assert time.monotonic() - signalled < QUIT_WAIT + 5
    assert gone(attached.client_pid), output


def test_attach_client_quits_its_client_at_its_time_limit(attach):
    started = time.monotonic()
    attached = attach("--time-limit", "8")
    attached.wait_for_the_client()
    assert attached.process.wait(timeout=QUIT_WAIT + 30) == 0, attached.output()
    output = attached.output()
    assert time.monotonic() - started >= 8
    assert "stopping the client (time limit of 8 s)" in output
    assert "the client quit" in output
    assert gone(attached.client_pid), output
