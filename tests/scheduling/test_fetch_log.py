"""The decision log's fetch sentences (issue 4 item 5; reference/client.md §6.5): why no work
is fetched, said once when the reason starts and again only when it changes, and what a
reporting RPC asks for."""

from scheduling.engine import get_policy
from scheduling.engine.emulator import Emulator

from .helpers import HOUR, Prefs, cpu_app, job, project, scenario

# 0.02 days of minimum buffer: 1728 s; the shortest app takes an hour
PREFS = dict(work_buf_min_days=0.02, work_buf_additional_days=0.01)


def emulate(s, *, duration=4 * HOUR, fixed_step=False):
    em = Emulator(
        s,
        get_policy("boinc7"),
        duration=duration,
        delta=60,
        seed=1,
        compat="intended",
        existing_jobs_only=False,
        policy_name="boinc7",
        fixed_step=fixed_step,
    )
    return em.run()


def fetch_log(result, until=None):
    return [
        (d.time, d.project, d.text)
        for d in result.decisions
        if d.kind == "fetch" and (until is None or d.time <= until)
    ]


def test_a_full_buffer_is_explained_once_and_not_at_every_check():
    s = scenario(project("P", [job("p1", hours=3)]), ncpus=1, prefs=Prefs(**PREFS))
    result = emulate(s)
    # the saturated time shrinks from 10800 s, but the reason (cpu full) stays the same
    # until it falls below 1728 s at 9120 s: then P is asked
    assert fetch_log(result, until=9180) == [
        (0.0, "", "No work fetch: cpu is saturated for 10800 s, at least the minimum buffer of 1728 s."),
        (
            9120.0,
            "P",
            "Asked P for work: cpu saturated for 1680 s, below the minimum buffer of 1728 s; it is "
            "the fetchable project with the highest priority (-1.65); request cpu 912 s / 0 inst.",
        ),
        (9180.0, "", "No work fetch: cpu is saturated for 5220 s, at least the minimum buffer of 1728 s."),
    ]


def test_each_change_of_the_no_fetch_reason_gets_one_sentence():
    # a zero-share project is asked only once the queue is under 180 s, and then only for an
    # idle CPU: full, then zero share, then nothing to request, then a fetch when p1 ends
    s = scenario(project("P", [job("p1", hours=3)], share=0), ncpus=1, prefs=Prefs(**PREFS))
    result = emulate(s)
    assert fetch_log(result, until=10800) == [
        (0.0, "", "No work fetch: cpu is saturated for 10800 s, at least the minimum buffer of 1728 s."),
        (9120.0, "", "No work fetch: cpu needs work but no project can be asked (P: zero share)."),
        (10620.0, "", "No work fetch: cpu needs work but no project can be asked (P: nothing to request)."),
        (
            10800.0,
            "P",
            "Asked P for work: cpu saturated for 0 s, below the minimum buffer of 1728 s; it is "
            "the fetchable project with the highest priority (0); request cpu 1 s / 1 inst.",
        ),
    ]
    # the event-driven run sees each change on the step a fixed 60 s step sees it
    assert fetch_log(result) == fetch_log(emulate(s, fixed_step=True))


def test_a_project_in_rpc_backoff_is_named_as_the_reason():
    s = scenario(project("P", [job("p1", hours=3)], downtime=((0.0, 4 * HOUR),)), ncpus=1, prefs=Prefs(**PREFS))
    log = fetch_log(emulate(s), until=9180)
    assert [text for _t, _p, text in log] == [
        "No work fetch: cpu is saturated for 10800 s, at least the minimum buffer of 1728 s.",
        "Asked P for work: cpu saturated for 1680 s, below the minimum buffer of 1728 s; it is the fetchable "
        "project with the highest priority (-1.65); request cpu 912 s / 0 inst.",
        "No work fetch: cpu needs work but no project can be asked (P: RPC back-off).",
    ]


def test_a_reporting_rpc_says_what_work_it_asks_for_or_that_it_asks_for_none():
    prefs = Prefs(work_buf_min_days=0.02, work_buf_additional_days=0.1, report_results_immediately=True)
    s = scenario(project("P", [job("p1", hours=2)], apps=(cpu_app(hours=1),)), ncpus=1, prefs=prefs)
    result = emulate(s)
    reports = [e for e in result.rpcs if e.reason == "results_due"]
    assert [(e.time, e.reported, e.requests) for e in reports] == [
        (7200.0, 1, {}),
        (10800.0, 1, {"cpu": [3168.0, 0.0]}),
    ]
    said = {t: text for t, _p, text in fetch_log(result) if t in (7200.0, 10800.0)}
    # at 7200 s the queue is still above the 10368 s maximum buffer: nothing is asked
    assert said[7200.0] == (
        "Reporting to P without a work request: no processor type is below the maximum "
        "buffer for which P is the project to ask."
    )
    assert said[10800.0] == "Asked P for work with the results it is sent: cpu 3168 s / 0 inst."
    assert [d.text for d in result.decisions if d.kind == "rpc" and d.time in (7200.0, 10800.0)] == [
        "RPC to P (P has results to report): reported 1, got no jobs.",
        "RPC to P (P has results to report): reported 1, got 1 cpu jobs.",
    ]
