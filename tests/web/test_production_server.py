"""The production way to serve the dashboard (docs/deploy.md, Procfile.deploy's ``web``):
gunicorn's asyncio worker with DEBUG off, the static files collected and served by whitenoise,
the database and Redis by URL."""

import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.factories import WorkunitFactory
from tests.pages import parse
from tests.web.serving import BASE, MANAGE, child_env, deployed_command

pytestmark = pytest.mark.django_db(transaction=True)

GUNICORN = Path(sys.executable).parent / "gunicorn"
START_SECONDS = 60
DEBUG_MARKS = ["Traceback", "DEBUG = True", "technical_404", "Django tried these URL patterns"]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url, headers=None):
    """(status, headers, body) of a GET, whatever the status."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.fixture
def production(tmp_path, redis_client):
    """A gunicorn serving the test database with DEBUG off; yields its base URL."""
    env = child_env(
        DEBUG="0",
        SECRET_KEY="production-test-" + "k" * 40,
        ALLOWED_HOSTS="127.0.0.1",
        STATIC_ROOT=tmp_path / "static",
        BOINCWEB_DATA_DIR=tmp_path / "data",
    )
    collect = subprocess.run(
        [*MANAGE, "collectstatic", "--noinput"], cwd=BASE, env=env, capture_output=True, text=True, timeout=300
    )
    assert collect.returncode == 0, collect.stderr
    port = free_port()
    log = open(tmp_path / "gunicorn.log", "w+")
    env.update(BIND="127.0.0.1", PORT=str(port), WEB_CONCURRENCY="2", PATH=f"{GUNICORN.parent}:/usr/bin:/bin")
    server = subprocess.Popen(deployed_command("web"), cwd=BASE, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert server.poll() is None, (tmp_path / "gunicorn.log").read_text()
            try:
                fetch(url + "/")
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not answer in time"
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    server_log = (tmp_path / "gunicorn.log").read_text()
    assert "Traceback" not in server_log, server_log
    assert "Invalid HTTP_HOST header: 'evil.example'" in server_log


def test_gunicorn_serves_pages_static_files_and_a_plain_404_with_debug_off(production):
    wu = WorkunitFactory(app__name="uppercase", name="served_by_gunicorn", transition_time=2**31 - 1)

    for path in [
        "/",
        "/project/status/",
        "/project/workunits/",
        f"/project/workunits/{wu.pk}/",
        "/lab/",
        "/project/worlds/",
        "/accounts/login/",
    ]:
        status, headers, body = fetch(production + path)
        assert status == 200, (path, body[:2000])
        assert headers["Content-Type"].startswith("text/html")
        assert parse(body).title.get_text(), path
    status, _, body = fetch(f"{production}/project/workunits/{wu.pk}/")
    assert b"served_by_gunicorn" in body

    # Static files under their hashed names, compressed, cached for good.
    home = parse(fetch(production + "/project/status/")[2])
    stylesheet = home.find("link", href=re.compile(r"^/static/css/boincweb\.[0-9a-f]{12}\.css$"))
    plotly = home.find("script", src=re.compile(r"^/static/vendor/plotly/plotly\.min\.[0-9a-f]{12}\.js$"))
    for static_path in [stylesheet["href"], plotly["src"]]:
        status, headers, body = fetch(production + static_path, {"Accept-Encoding": "gzip"})
        assert status == 200 and body, static_path
        assert headers["Content-Encoding"] == "gzip"
        assert "max-age=315360000" in headers["Cache-Control"]
    assert fetch(production + "/static/css/no-such.css")[0] == 404

    # A missing page and a missing row: our 404 page, no debug page, no traceback.
    for path in ["/no-such-page/", "/project/workunits/999999999/", "/lab/runs/999999999/"]:
        status, _, body = fetch(production + path)
        text = body.decode()
        assert status == 404, path
        assert "<h1>Not found</h1>" in text and "<title>Not found · boincweb</title>" in text
        assert not [mark for mark in DEBUG_MARKS if mark in text], (path, text)

    # A host outside ALLOWED_HOSTS is refused without a debug page.
    status, _, body = fetch(production + "/", {"Host": "evil.example"})
    assert status == 400 and not [mark for mark in DEBUG_MARKS if mark in body.decode()]
