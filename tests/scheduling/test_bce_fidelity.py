"""Rules of BOINC's client that `--compat bce` follows where the engine once departed from
BOINC's emulator (issue 12, docs/engine-fidelity.md). Each expectation is derived from the
rule on a small hand-written scenario, not copied from an emulator run."""

import os

from scheduling.engine import read_pcdr, run

from .helpers import HOUR, Prefs, cpu_app, job, project, scenario

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def urgent_work_behind_a_running_job():
    # One CPU. "busy" runs a 1-hour job; "urgent" has 6-minute jobs due within an hour,
    # shorter than the 2.4-hour minimum buffer, so every urgent job is a predicted deadline
    # miss as soon as a round-robin simulation sees it (reference/client.md §6.4). At 0 s
    # the buffer (1 h) is below its minimum and urgent, with no queued work, has the higher
    # fetch priority, so it is asked for work at 0 s.
    prefs = Prefs(work_buf_min_days=0.1, work_buf_additional_days=0.0)
    return scenario(project("busy", [job("b1", hours=1.0)], share=100),
                    project("urgent", apps=(cpu_app(hours=0.1, latency=HOUR),), share=100),
                    ncpus=1, prefs=prefs)


def first_start(result, name):
    return min(s.start for s in result.slices if s.project == name)


def test_under_bce_jobs_fetched_at_an_instant_wait_for_the_next_steps_simulation():
    # rr_simulation() runs once per instant (rr_sim.cpp): the schedule made right after the
    # RPC still sees no urgent job in deadline danger, so "busy" keeps the CPU in its time
    # slice; the next step's simulation finds the misses and EDF takes the CPU at 60 s.
    result = run(urgent_work_behind_a_running_job(), compat="bce", duration=2 * HOUR)
    assert result.rpcs[0].time == 0.0 and result.rpcs[0].project == "urgent"
    assert first_start(result, "urgent") == 60.0
    preempt = [d for d in result.decisions if d.kind == "preempt" and d.job == "b1"]
    assert preempt and preempt[0].time == 60.0


def test_intended_looks_at_fetched_jobs_at_once():
    result = run(urgent_work_behind_a_running_job(), compat="intended", duration=2 * HOUR)
    assert first_start(result, "urgent") == 0.0


def test_seed_001_scenario_1_with_a_short_buffer_makes_two_rpcs_per_job():
    # P1's 6-minute jobs are due in an hour, less than the 0.1-day minimum buffer: each is
    # reported at once (its deadline minus a day is past, §6.7) by an RPC of its own. A
    # report finds the buffer at or above work_buf_total (= work_buf_min, no additional
    # days) because the last work-fetch RPC topped it up, so it asks for nothing (§6.5
    # piggyback), and the buffer is topped up again by a separate work-fetch RPC once it
    # falls below the minimum: about two RPCs per job, r = RPCs / (2 jobs) close to 1.
    # seed 001's Scenario 1 with the reader's default buffers, 0.1 + 0 days
    text = open(os.path.join(ROOT, "scenarios", "scenario1.txt")).read().split("# lab additions")[0]
    result = run(read_pcdr(text), compat="bce", duration=2 * 86400)
    assert result.figures.rpcs_per_job > 0.9
    p1 = [r for r in result.rpcs if r.project == "P1" and r.ok]
    reports = [r for r in p1 if r.reason == "results_due"]
    assert sum(1 for r in reports if r.jobs_received) < 0.1 * len(reports)
