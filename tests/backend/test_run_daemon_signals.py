"""``run_daemon --loop`` as a process manager runs it: a real child process that SIGTERM (or
SIGINT) stops once the pass under way is done, with status 0."""

import select
import signal
import sqlite3
import subprocess
import time

import pytest
from django.db import connection

from backend.models import DaemonStatus, Outcome, ServerState
from tests.factories import HostFactory, ResultFactory, WorkunitFactory
from tests.web.serving import BASE, MANAGE, child_env

pytestmark = pytest.mark.django_db(transaction=True)

START_SECONDS = 60  # Django's start-up in a child, on a busy machine
STOP_SECONDS = 10  # far less than the loop's --sleep: a stop must not wait for it


def timed_out_result():
    """A result past its report deadline on the wall clock: the transitioner's work for a pass."""
    return ResultFactory(
        workunit=WorkunitFactory(transition_time=1),
        host=HostFactory(),
        server_state=ServerState.IN_PROGRESS,
        report_deadline=1,
        sent_time=0,
    )


def start_loop(tmp_path):
    child = subprocess.Popen(
        [*MANAGE, "run_daemon", "transitioner", "--loop", "--sleep", "600"],
        cwd=BASE,
        env=child_env(PYTHONUNBUFFERED="1", BOINCWEB_DATA_DIR=tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready, _, _ = select.select([child.stdout], [], [], START_SECONDS)
    if not ready:
        child.kill()
        pytest.fail(f"run_daemon did not start: {child.communicate()}")
    assert child.stdout.readline().strip() == "transitioner: running until SIGINT or SIGTERM"
    return child


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.1)


def stopped(child, sig=None):
    """Send ``sig`` (if given) and return (status, stdout, stderr, seconds until it exited)."""
    sent = time.monotonic()
    if sig is not None:
        child.send_signal(sig)
    try:
        out, err = child.communicate(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail(f"run_daemon did not stop within {STOP_SECONDS} s: {child.communicate()}")
    return child.returncode, out, err, time.monotonic() - sent


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_sleep_after_an_idle_pass_stops_the_loop_at_once(tmp_path, sig):
    child = start_loop(tmp_path)
    # the first pass finds nothing to do and records itself; the loop then sleeps 600 s
    wait_for(lambda: DaemonStatus.objects.filter(name="transitioner", passes__gte=1).exists(), START_SECONDS)
    status, out, err, seconds = stopped(child, sig)
    assert (status, out.strip(), err) == (0, "transitioner: stopped", "")
    assert seconds < STOP_SECONDS
    assert DaemonStatus.objects.get(name="transitioner").passes == 1


@pytest.mark.skipif(connection.vendor != "sqlite", reason="holds SQLite's write lock")
def test_sigterm_lets_the_pass_under_way_finish_and_commit(tmp_path):
    result = timed_out_result()
    # Hold the database's write lock, so the child's first pass waits inside its transaction
    # (SQLite's busy timeout is 30 s) while the signal arrives.
    lock = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        child = start_loop(tmp_path)
        time.sleep(1)
        child.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert child.poll() is None  # still in its pass, waiting for the lock
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    status, out, err, _ = stopped(child)
    assert (status, out.strip(), err) == (0, "transitioner: stopped", "")
    result.refresh_from_db()
    assert (result.server_state, result.outcome) == (ServerState.OVER, Outcome.NO_REPLY)
    status_row = DaemonStatus.objects.get(name="transitioner")
    assert (status_row.passes, status_row.last_work_done) == (1, 1)
