"""Scheduler RPC policy of seed 000: exponential back-off ranges, master-file fetch, reporting."""

import random


from scheduling.engine import run
from scheduling.engine import rpc
from scheduling.engine.state import ProjectState

from .helpers import Availability, Prefs, cpu_app, project, scenario


def fresh_project():
    return ProjectState(project("P"), 0, 1)


def test_rpc_backoff_doubles_from_a_minute_and_caps_at_four_hours():
    p = fresh_project()
    rng = random.Random(7)
    for failure in range(1, 10):
        backoff, _ = rpc.project_rpc_backoff(p, 0.0, rng, bce=False)
        top = min(2 ** failure * 60.0, 14400.0)
        assert 0.5 * top <= backoff <= top
        p.min_rpc_time = 0.0
    assert p.nrpc_failures == 9


def test_the_tenth_failure_asks_for_the_master_file_and_restarts_the_count():
    p = fresh_project()
    rng = random.Random(7)
    for _ in range(10):
        _, note = rpc.project_rpc_backoff(p, 0.0, rng, bce=False)
    assert p.master_fetch_pending
    assert p.nrpc_failures == 0
    assert p.master_fetch_failures == 1
    assert "master file" in note


def test_three_master_fetch_rounds_make_the_project_wait_a_day():
    p = fresh_project()
    rng = random.Random(2)
    for _ in range(30):
        backoff, _ = rpc.project_rpc_backoff(p, 1000.0, rng, bce=True)
    assert backoff == rpc.MASTER_FETCH_INTERVAL
    assert p.min_rpc_time == 1000.0 + 86400.0
    # BOINC's emulator clears the pending master fetch at once and never resets the count
    assert not p.master_fetch_pending
    assert p.master_fetch_failures == 3


def test_a_project_that_is_always_down_is_retried_with_growing_backoffs_and_a_master_fetch():
    s = scenario(project("P", available=Availability(0.0, 3600)), ncpus=1)
    result = run(s, duration=2 * 86400)
    failures = [e for e in result.rpcs if not e.ok and e.reason != "master_fetch"]
    assert len(failures) >= 10
    for n, event in enumerate(failures[:9], start=1):
        top = min(2 ** n * 60.0, 14400.0)
        assert 0.5 * top <= event.backoff <= top
    masters = [e for e in result.rpcs if e.reason == "master_fetch"]
    assert masters and not masters[0].ok
    assert masters[0].time >= failures[9].time
    assert result.projects[0].rpcs == 0


def test_a_second_scheduler_url_answers_when_the_first_is_down():
    from scheduling.engine.scenario import SchedulerUrl
    urls = (SchedulerUrl("http://a/cgi", Availability(0.0, 3600)), SchedulerUrl("http://b/cgi", Availability(1.0, 3600)))
    s = scenario(project("P", scheduler_urls=urls), ncpus=1)
    result = run(s, duration=86400)
    assert result.rpcs[0].ok and result.rpcs[0].url == "http://b/cgi"


def test_project_downtime_makes_rpcs_fail_until_it_ends():
    s = scenario(project("P", downtime=((0.0, 7200.0),)), ncpus=1)
    result = run(s, duration=86400)
    assert all(not e.ok for e in result.rpcs if e.time < 7200)
    assert any(e.ok for e in result.rpcs if e.time >= 7200)


def test_finished_results_are_reported_within_max_report_delay():
    s = scenario(project("P", apps=(cpu_app(hours=0.5),)), ncpus=1,
                 prefs=Prefs(work_buf_min_days=0.01, work_buf_additional_days=0))
    result = run(s, duration=86400)
    finishes = [d.time for d in result.decisions if d.kind == "finish"]
    reports = [e for e in result.rpcs if e.ok and e.reported]
    assert finishes and reports
    assert reports[0].time <= finishes[0] + rpc.MAX_REPORT_DELAY + 120
    assert sum(e.reported for e in result.rpcs) >= len(finishes) - 3
