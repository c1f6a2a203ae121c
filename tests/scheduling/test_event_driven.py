"""The event-driven emulator against a fixed 60 s step (issue 4 item 7; reference/client.md §3)."""

import pytest

from scheduling.engine import get_policy
from scheduling.engine.emulator import Emulator

from .helpers import GFLOPS, HOUR, Availability, Host, Prefs, cpu_app, job, project, scenario


def emulate(s, *, policy="boinc7", duration=86400.0, fixed_step=False, compat="intended", seed=1):
    em = Emulator(
        s,
        get_policy(policy),
        duration=duration,
        delta=60,
        seed=seed,
        compat=compat,
        existing_jobs_only=False,
        policy_name=policy,
        fixed_step=fixed_step,
    )
    return em, em.run()


def slice_end_preemption():
    # two projects on one CPU with 3-hour jobs and a 30-minute slice: the CPU changes hands
    # at slice ends, decided on the grid step right after each one
    prefs = Prefs(cpu_scheduling_period_minutes=30, work_buf_min_days=0.05, work_buf_additional_days=0.1)
    return scenario(
        project("A", [job("a1", hours=3), job("a2", hours=3)], share=100),
        project("B", [job("b1", hours=3)], share=100),
        ncpus=1,
        prefs=prefs,
    )


def deadline_pressure():
    # a job that only the EDF pass saves, beside a project with more priority
    prefs = Prefs(cpu_scheduling_period_minutes=60, work_buf_min_days=0.1, work_buf_additional_days=0.2)
    return scenario(
        project("A", [job("a1", hours=4), job("a2", hours=4)], share=300),
        project("B", [job("b1", hours=4, deadline=14 * HOUR)], share=100),
        ncpus=1,
        prefs=prefs,
    )


def intermittent_host():
    host = Host(
        ncpus=2,
        cpu_flops=GFLOPS,
        on=Availability(0.6, 3 * 3600),
        active=Availability(0.8, 3600),
        connected=Availability(0.7, 3600),
    )
    prefs = Prefs(cpu_scheduling_period_minutes=45, work_buf_min_days=0.1, work_buf_additional_days=0.3)
    return scenario(
        project("A", apps=(cpu_app(hours=2.5, checkpoint_period=300),), share=200),
        project("B", apps=(cpu_app(hours=1.2, latency=86400.0),), share=100),
        host=host,
        prefs=prefs,
    )


@pytest.mark.parametrize("make", [slice_end_preemption, deadline_pressure, intermittent_host])
@pytest.mark.parametrize("compat", ["intended", "bce"])
@pytest.mark.parametrize("policy", ["boinc7", "wrr", "fifo"])
def test_the_event_driven_run_gives_the_slices_of_a_fixed_step(make, compat, policy):
    # deadline_pressure and intermittent_host under boinc7 need the check for REC drift
    # reordering the round-robin simulation's later picks (rr_sim.order_time)
    s = make()
    _em, events = emulate(s, policy=policy, compat=compat, duration=2 * 86400)
    _em, fixed = emulate(s, policy=policy, compat=compat, duration=2 * 86400, fixed_step=True)
    assert events.slices == fixed.slices
    assert events.rpcs == fixed.rpcs
    assert events.events < fixed.events


def test_a_job_past_its_slice_is_preempted_on_the_next_step():
    _em, result = emulate(slice_end_preemption(), duration=6 * HOUR)
    starts = sorted({sl.start for sl in result.slices})
    # the slice rule is "strictly after" run_start + 30 min: the next 60 s step
    assert starts[:3] == [0.0, 1860.0, 3720.0]
    assert [sl.project for sl in sorted(result.slices, key=lambda sl: sl.start)[:3]] == ["A", "B", "A"]


def test_off_periods_are_jumped_over_not_walked():
    # the host is off most of the time: the run wakes only for its events
    host = Host(ncpus=1, cpu_flops=GFLOPS, on=Availability(0.2, 4 * 3600))
    s = scenario(project("P", apps=(cpu_app(hours=1),)), host=host)
    em, result = emulate(s, duration=10 * 86400)
    off = sum(h.end - h.start for h in result.host_periods if h.state == "off")
    assert off > 5 * 86400
    # a 60 s walk of the off time alone would take off / 60 events
    assert result.events < off / 60 / 4
    for d in result.decisions:
        assert not any(h.start < d.time < h.end for h in result.host_periods if h.state == "off")


def test_nothing_is_decided_while_disconnected_but_reports_wait_for_the_connection():
    host = Host(ncpus=1, cpu_flops=GFLOPS, connected=Availability(0.3, 6 * 3600))
    s = scenario(
        project("P", apps=(cpu_app(hours=0.5),)),
        host=host,
        prefs=Prefs(work_buf_min_days=0.02, work_buf_additional_days=0.02),
    )
    em, result = emulate(s, duration=4 * 86400)
    _em, fixed = emulate(s, duration=4 * 86400, fixed_step=True)
    assert result.rpcs == fixed.rpcs and result.slices == fixed.slices
    down = [h for h in result.host_periods if h.state == "disconnected"]
    assert down
    assert not any(h.start < e.time < h.end for h in down for e in result.rpcs)


def test_a_slice_that_ends_on_a_checkpoint_is_preempted_at_the_next_checkpoint_not_a_step_later():
    # 45-minute slices, checkpoints every 5 minutes from each resume: a slice ends exactly on
    # a checkpoint, which does not count ("checkpointed after the slice end", §6.3), so the
    # job becomes preemptible at the next checkpoint, 300 s later, with nothing to lose
    prefs = Prefs(cpu_scheduling_period_minutes=45, work_buf_min_days=0.05, work_buf_additional_days=0.1)
    app = cpu_app(hours=3, checkpoint_period=300)
    s = scenario(
        project("A", [job("a1", hours=3)], apps=(app,)),
        project("B", [job("b1", hours=3)], apps=(app,)),
        ncpus=1,
        prefs=prefs,
    )
    _em, events = emulate(s, policy="wrr", duration=6 * HOUR)
    _em, fixed = emulate(s, policy="wrr", duration=6 * HOUR, fixed_step=True)
    assert events.slices == fixed.slices
    first = sorted(events.slices, key=lambda sl: sl.start)[0]
    assert (first.start, first.end) == (0.0, 45 * 60.0 + 300.0)
    assert not any("losing" in d.text for d in events.decisions if d.kind == "preempt")
