"""``make run`` as a new user runs it: the real processes (embedded Redis, web server, RQ worker,
cron and the live demo) on a fresh data directory and a free port, watched in Chromium.

Within a minute of start-up the status page must show results in progress and reported work,
and its counters must change between two of its own polls.
"""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 60
COUNTS = (
    "results_ready_to_send",
    "results_in_progress",
    "workunits_waiting_for_validation",
    "workunits_waiting_for_assimilation",
    "workunits_waiting_for_deletion",
    "results_waiting_for_deletion",
)
# Daemons that find work only once results have been reported: the validator's and the
# assimilator's "work done" in their last pass.
DAEMONS_AFTER_REPORTS = ("validator", "assimilator")
# Only a reported result makes one of these above 0.
REPORTED = (
    "workunits_waiting_for_validation",
    "workunits_waiting_for_assimilation",
    "workunits_waiting_for_deletion",
    "results_waiting_for_deletion",
    "validator_work_done",
    "assimilator_work_done",
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url, proc, log, timeout):
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"make run exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"{url} did not answer within {timeout} s:\n{log.read_text()[-3000:]}")


def stop(proc):
    """Ctrl-C to the whole process group, as a terminal would; then kill what is left."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def start_make_run(data_dir, **extra_env):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("REDIS_URL", "DATABASE_URL", "BOINCWEB_DEMO", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        DATABASE_URL=f"sqlite:///{data_dir}/boincweb.sqlite3",
        BOINCWEB_DATA_DIR=str(data_dir),
        EMBEDDED_REDIS_SOCKET=str(data_dir / "redis.sock"),
        BOINCWEB_PORT=str(port),
        **extra_env,
    )
    log = data_dir / "make-run.log"
    # -o: the test's own environment is installed already; make must not reinstall it.
    proc = subprocess.Popen(
        ["make", "-o", ".venv/.installed", "run"],
        cwd=BASE_DIR,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, f"http://127.0.0.1:{port}", log


@pytest.fixture
def make_run(tmp_path):
    started = time.monotonic()
    proc, url, log = start_make_run(tmp_path)
    try:
        wait_for_http(f"{url}/", proc, log, timeout=DEADLINE_SECONDS)
        yield url, started, log
    finally:
        stop(proc)


def read_counts(page):
    counts = {name: int(page.locator(f"[data-count={name}]").inner_text().split()[0]) for name in COUNTS}
    for daemon in DAEMONS_AFTER_REPORTS:
        cells = page.locator(f"[data-daemon={daemon}] td")
        counts[f"{daemon}_work_done"] = int(cells.nth(3).inner_text())
        counts[f"{daemon}_passes"] = int(cells.nth(4).inner_text())
    return counts


def test_make_run_shows_the_demo_working_within_a_minute(page, make_run):
    url, started, log = make_run
    page.goto(f"{url}/project/status/")
    polls = []
    seen_in_progress = seen_reported = None
    changed_at = None
    while time.monotonic() - started < DEADLINE_SECONDS:
        # the panel replaces itself every 2 s (htmx); wait for the next swap, then read it
        page.wait_for_event("response", lambda r: "/project/status/" in r.url, timeout=10_000)
        page.wait_for_timeout(300)
        counts = read_counts(page)
        elapsed = time.monotonic() - started
        if polls and counts != polls[-1] and changed_at is None:
            changed_at = elapsed
        polls.append(counts)
        if counts["results_in_progress"] > 0 and seen_in_progress is None:
            seen_in_progress = elapsed
        if any(counts[name] > 0 for name in REPORTED) and seen_reported is None:
            seen_reported = elapsed
        if seen_in_progress and seen_reported and changed_at:
            break
    print(
        f"\nmake run -> results in progress after {seen_in_progress} s, reported work after "
        f"{seen_reported} s, counters changed between two polls after {changed_at} s "
        f"({len(polls)} polls)"
    )
    assert seen_in_progress is not None, f"no result in progress within a minute: {polls}"
    assert seen_reported is not None, f"no reported work within a minute: {polls}"
    assert changed_at is not None, f"the counters stood still: {polls}"
    assert "Traceback" not in log.read_text()


def test_boincweb_demo_0_starts_no_volunteers(page, tmp_path):
    proc, url, log = start_make_run(tmp_path, BOINCWEB_DEMO="0")
    try:
        wait_for_http(f"{url}/", proc, log, timeout=DEADLINE_SECONDS)
        deadline = time.monotonic() + DEADLINE_SECONDS
        while "the live demo is off (BOINCWEB_DEMO=0)" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(5)  # a demo would have sent work by now
        page.goto(f"{url}/project/worlds/")
        assert "No worlds yet." in page.inner_text("[data-testid=worlds]")
        page.goto(f"{url}/project/status/")
        assert read_counts(page)["results_in_progress"] == 0
        assert proc.poll() is None, "make run stopped when the demo was off"
    finally:
        stop(proc)
