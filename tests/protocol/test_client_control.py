"""Stopping a real client that overran its time (reference/protocol.md §11 step 6), and the
skip-or-fail rule of the real-client tests when the client is missing (.ci/run).

A ``sleep`` in its own session stands in for the client, so these run without boinc-client.
"""

import signal
import subprocess
import time

import pytest

import protocol.client
from tests.protocol import conftest
from tests.protocol.conftest import RealClient


def stand_in(tmp_path):
    """A RealClient whose process is a 30 s sleep in a new session."""
    client = RealClient(tmp_path, "http://127.0.0.1:1/boinc/")
    client.process = subprocess.Popen(["sleep", "30"], start_new_session=True)
    client.started = time.monotonic()
    return client


def recording_boinccmd(calls, on_quit=None):
    def boinccmd(port, *args, timeout=10):
        calls.append((args, time.monotonic()))
        if args == ("--quit",) and on_quit:
            on_quit()
        return "state of the client"

    return boinccmd


def test_a_client_past_its_time_is_asked_to_quit_given_the_wait_then_killed(tmp_path, monkeypatch):
    client = stand_in(tmp_path)
    calls = []
    monkeypatch.setattr(conftest, "boinccmd", recording_boinccmd(calls))
    monkeypatch.setattr(protocol.client, "boinccmd", recording_boinccmd(calls))
    monkeypatch.setattr(protocol.client, "QUIT_WAIT", 0.5)
    with pytest.raises(pytest.fail.Exception, match="did not finish within 0.2 s"):
        client.wait(seconds=0.2)
    killed = time.monotonic()
    assert [args for args, _ in calls] == [("--get_state",), ("--quit",)]
    asked_to_quit = calls[1][1]
    assert killed - asked_to_quit >= 0.5
    assert client.process.returncode == -signal.SIGKILL


def test_a_client_that_quits_when_asked_is_not_waited_for_longer(tmp_path, monkeypatch):
    client = stand_in(tmp_path)
    calls = []
    quits = recording_boinccmd(calls, on_quit=lambda: client.process.send_signal(signal.SIGTERM))
    monkeypatch.setattr(conftest, "boinccmd", quits)
    monkeypatch.setattr(protocol.client, "boinccmd", quits)
    monkeypatch.setattr(protocol.client, "QUIT_WAIT", 20)
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception):
        client.wait(seconds=0.2)
    assert time.monotonic() - started < 10
    assert client.process.returncode == -signal.SIGTERM


@pytest.mark.parametrize("required", [None, "0"])
def test_real_client_tests_skip_with_the_reason_where_it_is_missing(monkeypatch, required):
    monkeypatch.setattr(conftest, "client_binary", lambda: None)
    if required is None:
        monkeypatch.delenv("BOINCWEB_REQUIRE_REAL_CLIENT", raising=False)
    else:
        monkeypatch.setenv("BOINCWEB_REQUIRE_REAL_CLIENT", required)
    with pytest.raises(pytest.skip.Exception, match="boinc-client is not installed"):
        conftest.need_client()


def test_real_client_tests_fail_where_it_is_missing_and_ci_requires_it(monkeypatch):
    monkeypatch.setattr(conftest, "client_binary", lambda: None)
    monkeypatch.setenv("BOINCWEB_REQUIRE_REAL_CLIENT", "1")
    with pytest.raises(pytest.fail.Exception, match="not installed.*BOINCWEB_REQUIRE_REAL_CLIENT is set"):
        conftest.need_client()


def test_real_client_tests_run_where_it_is_installed(monkeypatch):
    monkeypatch.setattr(conftest, "client_binary", lambda: "/usr/bin/boinc")
    monkeypatch.setenv("BOINCWEB_REQUIRE_REAL_CLIENT", "1")
    assert conftest.need_client() == "/usr/bin/boinc"
