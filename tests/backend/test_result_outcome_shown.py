"""The project pages show a result's outcome only once it is over (server_state OVER)."""

import pytest
from django.urls import reverse

from backend.models import Outcome, ServerState

pytestmark = pytest.mark.django_db


@pytest.fixture
def results(project):
    host = project.host()
    wu = project.workunit()
    over = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.NO_REPLY, host=host)
    # an outcome left on a result still in progress means nothing yet
    running = project.result(wu, server_state=ServerState.IN_PROGRESS, outcome=Outcome.CLIENT_ERROR, host=host)
    return over, running


def test_a_result_is_over_only_in_server_state_over(results):
    over, running = results
    assert over.is_over and not running.is_over


def test_the_result_page_shows_the_outcome_of_a_result_that_is_over(client, results):
    over, running = results
    page = client.get(reverse("project:result_detail", args=[over.id])).content.decode()
    assert "<dt>outcome</dt><dd>No reply</dd>" in page
    page = client.get(reverse("project:result_detail", args=[running.id])).content.decode()
    assert "<dt>outcome</dt><dd>–</dd>" in page


def test_the_workunit_and_host_pages_show_outcomes_of_results_that_are_over(client, results):
    over, running = results
    for url in (
        reverse("project:workunit_detail", args=[over.workunit_id]),
        reverse("project:host_detail", args=[over.host_id]),
    ):
        page = client.get(url).content.decode()
        assert "<td>No reply</td>" in page, url
        assert "<td>Client error</td>" not in page, url
