"""Scheduler RPC policy of seed 000: exponential back-off ranges, master-file fetch, reporting."""

import random

from scheduling.engine import rpc, run
from scheduling.engine.state import ProjectState

from .helpers import Availability, Prefs, boinc7_emulator, cpu_app, job, project, scenario


def fresh_project():
    return ProjectState(project("P"), 0, 1)


def test_rpc_backoff_doubles_from_a_minute_and_caps_at_four_hours():
    p = fresh_project()
    rng = random.Random(7)
    for failure in range(1, 10):
        backoff, _ = rpc.project_rpc_backoff(p, 0.0, rng, bce=False)
        top = min(2**failure * 60.0, 14400.0)
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
    # under bce project_rpc_backoff compares the count with 10 before raising it, so the
    # 11th, 21st and 31st failures start master fetches and the 32nd waits a day
    for _ in range(31):
        backoff, _ = rpc.project_rpc_backoff(p, 1000.0, rng, bce=True)
    assert backoff < rpc.MASTER_FETCH_INTERVAL and p.master_fetch_failures == 3
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
        top = min(2**n * 60.0, 14400.0)
        assert 0.5 * top <= event.backoff <= top
    masters = [e for e in result.rpcs if e.reason == "master_fetch"]
    assert masters and not masters[0].ok
    assert masters[0].time >= failures[9].time
    assert result.projects[0].rpcs == 0


def test_a_second_scheduler_url_answers_when_the_first_is_down():
    from scheduling.engine.scenario import SchedulerUrl

    urls = (
        SchedulerUrl("http://a/cgi", Availability(0.0, 3600)),
        SchedulerUrl("http://b/cgi", Availability(1.0, 3600)),
    )
    s = scenario(project("P", scheduler_urls=urls), ncpus=1)
    result = run(s, duration=86400)
    assert result.rpcs[0].ok and result.rpcs[0].url == "http://b/cgi"


def test_project_downtime_makes_rpcs_fail_until_it_ends():
    s = scenario(project("P", downtime=((0.0, 7200.0),)), ncpus=1)
    result = run(s, duration=86400)
    assert all(not e.ok for e in result.rpcs if e.time < 7200)
    assert any(e.ok for e in result.rpcs if e.time >= 7200)


def test_finished_results_are_reported_within_max_report_delay():
    s = scenario(
        project("P", apps=(cpu_app(hours=0.5),)),
        ncpus=1,
        prefs=Prefs(work_buf_min_days=0.01, work_buf_additional_days=0),
    )
    result = run(s, duration=86400)
    finishes = [d.time for d in result.decisions if d.kind == "finish"]
    reports = [e for e in result.rpcs if e.ok and e.reported]
    assert finishes and reports
    assert reports[0].time <= finishes[0] + rpc.MAX_REPORT_DELAY + 120
    assert sum(e.reported for e in result.rpcs) >= len(finishes) - 3


def ready(completed, deadline):
    from types import SimpleNamespace

    return SimpleNamespace(completed_time=completed, deadline=deadline)


def test_a_result_is_due_an_hour_after_it_completes_and_not_before():
    em = boinc7_emulator(scenario(project("P"), ncpus=1), duration=86400)
    p = em.projects[0]
    p.ready = [ready(1000.0, 30 * 86400.0)]
    assert not rpc.must_report(em, p, 1000.0 + rpc.MAX_REPORT_DELAY)
    assert rpc.must_report(em, p, 1000.0 + rpc.MAX_REPORT_DELAY + 1)


def test_a_result_is_due_a_day_before_its_deadline_or_the_minimum_buffer_if_longer():
    em = boinc7_emulator(scenario(project("P"), ncpus=1), duration=86400)
    p = em.projects[0]
    # completed long ago would be due anyway; a result completed "later" isolates the cushion
    p.ready = [ready(10 * 86400.0, 5 * 86400.0)]
    assert not rpc.must_report(em, p, 4 * 86400.0)
    assert rpc.must_report(em, p, 4 * 86400.0 + 1)
    em2 = boinc7_emulator(scenario(project("P"), ncpus=1, prefs=Prefs(work_buf_min_days=2.0)), duration=86400)
    p2 = em2.projects[0]
    p2.ready = [ready(10 * 86400.0, 5 * 86400.0)]
    assert not rpc.must_report(em2, p2, 3 * 86400.0)
    assert rpc.must_report(em2, p2, 3 * 86400.0 + 1)


def test_sixty_four_ready_results_are_reported_at_once_sixty_three_wait():
    em = boinc7_emulator(scenario(project("P"), ncpus=1), duration=86400)
    p = em.projects[0]
    p.ready = [ready(0.0, 30 * 86400.0) for _ in range(rpc.RESULT_REPORT_IF_AT_LEAST_N - 1)]
    assert not rpc.must_report(em, p, 60.0)
    p.ready.append(ready(0.0, 30 * 86400.0))
    assert rpc.must_report(em, p, 60.0)


def test_report_results_immediately_reports_a_fresh_result_and_nothing_is_due_without_one():
    em = boinc7_emulator(scenario(project("P"), ncpus=1, prefs=Prefs(report_results_immediately=True)), duration=86400)
    p = em.projects[0]
    assert not rpc.must_report(em, p, 60.0)
    p.ready = [ready(60.0, 30 * 86400.0)]
    assert rpc.must_report(em, p, 60.0)
    # but not while the project is in RPC back-off
    p.min_rpc_time = 120.0
    assert not rpc.must_report(em, p, 60.0)


def two_jobs(**prefs):
    # p1 runs first and ends at 3600 s; p2 keeps the buffer above its minimum all day
    return scenario(
        project("P", [job("p1", hours=1), job("p2", hours=20)]),
        ncpus=1,
        prefs=Prefs(work_buf_min_days=0.01, work_buf_additional_days=0.01, **prefs),
    )


def test_a_finished_result_makes_its_own_rpc_on_the_step_after_max_report_delay():
    result = run(two_jobs(), duration=4 * 3600)
    assert [(e.time, e.reason, e.reported) for e in result.rpcs][:1] == [
        (3600.0 + rpc.MAX_REPORT_DELAY + 60, "results_due", 1)
    ]


def test_report_results_immediately_reports_when_the_job_ends():
    result = run(two_jobs(report_results_immediately=True), duration=4 * 3600)
    assert [(e.time, e.reason, e.reported) for e in result.rpcs][:1] == [(3600.0, "results_due", 1)]


def test_a_result_close_to_its_deadline_is_reported_when_it_ends():
    # due one day before its deadline, which is before it even ends
    s = scenario(
        project("P", [job("p1", hours=1, deadline=86400.0 + 1800), job("p2", hours=20)]),
        ncpus=1,
        prefs=Prefs(work_buf_min_days=0.01, work_buf_additional_days=0.01),
    )
    result = run(s, duration=4 * 3600)
    assert [(e.time, e.reason, e.reported) for e in result.rpcs][:1] == [(3600.0, "results_due", 1)]


def test_a_successful_master_fetch_clears_the_backoff_and_the_next_rpc_gets_work():
    down = scenario(project("P", downtime=((0.0, 10 * 86400.0),)), ncpus=1)
    first_master = next(e for e in run(down, duration=2 * 86400).rpcs if e.reason == "master_fetch")
    # the same run, with the project back exactly when its master file is fetched
    s = scenario(project("P", downtime=((0.0, first_master.time),)), ncpus=1)
    result = run(s, duration=2 * 86400)
    master = [e for e in result.rpcs if e.reason == "master_fetch"]
    assert [(e.time, e.ok, e.backoff) for e in master] == [(first_master.time, True, 0.0)]
    assert master[0].message == "Fetched the master file of P; RPC back-off cleared."
    later = [e for e in result.rpcs if e.time > first_master.time]
    # one RPC per instant: the work request comes on the next step, with no back-off left
    assert later[0].time == first_master.time + 60 and later[0].ok and later[0].jobs_received
    assert sum(not e.ok for e in result.rpcs) == rpc.MASTER_FETCH_PERIOD


def test_after_a_days_wait_the_intended_client_starts_a_new_round_of_master_fetches():
    rng = random.Random(3)
    p = fresh_project()
    for _ in range(3 * rpc.MASTER_FETCH_PERIOD):
        backoff, note = rpc.project_rpc_backoff(p, 0.0, rng, bce=False)
    assert backoff == rpc.MASTER_FETCH_INTERVAL and "waiting a day" in note
    assert p.master_fetch_pending and p.master_fetch_failures == 0
    # the next failure is an ordinary exponential back-off again
    backoff, _ = rpc.project_rpc_backoff(p, 86400.0, rng, bce=False)
    assert 60.0 <= backoff <= 120.0


def test_boincs_emulator_waits_a_day_after_every_failure_once_three_rounds_failed():
    rng = random.Random(3)
    p = fresh_project()
    # the 31st failure starts the third master fetch (the count is compared before it is
    # raised); every failure after it waits a day
    for _ in range(3 * rpc.MASTER_FETCH_PERIOD + 1):
        rpc.project_rpc_backoff(p, 0.0, rng, bce=True)
    for n in range(5):
        backoff, _ = rpc.project_rpc_backoff(p, 86400.0 * (n + 1), rng, bce=True)
        assert backoff == rpc.MASTER_FETCH_INTERVAL
        assert p.min_rpc_time == 86400.0 * (n + 2)
    assert not p.master_fetch_pending and p.master_fetch_failures == 3
