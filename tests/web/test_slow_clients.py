"""The deployed web server (Procfile.deploy's ``web``: gunicorn's asyncio worker in front of
Django's ASGI handler, docs/deploy.md) keeps answering while clients send slowly (issue 34's
finding 4: three such clients held every sync worker for gunicorn's 30 s timeout), and reads a
scheduler request sent in chunks (finding 9).

A slow client sends a POST's headers with ``Content-Length: 100000``, then a byte a second; the
pages must answer meanwhile well within what a sync worker would hold them (30 s).
"""

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

import pytest

from backend.models import Host
from bench.hostile import SlowClient, dechunk
from tests.protocol.conftest import account
from tests.protocol.requests import work_request
from tests.web.serving import BASE, child_env, deployed_command
from tests.web.test_production_server import free_port

pytestmark = pytest.mark.django_db(transaction=True)

SLOW_CLIENTS = 6
# far below the 30 s a sync worker is held, far above a page's time on a loaded machine
PAGE_SECONDS = 5.0


PRODUCTION = {"DEBUG": "0", "SECRET_KEY": "production-test-" + "k" * 40, "ALLOWED_HOSTS": "127.0.0.1"}


@pytest.fixture(scope="module")
def static_root(tmp_path_factory):
    """The static files collected once for the module's servers (DEBUG off serves them)."""
    root = tmp_path_factory.mktemp("static")
    env = {**PRODUCTION, "STATIC_ROOT": str(root), "PATH": "/usr/bin:/bin"}
    collect = subprocess.run(
        [sys.executable, str(BASE / "manage.py"), "collectstatic", "--noinput", "-v0"],
        cwd=BASE,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collect.returncode == 0, collect.stderr
    return root


@pytest.fixture
def deployed(tmp_path, redis_client, static_root):
    """The deployed web command on a free port with DEBUG off, two worker processes."""
    port = free_port()
    env = child_env(
        **PRODUCTION,
        STATIC_ROOT=static_root,
        BOINCWEB_DATA_DIR=tmp_path / "data",
        BIND="127.0.0.1",
        PORT=port,
        WEB_CONCURRENCY=2,
        PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
    )
    log = open(tmp_path / "web.log", "w+")
    server = subprocess.Popen(deployed_command("web"), cwd=BASE, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "web.log").read_text()
            try:
                urllib.request.urlopen(url + "/boinc/", timeout=10).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "the web server did not answer in time"
                time.sleep(0.2)
        yield url, port
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    assert "Traceback" not in (tmp_path / "web.log").read_text()


def test_pages_answer_while_slow_clients_hold_connections(deployed):
    url, port = deployed
    clients = [SlowClient(port, every=1.0) for _ in range(SLOW_CLIENTS)]
    try:
        time.sleep(1.5)  # each has sent its headers and some of its body
        for path in ["/boinc/", "/", "/project/status/"]:
            started = time.monotonic()
            with urllib.request.urlopen(url + path, timeout=PAGE_SECONDS) as response:
                assert response.status == 200, path
            assert time.monotonic() - started < PAGE_SECONDS, path
    finally:
        for client in clients:
            client.close()


def test_a_scheduler_request_sent_in_chunks_is_read_by_the_deployed_server(deployed):
    url, port = deployed
    key = account("volunteer")
    body = work_request(key.authenticator)
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(
            b"POST /boinc/cgi HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for at in range(0, len(body), 1000):
            piece = body[at : at + 1000]
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\n\r\n")
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    head, _, content = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    if b"transfer-encoding: chunked" in head.lower():
        content = dechunk(content)
    root = ElementTree.fromstring(content)
    assert root.findtext("hostid") == str(Host.objects.get(owner=key.user).pk), content[:300]
