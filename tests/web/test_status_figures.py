"""The status page reads its counts from the figures the periodic daemon job stores in Redis,
says how old they are, and counts again when they are older than FIGURES_MAX_AGE."""

import json
import re
import time

import pytest

from backend import server_status
from backend.models import Outcome, ServerState, ValidateState
from backend.server_status import FIGURES_KEY, FIGURES_MAX_AGE, record_history
from tests.factories import demo_project
from tests.pages import by_testid, count, parse
from tests.web.project_data import (  # noqa: F401
    app,
    busy_workunit,
    host,
    make_results,
    make_workunits,
    owner,
    versions,
)

pytestmark = pytest.mark.django_db

UNSENT = (ServerState.UNSENT, Outcome.INIT, ValidateState.INIT)


def shown(html, name):
    """The number the page shows for ``name`` (its figure's first word)."""
    return int(count(parse(html), name).split()[0])


def age(html):
    """The seconds ago the page says its figures were counted."""
    said = by_testid(parse(html), "figures-age").get_text()
    return int(re.search(r"Counted (\d+) s ago", said).group(1))


def test_the_page_shows_the_figures_the_periodic_job_stored_and_their_age(
    client, app, redis_client, django_assert_max_num_queries
):
    make_results(make_workunits(app, 1)[0], [UNSENT])
    record_history(int(time.time()) - 7, demo_project())
    # rows added after the job's pass show at its next pass, not before
    make_results(make_workunits(app, 1, start=1)[0], [UNSENT])
    with django_assert_max_num_queries(2):  # the daemons; no count over results or workunits
        page = client.get("/project/status/", HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert shown(html, "results_ready_to_send") == 1
    assert 7 <= age(html) <= 7 + 5
    assert f"older than {FIGURES_MAX_AGE} s counts again" in html


def test_figures_older_than_the_limit_are_counted_again_and_stored(client, app, redis_client):
    make_results(make_workunits(app, 2)[0], [UNSENT, UNSENT])
    record_history(int(time.time()) - FIGURES_MAX_AGE - 5, demo_project())
    make_results(make_workunits(app, 1, start=5)[0], [UNSENT])
    html = client.get("/project/status/", HTTP_HX_REQUEST="true").content.decode()
    assert shown(html, "results_ready_to_send") == 3
    assert age(html) <= 2
    stored = json.loads(redis_client.get(FIGURES_KEY))
    assert stored["results_ready_to_send"] == 3 and stored["apps"][0]["unsent"] == 3


def test_figures_from_the_future_are_not_trusted(app, redis_client):
    make_results(make_workunits(app, 1)[0], [UNSENT])
    record_history(int(time.time()) + 3600, demo_project())  # a world's simulated clock, say
    make_results(make_workunits(app, 1, start=1)[0], [UNSENT])
    status = server_status.server_status(int(time.time()), project=demo_project(), cached=True)
    assert status.results_ready_to_send == 2


def test_json_and_xml_carry_the_stored_figures_and_their_time(client, busy_workunit, app, redis_client):
    then = int(time.time()) - 3
    record_history(then, demo_project())
    make_results(make_workunits(app, 1, start=50)[0], [UNSENT])
    data = client.get("/project/status.json").json()
    assert data["figures_time"] == then and data["results_ready_to_send"] == 1
    assert data["apps"][0]["unsent"] == 1


def test_without_redis_the_page_counts_on_every_view(client, app, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    make_results(make_workunits(app, 1)[0], [UNSENT])
    first = client.get("/project/status/", HTTP_HX_REQUEST="true").content.decode()
    make_results(make_workunits(app, 1, start=1)[0], [UNSENT])
    second = client.get("/project/status/", HTTP_HX_REQUEST="true").content.decode()
    assert (shown(first, "results_ready_to_send"), shown(second, "results_ready_to_send")) == (1, 2)
    assert "Redis not reachable" in second


def test_the_history_charts_follow_new_samples(client, app, redis_client):
    now = int(time.time())
    record_history(now - 20, demo_project())
    record_history(now - 10, demo_project())
    first = client.get("/project/status/?panel=history", HTTP_HX_REQUEST="true").content.decode()
    make_results(make_workunits(app, 4)[0], [UNSENT] * 4)
    record_history(now, demo_project())
    second = client.get("/project/status/?panel=history", HTTP_HX_REQUEST="true").content.decode()
    assert "the last 2 samples" in first and "the last 3 samples" in second
    chart = parse(second).find("script", id="history-results", type="application/json")
    ready = json.loads(chart.string)
    assert ready["data"][0]["y"] == [0, 0, 4]
