"""Determinism per seed, and invariants on random scenarios (hypothesis)."""

import math
import os
from collections import defaultdict

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from scheduling.engine import get_policy, load_scenario, run
from scheduling.engine.emulator import Emulator

from .helpers import GFLOPS, App, AppVersion, Availability, GpuType, Host, InitialJob, Prefs, Project, Scenario

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
    host = Host(
        ncpus=ncpus,
        cpu_flops=GFLOPS,
        gpus=gpus,
        on=Availability(draw(frac), 3600),
        active=Availability(draw(frac), 1800),
        gpu_active=Availability(draw(frac), 1800),
    )
    projects = []
    for i in range(draw(st.integers(1, 3))):
        hours = draw(st.sampled_from([0.3, 1.0, 2.5, 6.0]))
        versions = [AppVersion(avg_ncpus=1.0, flops=GFLOPS)]
        if ngpu and draw(st.booleans()):
            versions.append(
                AppVersion(
                    avg_ncpus=draw(st.sampled_from([0.2, 0.5, 1.0])),
                    flops=10 * GFLOPS,
                    gpu_type="NVIDIA",
                    gpu_usage=draw(st.sampled_from([1.0, 0.5])),
                )
            )
        app = App(
            name="a",
            versions=tuple(versions),
            fpops_est=hours * 3600 * GFLOPS,
            fpops_std_dev=hours * 360 * GFLOPS,
            latency_bound=draw(st.sampled_from([0.5, 1.0, 3.0])) * 86400,
            checkpoint_period=draw(st.sampled_from([0.0, 300.0])),
            resume_cost=draw(st.sampled_from([0.0, 60.0])),
        )
        projects.append(
            Project(
                name=f"P{i}",
                resource_share=draw(st.sampled_from([50.0, 100.0, 300.0])),
                apps=(app,),
                available=Availability(draw(frac), 3600),
            )
        )
    prefs = Prefs(
        work_buf_min_days=draw(st.sampled_from([0.05, 0.2])),
        work_buf_additional_days=0.2,
        cpu_scheduling_period_minutes=draw(st.sampled_from([30.0, 60.0])),
        leave_apps_in_memory=draw(st.booleans()),
    )
    return Scenario(host=host, projects=tuple(projects), prefs=prefs, name="random")


def _overlaps(intervals):
    intervals = sorted(intervals)
    return any(b[0] < a[1] - 1e-6 for a, b in zip(intervals, intervals[1:]))


def _pieces(slices, delta, cuts=()):
    """The run cut at every slice boundary, at the step after each slice end and at `cuts`:
    (start, end, slices running throughout, slices running at the last step at or before
    start)."""
    times = {t for sl in slices for t in (sl.start, sl.end)}
    times |= {math.ceil(sl.end / delta) * delta for sl in slices}
    times |= {t for t in cuts if times and min(times) < t < max(times)}
    times = sorted(times)
    for a, b in zip(times, times[1:]):
        g = math.floor(a / delta + 1e-9) * delta
        yield (
            a,
            b,
            [sl for sl in slices if sl.start <= a and sl.end >= b],
            [sl for sl in slices if sl.start <= g < sl.end],
        )


def _check_commitment(em, jobs, running):
    """enforce_run_list (reference/client.md §6.3): CPU jobs only while fewer than
    n_usable_cpus CPUs are used, GPU jobs while ncpus_used + avg_ncpus <= n_usable_cpus + 1,
    and a GPU instance never carries more than its whole."""
    n = em.n_usable_cpus
    cpu_jobs = [jobs[sl.job] for sl in running if sl.resource == "cpu"]
    gpu_jobs = [jobs[sl.job] for sl in running if sl.resource != "cpu"]
    assert len(cpu_jobs) <= n  # every CPU app here uses one whole CPU
    gpu_cpus = sum(j.avg_ncpus for j in gpu_jobs)
    # GPU jobs are placed first, each only if it fits under n + 1; a CPU job is then added
    # only while the CPUs in use are below n
    assert gpu_cpus <= n + 1 + 1e-9
    if cpu_jobs:
        assert gpu_cpus + len(cpu_jobs) - 1 < n + 1e-9
    load = defaultdict(float)
    for sl in running:
        if sl.resource != "cpu":
            load[(sl.resource, sl.instance)] += jobs[sl.job].gpu_usage
    assert all(u <= 1.0 + 1e-9 for u in load.values())


def _gpu_down(result, compat, delta):
    """The periods in which GPU jobs do not compute: the host off, computing or GPU computing
    suspended. BOINC's emulator accounts each step in the state sampled at its end, so under
    bce a GPU job keeps its slice but computes nothing from a step before such a period
    until a step before its end (docs/engine-fidelity.md)."""
    shift = delta if compat == "bce" else 0.0
    return [
        (max(0.0, h.start - shift), h.end - shift if h.end < result.duration else h.end)
        for h in result.host_periods
        if h.state in ("off", "not_active", "gpu_suspended")
    ]


def _cpu_scale(em, step_jobs, gpu_on=True):
    """The CPU throttle of the engine's rate rule (reference/client.md §3, cpu_scale): CPU
    jobs slowed when they and the CPU share of computing GPU jobs together exceed the usable
    CPUs. As in a fixed-step emulator it is set at each step for the jobs running then
    (`step_jobs`) and holds until the next step, even if one of them ends in between."""
    n = em.n_usable_cpus
    cpu = sum(k.avg_ncpus for k in step_jobs if k.rsc == 0)
    gpu_cpu = sum(k.avg_ncpus for k in step_jobs if k.rsc) if gpu_on else 0.0
    if cpu > 0 and cpu + gpu_cpu > n:
        return max(0.0, (n - gpu_cpu) / cpu)
    return 1.0


def _rate(em, j, step_jobs, gpu_on=True):
    """The FLOPS a running job computes at: the app version's FLOPS, none for a GPU job while
    GPUs do not compute, a CPU job's throttled by `_cpu_scale`."""
    if j.rsc:
        return j.flops if gpu_on else 0.0
    return j.flops * _cpu_scale(em, step_jobs, gpu_on)


# a fixed seed: the same 100 hosts on every run, so that a failure is the change's and not the draw's
# (about 20 s of CPU; derandomize=True would draw from a hash of this function's source, new hosts
# at each reformat). Other seeds draw fresh hosts; they found two engine faults, pinned by
# hand-written tests: a remainder of a few ulps kept a finished job running for a step
# (test_a_job_that_ends_on_a_step_leaves_that_step_whatever_the_rounding) and, under bce, a host
# change due at the run's end shifted the last step's accounting into a state no record shows
# (test_bce_fidelity.py). They also found this test's own model behind the engine's bce rules
# (a finished job's step charged whole, a GPU job's CPU part throttled); seeds 1, 2, 3 and 69
# pass since.
@seed(20261125)
@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    s=scenarios(),
    policy=st.sampled_from(["boinc7", "boinc5", "wrr", "fifo"]),
    compat=st.sampled_from(["intended", "bce"]),
    seed=st.integers(1, 1000),
)
def test_random_scenarios_keep_the_invariants(s, policy, compat, seed):
    em = Emulator(
        s,
        get_policy(policy),
        duration=86400,
        delta=60,
        seed=seed,
        compat=compat,
        existing_jobs_only=False,
        policy_name=policy,
    )
    result = em.run()
    jobs = {j.name: j for j in em.all_jobs}
    by_job = defaultdict(list)
    by_instance = defaultdict(list)
    for sl in result.slices:
        assert sl.end > sl.start
        by_job[sl.job].append((sl.start, sl.end))
        if sl.resource == "cpu":
            by_instance[sl.instance].append((sl.start, sl.end))
            assert 0 <= sl.instance < s.n_usable_cpus
        else:
            assert 0 <= sl.instance < s.host.gpus[0].count
    # no job on two instances at once, no CPU on two jobs at once
    assert not any(_overlaps(v) for v in by_job.values())
    assert not any(_overlaps(v) for v in by_instance.values())
    # computed work from the slices alone: each piece of time at the job's rate
    computed = defaultdict(float)
    peak_used = defaultdict(float)
    resume = defaultdict(float)  # the most a resume cost can have held back
    down = _gpu_down(result, compat, em.delta)
    # under bce the step in which a job ends is charged whole, peak FLOPs and all
    # (docs/engine-fidelity.md, "The step in which a job ends is charged whole"): a finished
    # job's last slice is charged until the step after its end, but computes nothing there
    last = {}
    for sl in result.slices:
        if jobs[sl.job].completed_time is not None and (sl.job not in last or sl.end > last[sl.job].end):
            last[sl.job] = sl
    for a, b, running, at_step in _pieces(result.slices, em.delta, [t for d in down for t in d]):
        _check_commitment(em, jobs, running)
        step_jobs = [jobs[sl.job] for sl in at_step]
        gpu_on = not any(lo <= a < hi for lo, hi in down)
        ended = []
        if compat == "bce":
            ended = [sl for sl in last.values() if sl.end <= a and b <= math.ceil(sl.end / em.delta) * em.delta]
        for sl in running + ended:
            j = jobs[sl.job]
            rate = _rate(em, j, step_jobs, gpu_on)
            if sl in running:
                computed[j.project.name] += (b - a) * rate
            if rate <= 0:
                continue
            gpu = j.gpu_usage * em.resources[j.rsc].relative_speed if j.rsc else 0.0
            # under bce the CPU part of a GPU job's peak FLOPs is throttled too, as BOINC's
            # emulator scales every job's (app_peak_flops in ACTIVE_TASK_SET::poll)
            cpu = j.avg_ncpus * (rate / j.flops if j.rsc == 0 else 1.0)
            if j.rsc and compat == "bce":
                cpu = j.avg_ncpus * _cpu_scale(em, step_jobs, gpu_on)
            peak_used[j.project.name] += (b - a) * (cpu + gpu) * em.cpu_flops
    for sl in result.slices:
        j = jobs[sl.job]
        resume[sl.project] += j.app.resume_cost * j.flops
    # ... is the work finished, in progress and lost to preemption (work conserved)
    for p in em.projects:
        own = [j for j in em.all_jobs if j.project is p]
        finished = sum(j.size for j in own if j.completed_time is not None)
        in_progress = sum(j.done for j in own if j.completed_time is None)
        accounted = finished + in_progress + p.flops_lost
        tol = 1e-6 * max(GFLOPS, accounted)
        assert accounted <= computed[p.name] + tol
        assert accounted >= computed[p.name] - resume[p.name] - tol
        if compat == "bce" or all(a.resume_cost == 0 for a in p.spec.apps):
            assert abs(accounted - computed[p.name]) <= tol
        assert abs(p.flops_used - peak_used[p.name]) <= 1e-6 * max(GFLOPS, p.flops_used)
    total_used = sum(p.flops_used for p in result.projects)
    capacity = sum(r["peak_flops"] for r in result.resources.values()) * result.duration
    assert total_used <= capacity * (1 + 1e-9)
    if compat == "bce":
        # BOINC's emulator preempts for free (reference/client.md §9.8)
        assert all(p.flops_lost == 0 for p in em.projects)


def cpu_job_beside_a_gpu_job(k, gpu_cpus):
    # one CPU; a GPU job that outlasts the run needs `gpu_cpus` of it, so cpu_scale slows the
    # CPU job c1 to 1 - gpu_cpus GFLOPS; c1's size is k steps of that; c2 waits behind it
    gpu_app = App(
        name="g",
        versions=(AppVersion(avg_ncpus=gpu_cpus, flops=10 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        latency_bound=10 * 86400.0,
        fpops_est=100 * 3600 * 10 * GFLOPS,
    )
    g = InitialJob(
        name="g", app="g", fpops=100 * 3600 * 10 * GFLOPS, fpops_est=100 * 3600 * 10 * GFLOPS, deadline=10 * 86400.0
    )
    size = (1.0 - gpu_cpus) * 60 * k * GFLOPS
    # c1 arrived first, so it runs first in both modes (BOINC orders results by arrival, then
    # by the MD5 of their names, which would put c2 first)
    c1 = InitialJob(name="c1", app="a", fpops=size, fpops_est=size, deadline=10 * 86400.0, received=-120.0)
    c2 = InitialJob(
        name="c2", app="a", fpops=5 * 3600 * GFLOPS, fpops_est=5 * 3600 * GFLOPS, deadline=10 * 86400.0, received=-60.0
    )
    cpu = App(
        name="a",
        versions=(AppVersion(avg_ncpus=1.0, flops=GFLOPS),),
        latency_bound=10 * 86400.0,
        fpops_est=3600 * GFLOPS,
    )
    host = Host(ncpus=1, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, 50 * GFLOPS),))
    return Scenario(
        host=host,
        projects=(
            Project(name="C", resource_share=100.0, apps=(cpu,), jobs=(c1, c2)),
            Project(name="G", resource_share=100.0, apps=(gpu_app,), jobs=(g,)),
        ),
        prefs=Prefs(),
        name="test",
    )


def bce_end_step(k, gpu_cpus):
    """The step at which BOINC's emulator finds c1 done: it takes each step's work off the
    FLOPs left (ACTIVE_TASK_SET::poll, sim.cpp) until they are 0 or below, at cpu_scale
    (1 - gpu_cpus) / ((1 + gpu_cpus) - gpu_cpus)."""
    scale = (1.0 - gpu_cpus) / ((1.0 + gpu_cpus) - gpu_cpus)
    left = (1.0 - gpu_cpus) * 60 * k * GFLOPS
    steps = 0
    while left > 0:
        left -= 60.0 * (GFLOPS * scale)
        steps += 1
    return steps


def test_a_job_that_ends_on_a_step_leaves_that_step_whatever_the_rounding():
    # Summing a slowed rate step by step leaves a remainder of a few ulps on some sizes
    # (0.7 GFLOPS x 60 s, six times, is not 6 x 42 GFLOP in floating point). Under bce the
    # job ends where BOINC's emulator ends it: at the step whose subtraction takes its FLOPs
    # left to 0 or below, one step late when a few ulps remain (docs/engine-fidelity.md,
    # "FLOPs left, step by step"); it leaves that step's cpu_scale and its CPU, and c2
    # starts there. Before, the engine's sum of rate x time ended it a step early on some
    # sizes, or left it "running" for one more step with its slice a hair after the step,
    # the CPU idle and the other jobs slowed for a job that computed nothing (found by the
    # random-host test above with fresh draws).
    late = 0
    for gpu_cpus in (0.3, 0.7):
        for k in range(1, 16):
            em = Emulator(
                cpu_job_beside_a_gpu_job(k, gpu_cpus),
                get_policy("boinc7"),
                duration=3 * 3600,
                delta=60,
                seed=1,
                compat="bce",
                existing_jobs_only=True,
                policy_name="boinc7",
                fixed_step=True,
            )
            result = em.run()
            c1_end = max(s.end for s in result.slices if s.job == "c1")
            c2_start = min(s.start for s in result.slices if s.job == "c2")
            m = bce_end_step(k, gpu_cpus)
            late += m > k
            assert m in (k, k + 1), (gpu_cpus, k)
            assert c2_start == 60 * m, (gpu_cpus, k)
            assert 60 * (m - 1) <= c1_end <= c2_start, (gpu_cpus, k)
    assert late  # some sizes do end a step late
