from datetime import timedelta
from xml.etree import ElementTree

import pytest
from django.utils import timezone

from backend.models import DaemonStatus, Outcome, ServerState, ValidateState
from backend.server_status import server_status, status_xml
from tests.web.project_data import (  # noqa: F401
    NOW, app, busy_workunit, host, make_results, make_workunits, owner, versions,
)

pytestmark = pytest.mark.django_db


def test_status_counts_results_and_workunits_by_state(busy_workunit, app):
    make_workunits(app, 2, start=10, transition_time=NOW - 7200)
    status = server_status(NOW)
    assert status.results_ready_to_send == 1
    assert status.results_in_progress == 1
    assert status.workunits_waiting_for_validation == 1
    assert status.transitioner_backlog_workunits == 2
    assert status.transitioner_backlog_hours == 2.0
    [row] = status.apps
    assert (row.unsent, row.in_progress_cpu, row.in_progress_gpu) == (1, 0, 1)


def test_status_splits_in_progress_results_into_cpu_and_gpu(app, host, versions):
    wu = make_workunits(app, 1)[0]
    in_progress = (ServerState.IN_PROGRESS, Outcome.INIT, ValidateState.INIT)
    make_results(wu, [in_progress, in_progress], host=host, app_version=versions[0])
    [row] = server_status(NOW).apps
    assert (row.in_progress_cpu, row.in_progress_gpu, row.in_progress) == (2, 0, 2)


def test_daemons_show_running_not_running_and_disabled():
    recent = timezone.now() - timedelta(seconds=10)
    DaemonStatus.objects.create(name="transitioner", last_pass_time=recent, passes=3)
    DaemonStatus.objects.create(name="validator", last_pass_time=recent - timedelta(hours=1))
    DaemonStatus.objects.create(name="assimilator", enabled=False, last_pass_time=recent)
    states = {d.name: d.status for d in server_status(NOW).daemons}
    assert states["transitioner"] == "running"
    assert states["validator"] == "not running"
    assert states["assimilator"] == "disabled"


def test_a_registered_daemon_that_never_ran_is_not_running():
    states = {d.name: (d.status, d.last_pass_time) for d in server_status(NOW).daemons}
    assert states["transitioner"] == ("not running", "")


def test_status_page_shows_the_daemons_counts_and_queues(client, busy_workunit, redis_client,
                                                         django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        page = client.get("/project/status/")
    html = page.content.decode()
    assert page.status_code == 200
    assert '<html' in html and 'data-daemon="transitioner"' in html
    assert 'data-count="results_ready_to_send">1<' in html
    assert "/django-rq/queues/0/" in html
    assert 'data-figure="apps-figure"' in html and "plotly.min.js" in html


def test_status_fragment_is_the_polling_panel(client, busy_workunit, redis_client):
    page = client.get("/project/status/", HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.lstrip().startswith('<div id="status-panel"')
    assert 'hx-trigger="every 2s"' in html and "<html" not in html


def test_status_queries_do_not_grow_with_rows(client, app, redis_client,
                                              django_assert_max_num_queries):
    for start in range(0, 40, 10):
        for wu in make_workunits(app, 10, start=start):
            make_results(wu, [(ServerState.UNSENT, Outcome.INIT, ValidateState.INIT)])
    with django_assert_max_num_queries(12):
        assert client.get("/project/status/", HTTP_HX_REQUEST="true").status_code == 200


def test_status_json_has_the_boinc_figures(client, busy_workunit, redis_client):
    data = client.get("/project/status.json").json()
    assert data["results_ready_to_send"] == 1
    assert data["results_in_progress"] == 1
    assert data["apps"][0]["in_progress_gpu"] == 1
    assert data["rq"]["ok"] is True
    assert {q["name"] for q in data["rq"]["queues"]} >= {"default"}


def test_status_xml_is_boinc_shaped(client, busy_workunit, redis_client):
    page = client.get("/project/status.xml")
    assert page["Content-Type"].startswith("application/xml")
    root = ElementTree.fromstring(page.content)
    assert root.tag == "server_status"
    assert root.findtext("database_file_states/results_ready_to_send") == "1"
    assert root.findtext("daemon_status/daemon/command") == "transitioner"
    assert root.findtext("tasks_by_app/app/name") == "einstein"


def test_status_xml_of_an_empty_project_has_no_apps():
    root = ElementTree.fromstring(status_xml(server_status(NOW)))
    assert root.find("tasks_by_app") is not None and not list(root.find("tasks_by_app"))


def test_status_reports_an_unreachable_redis(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    page = client.get("/project/status/")
    assert page.status_code == 200
    assert "Redis not reachable" in page.content.decode()


def test_status_refuses_post(client):
    assert client.post("/project/status/").status_code == 405
