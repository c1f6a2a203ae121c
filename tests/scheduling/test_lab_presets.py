"""Seed 001's "Scenario 1" presets do what their "what to look for" text says, under both of
their policies (reference/debt-era.md §8)."""

import itertools
import os
import statistics
from collections import Counter

import pytest

from scheduling.engine import load_scenario, run
from scheduling.presets import BY_SLUG

H = 3600.0
SCENARIO_1 = BY_SLUG["seed-001-scenario-1"]
STRICT = BY_SLUG["seed-001-scenario-1-strict"]


def cpu_hours(result):
    """CPU-hours per (CPU, project)."""
    out = Counter()
    for s in result.slices:
        out[(s.instance, s.project)] += (s.end - s.start) / H
    return out


def turns(result, projects=("P2", "P3")):
    """The lengths in minutes of the slices of `projects` that ended before the run did."""
    return [(s.end - s.start) / 60 for s in result.slices if s.project in projects and s.end < result.duration]


def lost_hours(result):
    return sum(p.flops_lost for p in result.projects) / 1e9 / H


def preemptions(result):
    return sum(1 for d in result.decisions if d.kind == "preempt")


@pytest.fixture(scope="module")
def runs():
    return {
        (preset.slug, policy): run(preset.scenario(), policy=policy, duration=preset.duration, seed=1)
        for preset in (SCENARIO_1, STRICT)
        for policy in preset.policies
    }


def test_the_scenario_file_is_the_preset():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios", "scenario1.txt")
    from_file, preset = load_scenario(path), SCENARIO_1.scenario()
    assert (from_file.host, from_file.prefs, from_file.projects) == (preset.host, preset.prefs, preset.projects)


def test_scenario_1_is_the_seeds_line_with_a_buffer_below_p1s_deadline():
    s = SCENARIO_1.scenario()
    assert s.host.ncpus == 2 and not s.prefs.leave_apps_in_memory and s.prefs.cpu_scheduling_period_minutes == 60
    shares = {
        p.name: (p.resource_share, p.apps[0].fpops_est / 1e9 / H, p.apps[0].latency_bound / H) for p in s.projects
    }
    assert shares == {"P1": (0.5, 0.1, 1.0), "P2": (0.25, 1.0, 24.0), "P3": (0.25, 1.0, 24.0)}
    buffer_hours = (s.prefs.work_buf_min_days + s.prefs.work_buf_additional_days) * 24
    assert buffer_hours < shares["P1"][2]
    assert STRICT.scenario().prefs.cpu_scheduling_period_minutes == 6
    assert STRICT.scenario().projects == s.projects


def test_under_boinc5_one_cpu_runs_p1_and_the_other_runs_p2_and_p3_in_turns(runs):
    r = runs[(SCENARIO_1.slug, "boinc5")]
    hours = cpu_hours(r)
    p1_cpu = max((0, 1), key=lambda i: hours[(i, "P1")])
    assert hours[(p1_cpu, "P1")] > 0.8 * r.duration / H
    other = 1 - p1_cpu
    assert hours[(other, "P2")] + hours[(other, "P3")] > 0.8 * r.duration / H
    assert preemptions(r) == 0 and lost_hours(r) == 0
    assert min(turns(r)) == pytest.approx(60.0)
    lane = [s.project for s in r.slices if s.instance == other and s.project != "P1"]
    stretches = [len(list(g)) for _p, g in itertools.groupby(lane)]
    assert set(lane) == {"P2", "P3"} and len(stretches) > len(lane) / 2 and max(stretches) <= 2, (
        "P2 and P3 take turns of one or two tasks"
    )
    assert sum(p.deadlines_missed for p in r.projects) == 0 and r.figures.idle_fraction < 0.01


def test_under_boinc7_p1_runs_in_batches_on_both_cpus_and_gets_about_a_third(runs):
    r5, r7 = runs[(SCENARIO_1.slug, "boinc5")], runs[(SCENARIO_1.slug, "boinc7")]
    hours = cpu_hours(r7)
    p1 = hours[(0, "P1")] + hours[(1, "P1")]
    assert 0.25 < p1 / sum(hours.values()) < 0.4
    assert min(hours[(0, "P1")], hours[(1, "P1")]) > 0.35 * p1, "P1 runs on both CPUs"
    together = [
        s
        for s in r7.slices
        if s.project == "P1"
        and s.instance == 0
        and any(o.project == "P1" and o.instance == 1 and o.start == s.start for o in r7.slices)
    ]
    assert len(together) > 20, "P1's tasks start on both CPUs at once"
    assert preemptions(r7) == 0 and lost_hours(r7) == 0 and min(turns(r7)) == pytest.approx(60.0)
    assert r7.figures.share_violation > 3 * r5.figures.share_violation
    assert sum(p.deadlines_missed for p in r7.projects) == 0 and r7.figures.idle_fraction < 0.01


@pytest.mark.parametrize("policy", STRICT.policies)
def test_switching_strictly_by_debt_cuts_turns_short_and_throws_work_away(runs, policy):
    strict, whole = runs[(STRICT.slug, policy)], runs[(SCENARIO_1.slug, policy)]
    assert preemptions(strict) >= 20 and lost_hours(strict) > 1.0
    assert statistics.median(turns(strict)) < 30 < statistics.median(turns(whole))
    assert any("losing" in d.text for d in strict.decisions if d.kind == "preempt")


def test_the_decision_log_gives_each_policy_its_own_reason(runs):
    def reasons(policy):
        return {
            d.text.split(" because ")[1]
            for d in runs[(SCENARIO_1.slug, policy)].decisions
            if d.kind == "schedule" and " because " in d.text
        }

    assert any(
        r.startswith("P1 had the most short-term debt (time owed to it) when picked: ") for r in reasons("boinc5")
    )
    assert any(r.startswith("P1 had the highest scheduling priority when picked: ") for r in reasons("boinc7"))
    assert not any("priority" in r for r in reasons("boinc5"))
    assert not any("debt" in r for r in reasons("boinc7"))
