"""Debian's real BOINC client takes the computing preferences its volunteer saved on the host's
preferences page at its next scheduler request (an update), into its global_prefs.xml
(reference/protocol.md §4.3). Skipped, saying so, where the client is not installed; CI
installs it."""

import time
import xml.etree.ElementTree as ElementTree

import pytest
from django.test import Client

from backend.models import Host
from protocol.client import boinccmd
from protocol.scheduler_rpc import scheduler_rpc
from protocol.xml_request import parse_request
from tests.protocol.test_real_client import compute_one_job

pytestmark = [pytest.mark.real_client, pytest.mark.django_db(transaction=True)]


def held_prefs(client):
    """The client's global_prefs.xml as a tree; None while it has none."""
    path = client.dir.path / "global_prefs.xml"
    try:
        return ElementTree.fromstring(path.read_text())
    except (OSError, ElementTree.ParseError):
        return None


def update(client):
    """Ask the running client for a scheduler RPC now (boinccmd's project "update"), retrying
    while its GUI RPC port is not yet open."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = boinccmd(client.gui_rpc_port, "--project", client.dir.master_url, "update")
        if not answer.strip() or "Operation failed" in answer:
            return
        time.sleep(1)


def test_the_client_takes_the_buffer_its_volunteer_saved_at_its_next_update(real_client, monkeypatch):
    rpcs = []

    def spy(body, **kwargs):
        """The real scheduler; notes the mod_time of the preferences each request says the
        client holds, and whether the reply sent preferences."""
        status, reply = scheduler_rpc(body, **kwargs)
        rpcs.append((parse_request(body).global_prefs_mod_time, b"<global_preferences>" in reply))
        return status, reply

    monkeypatch.setattr("protocol.views.scheduler_rpc", spy)
    _, first, key = compute_one_job(real_client, "prefs_wu")
    host = Host.objects.get(owner=key.user)
    assert held_prefs(first) is None  # never edited: the server sent none, the client keeps its own

    browser = Client()
    browser.force_login(key.user)
    saved = browser.post(
        f"/projects/demo/hosts/{host.pk}/prefs/", {"work_buf_min_days": "2.5", "work_buf_additional_days": "1"}
    )
    assert saved.status_code == 302
    host.refresh_from_db()

    second = real_client().start(None, exit_when_idle=False)
    update(second)
    second.wait(until=lambda: held_prefs(second) is not None)
    prefs = held_prefs(second)
    assert prefs is not None, second.diagnostics()
    assert float(prefs.findtext("work_buf_min_days")) == 2.5, second.diagnostics()
    assert float(prefs.findtext("work_buf_additional_days")) == 1.0
    assert int(float(prefs.findtext("mod_time"))) == host.prefs_mod_time
    assert prefs.findtext("source_project") == second.dir.master_url
    # its next request says it holds them, and they are not sent again
    update(second)
    second.wait(until=lambda: any(held == host.prefs_mod_time for held, _ in rpcs))
    assert [sent for held, sent in rpcs if held == host.prefs_mod_time][0] is False, rpcs
    assert [sent for held, sent in rpcs if held == 0][-1] is True, rpcs
