"""The scheduling lab in headless Chromium: build, run, watch, step, compare."""

import os
import re

import django_rq
import pytest
from django.contrib.auth.models import User

from scheduling.models import Run, StoredScenario

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("LAB_SCREENSHOTS")


def shot(page, name):
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def work_off_runs():
    django_rq.get_worker("engine").work(burst=True)


def lanes_with_bars(page, testid="gantt"):
    """The y lanes of the Gantt that hold at least one drawn bar, read from the plotted data."""
    return page.evaluate("""(testid) => {
        const div = document.querySelector(`[data-testid=${testid}]`);
        const lanes = new Set();
        div.data.filter(t => t.mode === "lines" && t.line.width >= 4).forEach(t =>
            t.y.forEach((y, i) => { if (y !== null && t.x[i] !== null) lanes.add(y); }));
        return [...lanes].sort();
    }""", testid)


@pytest.fixture
def teacher(db, log_in, redis_client):
    User.objects.create_user("teacher", password="lab-pass-1")
    log_in("teacher", "lab-pass-1")


def test_a_person_builds_a_scenario_in_the_forms_runs_it_and_sees_bars_on_every_instance(
        page, live_server, teacher):
    page.goto(f"{live_server.url}/lab/new/")
    page.fill("input[name=meta-name]", "two CPUs, two projects")
    page.fill("input[name=host-ncpus]", "2")
    page.fill("input[name=projects-0-name]", "Alpha")
    page.fill("input[name=projects-1-name]", "Beta")
    page.fill("input[name=apps-0-size_gflop]", "1800")
    page.fill("input[name=apps-1-size_gflop]", "2700")
    page.fill("input[name=apps-1-latency_bound_hours]", "10")
    shot(page, "01-new-scenario-form")
    page.click("[data-testid=save-scenario]")
    page.wait_for_url(re.compile(r"/lab/\d+/$"))
    stored = StoredScenario.objects.get(name="two CPUs, two projects")
    assert stored.data["host"]["ncpus"] == 2
    page.fill("[data-testid=run-form] input[name=duration]", "12h")
    page.click("[data-testid=start-run]")
    page.wait_for_url(re.compile(r"/lab/runs/\d+/$"))
    assert page.locator("[data-testid=run-progress]").is_visible()
    work_off_runs()
    page.wait_for_selector("[data-testid=gantt] .main-svg", timeout=15_000)
    assert lanes_with_bars(page) == [0, 1]
    assert [t for t in page.locator("[data-testid=gantt] .ytick text").all_text_contents() if t] == ["CPU 0", "CPU 1"]
    shot(page, "02-run")

    log = page.locator("[data-testid=decision-log]")
    before = log.inner_text()
    page.click("[data-testid=step]")
    page.click("[data-testid=step]")
    assert page.locator("[data-testid=cursor-time]").inner_text() != "0.00 h" or log.inner_text() != before
    page.locator("[data-cursor=range]").evaluate(
        "(el) => { el.value = 6; el.dispatchEvent(new Event('input')); }")
    assert page.locator("[data-testid=cursor-time]").inner_text() == "6.00 h"
    assert log.inner_text() != before
    assert page.evaluate("document.querySelector('[data-testid=gantt]').layout.shapes[0].x0") == 6
    shot(page, "03-run-cursor")


def test_a_failed_run_shows_its_error_instead_of_a_spinner(page, live_server, teacher):
    stored = StoredScenario.objects.create(name="broken", data={"host": {"ncpus": 0}, "projects": []})
    run = Run.objects.create(scenario=stored, policy="boinc7", duration=3600)
    from scheduling.jobs import run_simulation
    django_rq.get_queue("engine").enqueue(run_simulation, run.pk)
    page.goto(f"{live_server.url}/lab/runs/{run.pk}/")
    work_off_runs()
    error = page.wait_for_selector("[data-testid=run-error]", timeout=15_000)
    assert "scenario is not valid" in error.inner_text()


def test_the_seed_001_preset_compares_boinc7_and_wrr_with_both_figure_cards(page, live_server, teacher):
    page.goto(f"{live_server.url}/")
    page.click("text=Scheduling lab >> nth=0")
    page.click("[data-testid=load-seed-001-scenario-1]")
    page.wait_for_url(re.compile(r"/lab/\d+/$"))
    page.uncheck("input[name=policies][value=boinc5]")
    page.check("input[name=policies][value=wrr]")
    page.fill("[data-testid=compare-form] input[name=duration]", "1d")
    shot(page, "04-scenario")
    page.click("[data-testid=compare-policies]")
    page.wait_for_url(re.compile(r"/lab/compare/\?runs=\d+,\d+$"))
    work_off_runs()
    page.wait_for_selector("[data-testid=compare-table]", timeout=15_000)
    cards = page.locator("[data-testid=figures-card]")
    assert cards.count() == 2
    headings = page.locator("[data-testid=compare-run] h2").all_inner_texts()
    assert [h.split()[1] for h in headings] == ["boinc7", "wrr"]
    page.wait_for_selector("[data-testid=gantt] >> nth=1")
    assert page.locator("[data-testid=gantt] .main-svg").count() >= 2
    page.click("[data-testid=step]")
    assert all(text.strip() for text in page.locator("[data-testid=decision-log]").all_inner_texts())
    shot(page, "05-compare")


def test_a_person_adds_two_projects_with_the_add_buttons_and_saves_both(page, live_server, teacher):
    page.goto(f"{live_server.url}/lab/new/")
    page.fill("input[name=meta-name]", "four projects")
    projects = page.locator("[data-testid=projects] tbody tr")
    first = projects.count()
    page.click("text=Add a project")
    page.click("text=Add a project")
    assert projects.count() == first + 2
    assert page.locator("input[name=projects-TOTAL_FORMS]").input_value() == str(first + 2)
    page.fill(f"input[name=projects-{first}-name]", "Gamma")
    page.fill(f"input[name=projects-{first + 1}-name]", "Delta")
    page.fill(f"input[name=projects-{first + 1}-resource_share]", "50")
    apps = page.locator("[data-testid=apps] tbody tr").count()
    page.click("text=Add an app")
    page.click("text=Add an app")
    for i, project in enumerate(["Gamma", "Delta"]):
        page.fill(f"input[name=apps-{apps + i}-project]", project)
        page.fill(f"input[name=apps-{apps + i}-name]", f"{project.lower()}_app")
    add_gpu = page.locator("text=Add a GPU type")
    add_gpu.click()
    add_gpu.click()  # the third row: the formset's max_num
    assert add_gpu.is_disabled() and page.locator("[data-testid=gpus] tbody tr").count() == 3
    shot(page, "06-added-projects")
    page.click("[data-testid=save-scenario]")
    page.wait_for_url(re.compile(r"/lab/\d+/$"))

    saved = StoredScenario.objects.get(name="four projects").engine_scenario()
    assert [(p.name, p.resource_share) for p in saved.projects] == [
        ("Alpha", 100), ("Beta", 100), ("Gamma", 100), ("Delta", 50)]
    assert [a.name for a in saved.projects[3].apps] == ["delta_app"]
    table = page.locator("[data-testid=project-table]").inner_text()
    assert "Gamma" in table and "Delta" in table and "delta_app" in table
