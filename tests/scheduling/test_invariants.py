"""Determinism per seed, and invariants on random scenarios (hypothesis)."""

import os
from collections import defaultdict

from hypothesis import HealthCheck, given, settings, strategies as st

from scheduling.engine import get_policy, load_scenario, run
from scheduling.engine.emulator import Emulator
from scheduling.engine.state import FINISHED

from .helpers import GFLOPS, App, AppVersion, Availability, GpuType, Host, Prefs, Project, Scenario

SCENARIOS = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios")


def comparable(result):
    data = result.to_dict()
    data.pop("cpu_seconds")
    return data


def test_the_same_seed_gives_the_same_trace():
    s = load_scenario(os.path.join(SCENARIOS, "standard.json"))
    a = run(s, duration=3 * 86400, seed=11)
    b = run(s, duration=3 * 86400, seed=11)
    assert comparable(a) == comparable(b)
    assert len(a.slices) > 50


def test_another_seed_gives_another_trace():
    s = load_scenario(os.path.join(SCENARIOS, "standard.json"))
    assert comparable(run(s, duration=86400, seed=1)) != comparable(run(s, duration=86400, seed=2))


@st.composite
def scenarios(draw):
    ncpus = draw(st.integers(1, 4))
    ngpu = draw(st.integers(0, 2))
    gpus = (GpuType("NVIDIA", ngpu, 50 * GFLOPS),) if ngpu else ()
    frac = st.sampled_from([1.0, 0.9, 0.6])
    host = Host(ncpus=ncpus, cpu_flops=GFLOPS, gpus=gpus, on=Availability(draw(frac), 3600),
                active=Availability(draw(frac), 1800), gpu_active=Availability(draw(frac), 1800))
    projects = []
    for i in range(draw(st.integers(1, 3))):
        hours = draw(st.sampled_from([0.3, 1.0, 2.5, 6.0]))
        versions = [AppVersion(avg_ncpus=1.0, flops=GFLOPS)]
        if ngpu and draw(st.booleans()):
            versions.append(AppVersion(avg_ncpus=0.5, flops=10 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0))
        app = App(name="a", versions=tuple(versions), fpops_est=hours * 3600 * GFLOPS,
                  fpops_std_dev=hours * 360 * GFLOPS, latency_bound=draw(st.sampled_from([0.5, 1.0, 3.0])) * 86400,
                  checkpoint_period=draw(st.sampled_from([0.0, 300.0])), resume_cost=draw(st.sampled_from([0.0, 60.0])))
        projects.append(Project(name=f"P{i}", resource_share=draw(st.sampled_from([50.0, 100.0, 300.0])),
                                apps=(app,), available=Availability(draw(frac), 3600)))
    prefs = Prefs(work_buf_min_days=draw(st.sampled_from([0.05, 0.2])), work_buf_additional_days=0.2,
                  cpu_scheduling_period_minutes=draw(st.sampled_from([30.0, 60.0])),
                  leave_apps_in_memory=draw(st.booleans()))
    return Scenario(host=host, projects=tuple(projects), prefs=prefs, name="random")


def _overlaps(intervals):
    intervals = sorted(intervals)
    return any(b[0] < a[1] - 1e-6 for a, b in zip(intervals, intervals[1:]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios(), policy=st.sampled_from(["boinc7", "boinc5", "wrr", "fifo"]),
       compat=st.sampled_from(["intended", "bce"]), seed=st.integers(1, 1000))
def test_random_scenarios_keep_the_invariants(s, policy, compat, seed):
    em = Emulator(s, get_policy(policy), duration=86400, delta=60, seed=seed, compat=compat,
                  existing_jobs_only=False, policy_name=policy)
    result = em.run()
    by_job = defaultdict(list)
    by_instance = defaultdict(list)
    for sl in result.slices:
        assert sl.end > sl.start
        by_job[sl.job].append((sl.start, sl.end))
        by_instance[(sl.resource, sl.instance)].append((sl.start, sl.end))
    # no job on two instances at once
    assert not any(_overlaps(v) for v in by_job.values())
    # no instance over-committed: every app uses one whole CPU or one whole GPU
    assert not any(_overlaps(v) for v in by_instance.values())
    for resource, instance in by_instance:
        limit = s.n_usable_cpus if resource == "cpu" else s.host.gpus[0].count
        assert 0 <= instance < limit
    # computed work is conserved: finished sizes + work in progress + work lost to preemption
    for p in em.projects:
        jobs = [j for j in em.all_jobs if j.project is p]
        finished = sum(j.size for j in jobs if j.state == FINISHED or j.completed_time is not None)
        in_progress = sum(j.done for j in jobs if j.completed_time is None)
        assert abs(p.flops_computed - (finished + in_progress + p.flops_lost)) <= 1e-6 * max(1.0, p.flops_computed)
    # peak FLOPs used never exceed the host's capacity over the run
    assert result.figures.idle_fraction >= 0.0
    total_used = sum(p.flops_used for p in result.projects)
    capacity = sum(r["peak_flops"] for r in result.resources.values()) * result.duration
    assert total_used <= capacity * (1 + 1e-9)
    if compat == "bce":
        # BOINC's emulator preempts for free (reference/client.md §9.8)
        assert all(p.flops_lost == 0 for p in em.projects)
