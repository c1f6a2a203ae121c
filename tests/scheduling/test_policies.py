"""Scheduling policies: EDF against WRR, GPU first, REC against its closed form, work-fetch back-off."""

import random
import re

import pytest

from boincweb.human import number
from scheduling.engine import get_policy, run, work_fetch
from scheduling.engine.emulator import Emulator
from scheduling.engine.rec import update_average
from scheduling.presets import BY_SLUG

from .helpers import GFLOPS, HOUR, App, AppVersion, GpuType, Prefs, cpu_app, job, project, scenario

QUIET = Prefs(work_buf_min_days=0, work_buf_additional_days=0)


def deadline_scenario():
    # A's long job comes first in file order; B's short job has a tight deadline
    return scenario(
        project("A", [job("a1", hours=10, deadline=100 * HOUR)]),
        project("B", [job("b1", hours=3, deadline=3.5 * HOUR)]),
        ncpus=1,
        prefs=QUIET,
    )


def test_edf_meets_a_deadline_that_wrr_misses():
    boinc7 = run(deadline_scenario(), policy="boinc7", duration=86400, existing_jobs_only=True)
    wrr = run(deadline_scenario(), policy="wrr", duration=86400, existing_jobs_only=True)
    b7 = {p.name: p for p in boinc7.projects}["B"]
    bw = {p.name: p for p in wrr.projects}["B"]
    assert (b7.deadlines_met, b7.deadlines_missed) == (1, 0)
    assert (bw.deadlines_met, bw.deadlines_missed) == (0, 1)
    first = boinc7.slices[0]
    assert (first.job, first.why) == ("b1", "edf")


def test_boinc5_runs_the_job_in_danger_first_too():
    result = run(deadline_scenario(), policy="boinc5", duration=86400, existing_jobs_only=True)
    assert {p.name: p.deadlines_missed for p in result.projects}["B"] == 0


def test_gpu_jobs_are_scheduled_before_cpu_jobs():
    gpu_app = App(
        name="g",
        versions=(AppVersion(avg_ncpus=1.0, flops=20 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        fpops_est=20 * GFLOPS * HOUR,
    )
    s = scenario(
        project("C", [job("c1", hours=2)]),
        project("G", [job("g1", app="g", hours=20)], apps=(gpu_app,)),
        ncpus=1,
        gpus=(GpuType("NVIDIA", 1, 100 * GFLOPS),),
        prefs=QUIET,
    )
    result = run(s, duration=6 * HOUR, existing_jobs_only=True)
    g1 = [x for x in result.slices if x.job == "g1"]
    c1 = [x for x in result.slices if x.job == "c1"]
    assert g1[0].start == 0 and g1[0].resource == "NVIDIA"
    # the GPU job takes the only CPU's worth of CPU time, so c1 waits for it
    assert c1[0].start >= g1[0].end
    starts = [d.job for d in result.decisions if d.kind == "schedule"]
    assert starts[0] == "g1"


def test_rec_of_a_busy_project_follows_the_closed_form():
    s = scenario(project("P", [job("long", hours=24 * 40)]), ncpus=1, prefs=QUIET)
    result = run(s, duration=20 * 86400, existing_jobs_only=True, sample_interval=86400)
    half_life = 10 * 86400
    for sample in result.rec:
        if sample.time > 0:
            expected = 200.0 * (1 - 2 ** (-sample.time / half_life))
            assert sample.rec == pytest.approx(expected, rel=1e-9)


def test_rec_decays_by_half_in_one_half_life_without_work():
    rec, t = update_average(864000.0, 0.0, 0.0, 864000.0, 100.0, 1.0)
    assert rec == pytest.approx(100.0 * 2 ** (-(864000.0 - 1.0) / 864000.0), rel=1e-12)
    assert t == 864000.0


def make_em(s):
    return Emulator(
        s, get_policy("boinc7"), duration=86400, delta=60, seed=3, compat="intended", existing_jobs_only=False
    )


def test_work_fetch_backoff_doubles_from_600_s_up_to_a_day():
    em = make_em(scenario(project("P"), ncpus=1))
    p = em.projects[0]
    rng = random.Random(5)
    now = 0.0
    intervals = []
    for _ in range(12):
        work_fetch.handle_reply(em, p, {0: (100.0, 1.0)}, {}, now, rng)
        intervals.append(p.backoff_interval[0])
        wait = p.backoff_time[0] - now
        assert 0.5 * p.backoff_interval[0] <= wait <= 1.5 * p.backoff_interval[0]
        now = p.backoff_time[0] + 1
    assert intervals[:8] == [600, 1200, 2400, 4800, 9600, 19200, 38400, 76800]
    assert intervals[8:] == [86400] * 4


def test_a_backed_off_resource_is_not_backed_off_again_and_a_job_clears_it():
    em = make_em(scenario(project("P"), ncpus=1))
    p = em.projects[0]
    rng = random.Random(1)
    work_fetch.handle_reply(em, p, {0: (100.0, 1.0)}, {}, 0.0, rng)
    first = p.backoff_time[0]
    work_fetch.handle_reply(em, p, {0: (100.0, 1.0)}, {}, 10.0, rng)
    assert p.backoff_time[0] == first and p.backoff_interval[0] == 600
    work_fetch.handle_reply(em, p, {}, {0: 1}, 20.0, rng)
    assert (p.backoff_time[0], p.backoff_interval[0]) == (0.0, 0.0)


def test_a_project_without_the_resource_backs_off_and_the_run_still_fills_the_cpu():
    s = scenario(project("P", apps=(cpu_app(hours=2),)), ncpus=2)
    result = run(s, duration=2 * 86400)
    assert result.projects[0].jobs_completed > 20
    assert result.figures.idle_fraction < 0.05


def test_a_preempted_job_loses_its_work_since_the_checkpoint_only_under_intended():
    from .helpers import Availability, Host

    host = Host(ncpus=1, cpu_flops=GFLOPS, on=Availability(0.6, 1800))
    app = cpu_app(hours=8, checkpoint_period=1200, resume_cost=60)
    s = scenario(project("P", [job("long", hours=8)], apps=(app,)), host=host, prefs=QUIET)
    intended = run(s, duration=2 * 86400, existing_jobs_only=True, seed=4)
    bce = run(s, duration=2 * 86400, existing_jobs_only=True, seed=4, compat="bce")
    assert intended.projects[0].flops_lost > 0
    assert bce.projects[0].flops_lost == 0
    assert any("losing" in d.text for d in intended.decisions if d.kind == "preempt")


def test_after_a_reporting_rpc_another_project_is_asked_for_work_at_the_next_step():
    import os

    from scheduling.engine import load_scenario

    path = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios", "scenario1.txt")
    result = run(load_scenario(path), duration=86400)
    assert result.figures.idle_fraction < 0.05
    assert all(p.jobs_received > 0 for p in result.projects)


def test_the_policy_lookup_is_public_and_names_the_known_policies():
    import scheduling.engine as engine

    assert "get_policy" in engine.__all__ and "POLICIES" in engine.__all__
    assert {name: get_policy(name) for name in engine.POLICIES} == engine.POLICIES
    with pytest.raises(ValueError, match="unknown policy 'edf'.*boinc7, boinc5, wrr, fifo"):
        get_policy("edf")


# ---------------------------------------------------------------- decisions with their numbers

START = re.compile(
    r"(\w+) had the highest scheduling priority when picked: (\S+)(?: against ([^(;]+?))?"
    r"(?: \(([\w, ]+): no other job to run\))?"
    r"(?: \(the schedule began with ([^;]+); each job it picked lowered its project's priority\))?"
    r"(?:; job \d+ started at this instant, on another free CPU)?\.$"
)


def pairs(text):
    return {name: value for name, value in (part.rsplit(" ", 1) for part in text.split(", "))}


def two_shares_scenario():
    # two CPUs; A has three times B's share; both always have work, so every slice end is a
    # choice between them by priority (reference/client.md §6.2)
    return scenario(
        project("A", [job(f"a{i}", hours=3) for i in range(6)], share=300),
        project("B", [job(f"b{i}", hours=3) for i in range(6)], share=100),
        ncpus=2,
        prefs=QUIET,
    )


def expected_priorities(result, t):
    """project_priority_init from the REC the run recorded at `t`: -(REC / sum of RECs) /
    share fraction, over the projects that still have jobs."""
    recs = {s.project: s.rec for s in result.rec if s.time == t}
    shares = {p.name: p.resource_share for p in result.projects}
    rec_sum = sum(recs.values()) or 1.0
    total = sum(shares.values())
    return {name: -(rec / rec_sum) / (shares[name] / total) for name, rec in recs.items()}


def test_a_start_says_which_priorities_were_compared_and_they_are_the_runs_own():
    result = run(two_shares_scenario(), duration=12 * HOUR, existing_jobs_only=True, sample_interval=60.0)
    starts = [d for d in result.decisions if d.kind == "schedule" and "scheduling priority" in d.text]
    checked = 0
    for d in starts:
        m = START.search(d.text)
        assert m, d.text
        name, value, against, done, began = m.groups()
        assert name == d.project
        picked = {name: value, **(pairs(against) if against else {})}
        if done:
            # the others had no job left to run: none is compared
            assert not against or not set(done.split(", ")) & set(pairs(against))
        # the picked project's priority was the highest when it was picked
        assert all(float(value) >= float(v) for v in picked.values()), d.text
        # the values the schedule began with are the run's own (its recorded REC), and so
        # are the ones no earlier pick of this schedule lowered
        expected = {n: number(v) for n, v in expected_priorities(result, d.time).items()}
        began = pairs(began) if began else {}
        assert began == {n: expected[n] for n in began}
        assert {n: v for n, v in picked.items() if n not in began} == {n: expected[n] for n in picked if n not in began}
        assert set(picked) | set((done or "").split(", ")) - {""} == set(expected)
        checked += 1
    assert checked >= 6, "slice ends at 1 h, 2 h, ... each start a job picked by priority"
    # the two CPUs start two jobs at time 0, and the second line says why there are two
    first = [d.text for d in starts if d.time == 0]
    assert len(first) == 2 and "job 2 started at this instant, on another free CPU" in first[1]
    # a value that rounds to zero reads 0, never -0 or -0.000
    assert not re.search(r"-0(?:\.0*)?(?![\d.])", " ".join(d.text for d in result.decisions))


def test_a_finish_is_told_on_the_runs_clock_not_in_seconds():
    result = run(two_shares_scenario(), duration=4 * HOUR, existing_jobs_only=True)
    finish = next(d for d in result.decisions if d.kind == "finish")
    assert "finished at day 1, 03:00" in finish.text and " s " not in finish.text


# ---------------------------------------------------------------- boinc5: GPUs and bounded debt


def test_boinc5_runs_gpu_jobs_on_the_cpu_and_gpu_preset_and_the_gpu_project_gets_its_share():
    preset = BY_SLUG["seed-002-cpu-and-gpu"]
    result = run(preset.build(), policy="boinc5", duration=preset.duration)
    gpu = [s for s in result.slices if s.resource == "NVIDIA"]
    assert {s.project for s in gpu} == {"GpuOnly", "Both"}
    busy = sum(s.end - s.start for s in gpu)
    assert busy > 0.5 * preset.duration, "the GPU is busy most of the time (it is active 70 %)"
    used = {p.name: p.flops_used for p in result.projects}
    assert used["GpuOnly"] > 0.2 * sum(used.values())
    assert result.figures.idle_fraction < 0.1
    gpu_starts = [d.text for d in result.decisions if d.kind == "schedule" and "on NVIDIA" in d.text]
    assert any("the most NVIDIA short-term debt" in t for t in gpu_starts)


@pytest.mark.parametrize("slug", ["seed-001-long-and-short", "seed-001-scenario-1", "seed-002-cpu-and-gpu"])
def test_boinc5_short_term_debt_stays_bounded_and_averages_zero(slug):
    preset = BY_SLUG[slug]
    result = run(preset.build(), policy="boinc5", duration=preset.duration)
    by_time: dict = {}
    for s in result.rec:
        assert abs(s.short_term_debt) <= 86400.0
        by_time.setdefault(s.time, []).append(s.short_term_debt)
    # projects with nothing runnable hold 0, so the sum over all is the runnable ones' sum: 0
    for debts in by_time.values():
        assert abs(sum(debts)) < 1e-6 * (1 + max(abs(d) for d in debts))
    assert max(abs(s.short_term_debt) for s in result.rec) > 0
