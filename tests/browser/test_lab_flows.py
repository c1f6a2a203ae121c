"""The scheduling lab in headless Chromium: build, run, watch, step, compare."""

import os
import re

import django_rq
import pytest
from django.contrib.auth.models import User

from boincweb.human import sim_time
from scheduling.jobs import run_simulation
from scheduling.models import StoredScenario
from tests.factories import RunFactory, StoredScenarioFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("LAB_SCREENSHOTS")


def shot(page, name):
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def work_off_runs():
    django_rq.get_worker("engine").work(burst=True)


def lanes_with_bars(page, testid="gantt"):
    """The y lanes of the Gantt that hold at least one drawn bar, read from the plotted data."""
    return page.evaluate(
        """(testid) => {
        const div = document.querySelector(`[data-testid=${testid}]`);
        const lanes = new Set();
        div.data.filter(t => t.mode === "lines" && t.line.width >= 4).forEach(t =>
            t.y.forEach((y, i) => { if (y !== null && t.x[i] !== null) lanes.add(y); }));
        return [...lanes].sort();
    }""",
        testid,
    )


def run_decisions(page, index=0):
    """The decision log of the page's ``index``-th run: [[hours, kind, project, job, text], ...], as
    a run page embeds it or a comparison loads it (static/js/charts.js, boincwebFigures)."""
    page.wait_for_function(
        "(i) => { const log = document.querySelectorAll('[data-testid=decision-log]')[i];"
        " return log && window.boincwebFigures.source(`run-${log.dataset.runId}-log`); }",
        arg=index,
    )
    return page.evaluate(
        "(i) => { const id = document.querySelectorAll('[data-testid=decision-log]')[i].dataset.runId;"
        " const source = window.boincwebFigures.source(`run-${id}-log`);"
        " return (source.figure || JSON.parse(source.textContent)).decisions; }",
        index,
    )


def clock(hours):
    """The run's clock the page shows for a time in hours: "day 1, 06:00"."""
    return sim_time(round(hours * 3600))


def assert_log_at(page, log, decisions, t):
    """The log shows the last decision at or before `t`, marked as now, and nothing after it."""
    shown = [d for d in decisions if d[0] <= t + 1e-9]
    assert shown, f"no decision before {t} h"
    last = shown[-1]
    items = log.locator("li")
    assert log.locator("li.empty").count() == 0
    assert items.last.inner_text().startswith(clock(last[0]))
    assert items.last.inner_text().endswith(last[4])
    assert "now" in items.last.get_attribute("class")
    assert set(log.locator("li time").all_inner_texts()) <= {clock(d[0]) for d in shown}


@pytest.fixture
def teacher(db, log_in, redis_client):
    User.objects.create_user("teacher", password="lab-pass-1")
    log_in("teacher", "lab-pass-1")


def test_a_person_builds_a_scenario_in_the_forms_runs_it_and_sees_bars_on_every_instance(page, live_server, teacher):
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
    # beside REC, what the scheduler compared: each project's scheduling priority over time
    page.wait_for_selector("[data-testid=priority] .main-svg", timeout=15_000)
    names = page.evaluate("document.querySelector('[data-testid=priority]').data.map((t) => t.name)")
    assert names == ["Alpha", "Beta"]
    # the RPCs sit in a row of their own above the buffer, one line per project asked
    rows = page.evaluate(
        "document.querySelector('[data-testid=buffer]').data.filter((t) => t.yaxis === 'y2').map((t) => t.y[0])"
    )
    assert rows and set(rows) <= {"Alpha", "Beta"}

    log = page.locator("[data-testid=decision-log]")
    decisions = run_decisions(page)
    times = sorted({d[0] for d in decisions if d[0] > 0})
    before = log.inner_text()
    page.click("[data-testid=step]")
    page.click("[data-testid=step]")
    # two steps forward: the cursor sits on the second decision time after 0, and the log ends
    # with the last decision made at that time, marked as now
    assert page.locator("[data-testid=cursor-time]").inner_text() == clock(times[1])
    assert_log_at(page, log, decisions, times[1])
    assert log.inner_text() != before
    page.locator("[data-cursor=range]").evaluate("(el) => { el.value = 6; el.dispatchEvent(new Event('input')); }")
    assert page.locator("[data-testid=cursor-time]").inner_text() == "day 1, 06:00"
    assert_log_at(page, log, decisions, 6.0)
    assert page.evaluate("document.querySelector('[data-testid=gantt]').layout.shapes[0].x0") == 6
    shot(page, "03-run-cursor")


def test_a_failed_run_shows_its_error_instead_of_a_spinner(page, live_server, teacher):
    stored = StoredScenarioFactory(data={"host": {"ncpus": 0}, "projects": []})
    run = RunFactory(scenario=stored)
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
    page.locator("[data-cursor=range]").evaluate("(el) => { el.value = 6; el.dispatchEvent(new Event('input')); }")
    logs = page.locator("[data-testid=decision-log]")
    assert logs.count() == 2
    for i in range(2):
        assert_log_at(page, logs.nth(i), run_decisions(page, i), 6.0)
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
        ("Alpha", 100),
        ("Beta", 100),
        ("Gamma", 100),
        ("Delta", 50),
    ]
    assert [a.name for a in saved.projects[3].apps] == ["delta_app"]
    table = page.locator("[data-testid=project-table]").inner_text()
    assert "Gamma" in table and "Delta" in table and "delta_app" in table


def cursor_hours(page):
    return float(page.locator("[data-cursor=range]").input_value())


def test_play_moves_the_cursor_at_the_chosen_speed_and_pause_holds_it(page, live_server, teacher):
    stored = StoredScenarioFactory(owner=User.objects.get(username="teacher"))
    run = RunFactory(scenario=stored, duration=12 * 3600.0)
    assert run_simulation(run.pk) == "done"
    page.goto(f"{live_server.url}/lab/runs/{run.pk}/")
    page.wait_for_selector("[data-testid=gantt] .main-svg")
    play = page.locator("[data-testid=play]")

    # a day per second: 2.4 h each tenth of a second, so the 12 h run plays through at once
    # and play stops by itself at the end
    page.select_option("[data-cursor=speed]", "24")
    play.click()
    page.wait_for_function(
        "document.querySelector('[data-testid=cursor-time]').textContent === 'day 1, 12:00'", timeout=5_000
    )
    page.wait_for_function("document.querySelector('[data-testid=play]').textContent === '▶ play'")

    # half an hour per second: after 0.6 s of play the cursor has moved a few hundredths of hours
    page.locator("[data-cursor=range]").evaluate("(el) => { el.value = 0; el.dispatchEvent(new Event('input')); }")
    page.select_option("[data-cursor=speed]", "0.5")
    play.click()
    assert play.inner_text() == "❚❚ pause"
    page.wait_for_timeout(600)
    play.click()
    assert play.inner_text() == "▶ play"
    paused = cursor_hours(page)
    assert 0 < paused < 1.0, "half an hour per second cannot pass an hour in under a second"
    assert abs(paused / 0.05 - round(paused / 0.05)) < 0.2, "it moves 0.05 h a tick"
    page.wait_for_timeout(500)
    assert cursor_hours(page) == paused, "paused, it stays"
    gantt_x = page.evaluate("document.querySelector('[data-testid=gantt]').layout.shapes[0].x0")
    assert abs(gantt_x - paused) < 0.006


def test_a_newcomer_goes_from_the_home_page_to_why_boinc5_and_boinc7_differ(page, live_server, settings, redis_client):
    settings.DEBUG = True  # the demo login is named only then
    User.objects.create_superuser("admin", "admin@example.org", "boincweb")
    page.goto(f"{live_server.url}/")
    page.click("text=Scheduling lab >> nth=0")
    hint = page.locator("[data-testid=demo-login]")
    assert "Log in as admin with the password boincweb" in hint.inner_text()
    page.click("[data-testid=log-in] >> nth=0")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/lab/$"))
    codes = page.locator("[data-testid=demo-login] code").all_inner_texts()
    page.fill("input[name=username]", codes[0])
    page.fill("input[name=password]", codes[1])
    page.click("form [type=submit]")
    page.wait_for_url(re.compile(r"/lab/$"))
    page.click("[data-testid=load-seed-001-scenario-1]")
    page.wait_for_url(re.compile(r"/lab/\d+/$"))
    assert page.is_checked("input[name=policies][value=boinc5]")
    assert page.is_checked("input[name=policies][value=boinc7]")
    page.click("[data-testid=compare-policies]")
    page.wait_for_url(re.compile(r"/lab/compare/\?runs=\d+,\d+$"))
    work_off_runs()
    page.wait_for_selector("[data-testid=compare-table]", timeout=15_000)
    assert page.locator("[data-testid=figures-card]").count() == 2
    headings = page.locator("[data-testid=compare-run] h2").all_inner_texts()
    assert sorted(h.split()[1] for h in headings) == ["boinc5", "boinc7"]
    why = page.locator("[data-testid=why]")
    assert why.is_visible() and why.locator("h2").inner_text() == "Why they differ"
    assert re.search(
        r"P1 \(resource share 50%\) got \d+% of the computing under (boinc5|boinc7) and \d+% "
        r"under (boinc5|boinc7)\.",
        why.inner_text(),
    )
    assert (
        page.locator("[data-testid=rec-heading]").inner_text() == "REC (boinc7) and long-term debt (boinc5) per project"
    )
    shot(page, "07-why-they-differ")
