"""The embedded Redis of ``make run``: it outlives the process manager's SIGTERM until its
clients have gone, so an RQ worker's warm shut-down still reaches it."""

import os
import signal
import subprocess
import sys
import time

import redis

from boincweb import embedded_redis


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_sigterm_to_the_group_waits_for_the_last_client_then_stops_the_server(tmp_path):
    socket_path = tmp_path / "redis.sock"
    process = subprocess.Popen(
        [sys.executable, "-m", "boincweb.embedded_redis"],
        env={**os.environ, "EMBEDDED_REDIS_SOCKET": str(socket_path)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: embedded_redis._answers(socket_path))
        worker = redis.Redis(unix_socket_path=str(socket_path))
        worker.set("heartbeat", "1")

        os.killpg(process.pid, signal.SIGTERM)  # what honcho sends on Ctrl-C
        time.sleep(0.5)
        assert worker.get("heartbeat") == b"1"  # still there for the worker's shut-down

        worker.close()
        assert process.wait(timeout=embedded_redis.SHUTDOWN_GRACE + 5) == 0
        assert not embedded_redis._answers(socket_path)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
