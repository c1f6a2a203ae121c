import re

import pytest

from backend.events import event, record
from backend.models import App, Outcome, Result, ServerState, ValidateState
from tests.factories import NOW, AppFactory, ResultFactory, UserFactory, WorkunitFactory, demo_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def project():
    UserFactory(username="boss", password="boss-pass-1", is_staff=True)
    other = AppFactory(name="seti")
    for i in range(5):
        WorkunitFactory(app=other, name=f"seti_{i}", transition_time=NOW)
    # a quorum of one out of two replicas: one sent, one waiting
    wu = WorkunitFactory(
        app=AppFactory(name="einstein"), name="einstein_wu_1", transition_time=NOW + 99, target_nresults=2
    )
    sent = ResultFactory(workunit=wu, name="einstein_wu_1_0", server_state=ServerState.IN_PROGRESS)
    ResultFactory(workunit=wu, name="einstein_wu_1_1", server_state=ServerState.UNSENT)
    record(
        [
            event(
                time=NOW,
                actor="scheduler",
                workunit_id=wu.id,
                result_id=sent.id,
                field="server_state",
                old=ServerState.UNSENT,
                new=ServerState.IN_PROGRESS,
                reason="sent",
            )
        ],
        demo_project().pk,
    )
    return wu


def test_admin_browses_to_a_workunit_and_cancels_it(page, live_server, log_in, project):
    log_in("boss", "boss-pass-1")

    page.goto(f"{live_server.url}/project/status/")
    assert page.locator("h1").inner_text() == "Server status"
    assert page.locator('[data-daemon="transitioner"]').is_visible()
    assert page.locator('[data-count="results_ready_to_send"]').inner_text() == "1"

    page.click("nav >> text=Workunits")
    page.select_option("select[name=app]", label="einstein")
    page.wait_for_url(re.compile(r"app=\d+"), wait_until="commit")
    table = page.locator("#wu-table")
    table.locator("text=einstein_wu_1").wait_for()
    assert "seti_0" not in table.inner_text()

    page.click("text=einstein_wu_1")
    machine = page.locator('svg[data-machine="workunit"]').first
    assert machine.get_attribute("data-current") == "ACTIVE"
    assert page.locator('svg[data-machine="result"][data-current="UNSENT"]').count() == 1
    assert page.locator('[data-edge="UNSENT-IN_PROGRESS"].taken').count() == 1
    page.locator('div[data-figure="timeline-figure"] .main-svg').first.wait_for()

    page.click("text=Cancel…")
    assert "einstein_wu_1" in page.locator('[data-testid="action-targets"]').inner_text()
    page.click("text=Yes, cancel")

    page.wait_for_url(re.compile(rf"/project/workunits/{project.id}/$"), wait_until="domcontentloaded")
    assert page.locator('svg[data-machine="workunit"]').get_attribute("data-current") == "ERROR"
    assert page.locator('[data-testid="wu-errors"]').inner_text() == "CANCELLED"
    assert page.locator('svg[data-machine="result"][data-current="DIDNT_NEED"]').count() == 1
    assert page.locator('[data-edge="UNSENT-DIDNT_NEED"].taken').count() == 1
    assert "cancelled by boss" in page.locator('[data-testid="events"]').inner_text()
    assert Result.objects.get(name="einstein_wu_1_1").outcome == Outcome.DIDNT_NEED
    assert Result.objects.get(name="einstein_wu_1_0").validate_state == ValidateState.INIT


def test_workunit_list_refreshes_in_place_and_holds_still_while_a_box_is_ticked(page, live_server, log_in, project):
    log_in("boss", "boss-pass-1")
    url = f"{live_server.url}/project/workunits/?app={project.app_id}&sort=transition_time"
    page.goto(url)
    table = page.locator("#wu-table")
    table.locator("text=einstein_wu_1").wait_for()

    WorkunitFactory(app=project.app, name="einstein_wu_2", transition_time=NOW + 5)
    table.locator("text=einstein_wu_2").wait_for(timeout=10_000)
    assert page.url == url

    box = page.get_by_label("select einstein_wu_1")
    box.check()
    WorkunitFactory(app=project.app, name="einstein_wu_3", transition_time=NOW + 7)
    page.wait_for_timeout(5_000)
    assert "einstein_wu_3" not in table.inner_text() and box.is_checked()
    box.uncheck()
    table.locator("text=einstein_wu_3").wait_for(timeout=10_000)
    assert page.url == url


def test_a_bad_filter_shows_its_error_in_place(page, live_server, project):
    """A filter the server refuses (here an app deleted after the page was drawn) comes back as
    a 400 with the form's errors, and the page shows them instead of silently keeping the old
    rows."""
    retired = AppFactory(name="retired")
    page.goto(f"{live_server.url}/project/workunits/")
    table = page.locator("#wu-table")
    table.locator("text=einstein_wu_1").wait_for()
    App.objects.filter(pk=retired.pk).delete()

    with page.expect_response(lambda r: "app=" in r.url) as answer:
        page.select_option("select[name=app]", label="retired")
    assert answer.value.status == 400
    errors = page.locator('[data-testid="filter-errors"]')
    errors.wait_for()
    assert f"no app {retired.pk} in this project" in errors.inner_text()
    assert "einstein_wu_1" not in table.inner_text()

    page.select_option("select[name=app]", label="einstein")
    table.locator("text=einstein_wu_1").wait_for()
    assert errors.count() == 0
