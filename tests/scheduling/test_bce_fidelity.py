"""Rules of BOINC's client that `--compat bce` follows where the engine once departed from
BOINC's emulator (issue 12, docs/engine-fidelity.md). Each expectation is derived from the
rule on a small hand-written scenario, not copied from an emulator run."""

import os
import types

import pytest

from scheduling.engine import read_pcdr, rr_snapshot, run
from scheduling.engine.cpu_sched import enforce, make_run_list

from .helpers import (
    GFLOPS,
    HOUR,
    App,
    AppVersion,
    Availability,
    GpuType,
    Host,
    InitialJob,
    Prefs,
    boinc7_emulator,
    cpu_app,
    job,
    project,
    scenario,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def urgent_work_behind_a_running_job():
    # One CPU. "busy" runs a 1-hour job; "urgent" has 6-minute jobs due within an hour,
    # shorter than the 2.4-hour minimum buffer, so every urgent job is a predicted deadline
    # miss as soon as a round-robin simulation sees it (reference/client.md §6.4). At 0 s
    # the buffer (1 h) is below its minimum and urgent, with no queued work, has the higher
    # fetch priority, so it is asked for work at 0 s.
    prefs = Prefs(work_buf_min_days=0.1, work_buf_additional_days=0.0)
    return scenario(
        project("busy", [job("b1", hours=1.0)], share=100),
        project("urgent", apps=(cpu_app(hours=0.1, latency=HOUR),), share=100),
        ncpus=1,
        prefs=prefs,
    )


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


def gpu_job_on_an_intermittent_gpu():
    # one GPU job that outlasts the run, on a GPU allowed half of the time in periods of an
    # hour on average; nothing else runs
    gpu_app = App(
        name="g",
        versions=(AppVersion(avg_ncpus=0.1, flops=10 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        latency_bound=100 * 86400.0,
        fpops_est=1000 * HOUR * 10 * GFLOPS,
    )
    big = InitialJob(
        name="g1", app="g", fpops=1000 * HOUR * 10 * GFLOPS, fpops_est=1000 * HOUR * 10 * GFLOPS, deadline=100 * 86400.0
    )
    host = Host(
        ncpus=1, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, 50 * GFLOPS),), gpu_active=Availability(0.5, HOUR)
    )
    return scenario(project("G", [big], apps=(gpu_app,)), host=host)


def emulate(s, compat, duration):
    em = boinc7_emulator(s, compat, duration=duration, seed=3, existing_jobs_only=True)
    return em, em.run()


def test_under_bce_a_gpu_job_restarts_a_step_after_the_gpu_is_allowed_and_each_step_counts_its_end_state():
    # sim.cpp sets gpu_suspend_reason after the step's schedule, so GPU jobs start on the
    # step after GPU computing is allowed again; and poll() accounts the step that just
    # ended with the state sampled at its end. A GPU period [b, a) (b: allowed again, a:
    # suspended again) thus computes from b + 60 to a - 60, while all of it counts as GPU
    # active time: 120 s of idle GPU per period.
    em, result = emulate(gpu_job_on_an_intermittent_gpu(), "bce", 2 * 86400.0)
    suspended = sorted((h.start, h.end) for h in result.host_periods if h.state == "gpu_suspended")
    assert len(suspended) >= 5
    starts = sorted(s.start for s in result.slices)
    ends = [b for _a, b in suspended if b < em.duration]
    assert all(b + 60 in starts for b in ends)
    allowed = []
    t = 0.0
    for a, b in suspended:
        if a > t:
            allowed.append((t, a))
        t = b
    if t < em.duration:
        allowed.append((t, em.duration))
    computing = 0.0
    for b, a in allowed:
        start = b if b == 0.0 else b + 60  # the run starts with the GPU allowed
        end = a if a == em.duration else a - 60
        computing += max(0.0, end - start)
    job = em.all_jobs[0]
    assert job.done == pytest.approx(computing * 10 * GFLOPS)
    # each step counts as GPU active time when the GPU is allowed at its end: the periods
    # shifted one step earlier, within the run
    shifted = [(max(0.0, b - 60), a if a == em.duration else a - 60) for b, a in allowed]
    assert em.gpu_active_time == pytest.approx(sum(a - b for b, a in shifted))


def test_intended_runs_a_gpu_job_whenever_the_gpu_is_allowed():
    em, result = emulate(gpu_job_on_an_intermittent_gpu(), "intended", 2 * 86400.0)
    suspended = [(h.start, h.end) for h in result.host_periods if h.state == "gpu_suspended"]
    allowed_time = em.duration - sum(b - a for a, b in suspended)
    assert em.all_jobs[0].done == pytest.approx(allowed_time * 10 * GFLOPS)


def cpu_project_on_a_gpu_host(**kw):
    host = Host(ncpus=1, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, 50 * GFLOPS),))
    return scenario(project("C", **kw), host=host)


def test_under_bce_a_cpu_only_project_is_asked_for_gpu_work_and_backed_off():
    # compute_rsc_project_reason has no "no app version" reason of its own: only
    # <no_rsc_apps> keeps BOINC's emulator from asking a project for a processor type
    result = run(cpu_project_on_a_gpu_host(), compat="bce", duration=HOUR)
    first = result.rpcs[0]
    assert set(first.requests) == {"cpu", "NVIDIA"}
    assert set(first.jobs_received) == {"cpu"}
    assert any("backed off NVIDIA" in d.text for d in result.decisions if d.kind == "backoff")


def test_no_rsc_apps_and_intended_keep_the_gpu_out_of_the_request():
    listed = run(cpu_project_on_a_gpu_host(no_rsc_apps=("NVIDIA",)), compat="bce", duration=HOUR)
    intended = run(cpu_project_on_a_gpu_host(), compat="intended", duration=HOUR)
    assert set(listed.rpcs[0].requests) == {"cpu"}
    assert set(intended.rpcs[0].requests) == {"cpu"}


def twenty_equal_projects():
    return scenario(*(project(f"P{i:02d}", share=100) for i in range(20)), ncpus=4)


def test_under_bce_the_first_of_equal_projects_asked_for_work_is_the_one_std_sort_puts_first():
    # at the start every project has REC 0 and no job, so all priorities are equal and
    # WORK_FETCH::setup's std::sort leaves P10 first (see test_stdsort)
    assert run(twenty_equal_projects(), compat="bce", duration=HOUR).rpcs[0].project == "P10"
    assert run(twenty_equal_projects(), compat="intended", duration=HOUR).rpcs[0].project == "P00"


def test_under_bce_max_concurrent_from_the_state_file_limits_nothing():
    # check_app_config() clears APP::max_concurrent of every project without an
    # app_config.xml, so both jobs run at once on the two CPUs; intended honours the limit
    s = scenario(project("M", [job("m1"), job("m2")], apps=(cpu_app(max_concurrent=1),)), ncpus=2)
    bce = run(s, compat="bce", duration=HOUR / 2, existing_jobs_only=True)
    intended = run(s, compat="intended", duration=HOUR / 2, existing_jobs_only=True)
    assert sorted(sl.start for sl in bce.slices) == [0.0, 0.0]
    assert [sl.start for sl in intended.slices] == [0.0]


def mt_and_single_thread_jobs():
    # four CPUs and one project whose jobs arrived in this order: a 3-CPU job, five 1-CPU
    # jobs, a 4-CPU job, all due in ten days (no deadline pressure)
    apps = (
        App(
            name="mt3",
            versions=(AppVersion(avg_ncpus=3.0, flops=3 * GFLOPS),),
            latency_bound=10 * 86400.0,
            fpops_est=3 * HOUR * GFLOPS,
        ),
        App(
            name="mt4",
            versions=(AppVersion(avg_ncpus=4.0, flops=4 * GFLOPS),),
            latency_bound=10 * 86400.0,
            fpops_est=4 * HOUR * GFLOPS,
        ),
        cpu_app("st"),
    )
    sized = {"mt3": 3.0, "mt4": 4.0, "st": 1.0}
    jobs = [("m3", "mt3")] + [(f"s{i}", "st") for i in range(5)] + [("m4", "mt4")]
    initial = [
        InitialJob(
            name=n, app=a, fpops=sized[a] * HOUR * GFLOPS, fpops_est=sized[a] * HOUR * GFLOPS, deadline=10 * 86400.0
        )
        for n, a in jobs
    ]
    return scenario(project("P", initial, apps=apps), ncpus=4)


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_the_run_list_counts_single_and_multi_thread_cpus_apart(compat):
    # stop_scan_cpu stops the CPU scan when the 1-CPU jobs or the multi-thread jobs reach
    # twice the CPUs (8), each on its own: after m3 (3) and s0-s4 (5) neither has, so m4 is
    # listed too, and enforce_run_list puts the job with more CPUs first: m4 takes the four
    # CPUs. Counted together (3 + 5 = 8) the scan would stop before m4, and m3 with one
    # 1-CPU job would run instead.
    result = run(mt_and_single_thread_jobs(), compat=compat, duration=HOUR / 2, existing_jobs_only=True)
    assert sorted(s.job for s in result.slices) == ["m4"]


def gpu_jobs_on_a_suspended_gpu(gpu_active):
    # one CPU, two GPUs allowed (or never allowed) to compute; project "G" has two GPU jobs
    # each needing a whole CPU, project "C" one CPU job
    gpu_app = App(
        name="g",
        versions=(AppVersion(avg_ncpus=1.0, flops=10 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        latency_bound=10 * 86400.0,
        fpops_est=10 * HOUR * GFLOPS,
    )
    gjobs = [
        InitialJob(name=f"g{i}", app="g", fpops=10 * HOUR * GFLOPS, fpops_est=10 * HOUR * GFLOPS, deadline=10 * 86400.0)
        for i in range(2)
    ]
    host = Host(
        ncpus=1, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 2, 50 * GFLOPS),), gpu_active=Availability(gpu_active, HOUR)
    )
    return scenario(project("C", [job("c1", hours=4.0)]), project("G", gjobs, apps=(gpu_app,)), host=host)


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_a_suspended_gpus_jobs_take_no_place_in_the_cpu_run_list(compat):
    # PROC_RESOURCES::can_schedule refuses GPU jobs while GPU computing is suspended, so
    # they are not in the run list and the CPU job is; had the two GPU jobs' CPU shares
    # (2 = twice the CPUs) been counted, no CPU job would be listed and the CPU would idle.
    # Under bce the first step still sees the GPUs allowed (gpu_suspend_reason is set after
    # the step's schedule), so the CPU job starts at the next step.
    result = run(gpu_jobs_on_a_suspended_gpu(0.0), compat=compat, duration=HOUR, existing_jobs_only=True)
    c1 = [s for s in result.slices if s.job == "c1"]
    assert c1 and c1[0].start == (60.0 if compat == "bce" else 0.0)
    assert c1[-1].end == HOUR


def intermittent_host():
    # a host on half of the time and, while on, active half of the time, both in periods of
    # an hour on average
    host = Host(ncpus=1, cpu_flops=GFLOPS, on=Availability(0.5, HOUR), active=Availability(0.5, HOUR))
    return scenario(project("P"), host=host)


def activity_flips_across_off_periods(result, duration):
    """How many off periods the host leaves in another active state than it entered them."""
    offs = [(h.start, h.end) for h in result.host_periods if h.state == "off"]
    inactive = [(h.start, h.end) for h in result.host_periods if h.state == "not_active"]
    ended = {e for _s, e in inactive}
    started = {s for s, _e in inactive}
    inner = [(s, e) for s, e in offs if 0 < s and e < duration]
    return len(inner), sum((s in ended) != (e in started) for s, e in inner)


def test_under_bce_the_active_process_stands_still_while_the_host_is_off():
    # simulate() samples the active process only in steps where the host is on: its
    # periods are measured in on-time, so an off period changes whether the host is active
    # only when the change fell due in the step the host went off (it then happens at the
    # first step on): about one off period in 60 (a 60 s step against hour-long periods).
    # In real time (intended) the active process goes on while the host is off, and about
    # a third of the off periods, as long on average as an active period, end in the other
    # state.
    duration = 20 * 86400.0
    n, flips = activity_flips_across_off_periods(run(intermittent_host(), compat="bce", duration=duration), duration)
    assert n > 100 and flips <= 0.05 * n
    n, flips = activity_flips_across_off_periods(
        run(intermittent_host(), compat="intended", duration=duration), duration
    )
    assert n > 100 and 0.2 * n < flips < 0.6 * n


def test_under_bce_a_held_gpu_job_counts_elapsed_time_once_and_a_computing_one_twice():
    # simulate() adds a step to the elapsed time of every executing task at the end of
    # each step, and poll() another one to each task that computed in it: a GPU job that
    # stays on its device for the step after the GPUs are suspended gets one step per such
    # step, and two per step it computes (reference/client.md §9.2)
    em, result = emulate(gpu_job_on_an_intermittent_gpu(), "bce", 2 * 86400.0)
    job = em.all_jobs[0]
    held = sum(s.end - s.start for s in result.slices)
    computing = job.done / (10 * GFLOPS)
    assert held > computing + 5 * 60  # at least five suspensions, each with a held step
    assert job.elapsed == pytest.approx(held + computing)


def gpu_jobs_on_a_half_active_host():
    # one CPU and one GPU, the host always on, active half of the time, the GPU allowed
    # whenever the host is active; two 1-hour GPU jobs queued
    gpu_app = App(
        name="g",
        versions=(AppVersion(avg_ncpus=0.1, flops=10 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        latency_bound=10 * 86400.0,
        fpops_est=HOUR * 10 * GFLOPS,
    )
    jobs = [
        InitialJob(name=f"g{i}", app="g", fpops=HOUR * 10 * GFLOPS, fpops_est=HOUR * 10 * GFLOPS, deadline=10 * 86400.0)
        for i in range(2)
    ]
    host = Host(ncpus=1, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, 50 * GFLOPS),), active=Availability(0.5, HOUR))
    return scenario(project("G", jobs, apps=(gpu_app,)), host=host)


def test_under_bce_the_gpus_availability_leaves_the_active_fraction_out():
    # overall_gpu_frac() is on_frac x gpu_active_frac: 1 x 1 here, so the round-robin
    # simulation runs the two GPU hours in two hours of GPU time. The intended model counts
    # the active fraction too: GPU work runs only while the host is active, 4 hours.
    s = gpu_jobs_on_a_half_active_host()
    bce = rr_snapshot(s, compat="bce")["resources"]["NVIDIA"]["saturated_time"]
    intended = rr_snapshot(s, compat="intended")["resources"]["NVIDIA"]["saturated_time"]
    assert bce == pytest.approx(2 * HOUR, rel=0.02)
    assert intended == pytest.approx(4 * HOUR, rel=0.02)


def test_under_bce_a_gpu_suspension_due_at_the_end_of_the_run_leaves_the_last_step_computing():
    # The step before a change of the host's state is accounted in the changed state (see
    # above). A change due exactly at the end of the run opens no period in the records
    # (HostPeriod), so the last step is accounted in the state they show: the GPU job
    # computes through it, and the work credited to it is its slice's at full speed.
    _em, whole = emulate(gpu_job_on_an_intermittent_gpu(), "bce", 2 * 86400.0)
    first = min(h.start for h in whole.host_periods if h.state == "gpu_suspended")
    em, result = emulate(gpu_job_on_an_intermittent_gpu(), "bce", first)
    assert not [h for h in result.host_periods if h.state == "gpu_suspended"]
    computing = sum(s.end - s.start for s in result.slices)
    assert computing == first
    assert em.all_jobs[0].done == pytest.approx(computing * 10 * GFLOPS)


def one_job_per_gpu_type(gpu_order):
    # one CPU; an NVIDIA and an ATI GPU; projects "A" (listed first) and "N" each have one
    # GPU job that needs 1.5 CPUs, so only one of the two fits under ncpus + 1 = 2
    def gpu_project(name, vendor):
        app = App(
            name="g",
            versions=(AppVersion(avg_ncpus=1.5, flops=10 * GFLOPS, gpu_type=vendor, gpu_usage=1.0),),
            latency_bound=10 * 86400.0,
            fpops_est=10 * HOUR * GFLOPS,
        )
        jobs = [
            InitialJob(
                name=name.lower(),
                app="g",
                fpops=10 * HOUR * GFLOPS,
                fpops_est=10 * HOUR * GFLOPS,
                deadline=10 * 86400.0,
            )
        ]
        return project(name, jobs, apps=(app,))

    gpus = {"NVIDIA": GpuType("NVIDIA", 1, 50 * GFLOPS), "ATI": GpuType("ATI", 1, 50 * GFLOPS)}
    host = Host(ncpus=1, cpu_flops=GFLOPS, gpus=tuple(gpus[v] for v in gpu_order))
    return scenario(gpu_project("A", "ATI"), gpu_project("N", "NVIDIA"), host=host)


@pytest.mark.parametrize("compat", ["bce", "intended"])
@pytest.mark.parametrize("gpu_order", [("NVIDIA", "ATI"), ("ATI", "NVIDIA")])
def test_the_run_list_takes_gpu_types_in_index_order(compat, gpu_order):
    # make_run_list calls add_coproc_jobs for GPU types 1, 2, ... in order, and the run-list
    # position (seqno) is enforce_run_list's last tie-break: both jobs are neither EDF nor in
    # a time slice, so the first GPU type's job takes the CPUs and the other cannot start
    result = run(one_job_per_gpu_type(gpu_order), compat=compat, duration=HOUR / 2, existing_jobs_only=True)
    first = "n" if gpu_order[0] == "NVIDIA" else "a"
    assert {s.job for s in result.slices} == {first}


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_a_report_asks_for_work_of_a_resource_the_project_is_backed_off_for(compat):
    # piggyback_work_request goes on for a resource whose compute_rsc_project_reason is
    # RSC_REASON_BACKED_OFF: the back-off keeps the project from being chosen for a work
    # fetch, but an RPC it makes to report results still tops up the buffer. One 1-hour job
    # on two CPUs leaves a CPU idle, so the CPU buffer is below work_buf_total.
    from scheduling.engine import work_fetch

    em = boinc7_emulator(
        scenario(project("P", [job("a", hours=1.0)]), ncpus=2), compat, duration=HOUR, existing_jobs_only=True
    )
    p = em.projects[0]
    p.backoff_time[0] = 1000.0
    p.backoff_interval[0] = 600.0
    rr = em.rr()
    assert work_fetch.rsc_reason(em, p, 0, 0.0, rr) == work_fetch.REASON_BACKED_OFF
    secs, inst = work_fetch.piggyback(em, p, 0.0, rr)[0]
    assert secs > 0 and inst == pytest.approx(1.0)
    # any other reason still stops it: here, no app version for the resource
    p.fetch_ok[0] = False
    assert work_fetch.piggyback(em, p, 0.0, rr) == {}


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_a_project_that_would_ask_for_nothing_gives_the_work_fetch_to_the_next_one(compat):
    # WORK_FETCH::choose_project scans the processor types in index order, CPU first, and
    # stops at the first one whose buffer is below the minimum. A backup project (share 0)
    # asks for one job per idle instance only; when the trigger type has none idle and it
    # may ask for no other type, it asks for no seconds and the scan goes on to the next
    # project. Two CPUs busy with 2-minute jobs of backup project A (saturated 120 s, under
    # the 180 s at which a backup project may fetch, and the 864 s minimum buffer); the GPU
    # is idle. C (share 100, so that the backup projects' priorities are -1000 less their
    # REC fraction) is backed off for both types and is passed over. A, CPU-only, comes
    # next (B has the larger REC), triggers on the CPU and asks for nothing; B, with a GPU
    # app, triggers on the CPU too, asks for no CPU time, and its GPU request, the GPU's
    # buffer being empty, is one job for the idle instance.
    from scheduling.engine import work_fetch

    host = Host(ncpus=2, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, 50 * GFLOPS),))
    gpu_app = App(
        name="g",
        versions=(AppVersion(avg_ncpus=0.5, flops=20 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        latency_bound=10 * 86400.0,
        fpops_est=HOUR * 20 * GFLOPS,
    )
    a = project(
        "A",
        [job("a1", hours=2 / 60), job("a2", hours=2 / 60)],
        share=0.0,
        **({"no_rsc_apps": ("NVIDIA",)} if compat == "bce" else {}),
    )
    b = project("B", share=0.0, apps=(cpu_app(), gpu_app))
    c = project("C", share=100.0, apps=(cpu_app(), gpu_app))
    prefs = Prefs(work_buf_min_days=0.01, work_buf_additional_days=0.01)
    em = boinc7_emulator(scenario(a, b, c, host=host, prefs=prefs), compat, duration=HOUR, existing_jobs_only=True)
    pa, pb, pc = em.projects
    pb.rec = 1.0
    pc.backoff_time[:] = [1000.0, 1000.0]
    rr = em.rr()
    assert [p.name for p in work_fetch.fetch_priorities(em, 0.0)] == ["C", "A", "B"]
    assert rr.rsc[0].saturated_time == pytest.approx(120.0) and rr.rsc[0].nidle_now == 0
    assert work_fetch.set_request(em, pa, 0, rr, 0.0) == (0.0, 0.0)
    plan = work_fetch.choose_project(em, 0.0, rr)
    assert plan is not None and plan.project is pb
    assert plan.requests == {1: (1.0, 1.0)}


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_under_bce_a_gpu_jobs_cpu_part_of_its_peak_flops_is_scaled_with_the_cpu_jobs(compat):
    # ACTIVE_TASK_SET::poll (sim.cpp) counts each job's peak FLOPs as app_peak_flops(rp,
    # cpu_scale): avg_ncpus x cpu_scale plus the GPU part, GPU jobs' CPU part included. One
    # CPU, one GPU: a GPU job taking half a CPU runs first (GPU before CPU), the CPU job
    # beside it (0.5 CPU used < 1), so 1.5 CPUs are asked of one and cpu_scale is
    # (1 - 0.5) / 1 = 0.5. In an hour the CPU job is charged 0.5 CPU-hours either way; the
    # GPU job 0.5 x 0.5 CPU-hours under bce, its whole 0.5 under intended.
    host = Host(ncpus=1, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, 50 * GFLOPS),))
    gpu_app = App(
        name="g",
        versions=(AppVersion(avg_ncpus=0.5, flops=10 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        latency_bound=10 * 86400.0,
        fpops_est=100 * HOUR * 10 * GFLOPS,
    )
    big = 100 * HOUR * 10 * GFLOPS
    s = scenario(
        project(
            "P",
            [job("c", hours=100), InitialJob(name="g1", app="g", fpops=big, fpops_est=big, deadline=10 * 86400.0)],
            apps=(cpu_app(hours=100), gpu_app),
        ),
        host=host,
    )
    em = boinc7_emulator(s, compat, duration=HOUR, existing_jobs_only=True)
    em.run()
    cpu_job, gpu_job = sorted(em.all_jobs, key=lambda j: j.rsc)
    assert em.cpu_scale == pytest.approx(0.5)
    assert cpu_job.peak_flop_count == pytest.approx(0.5 * GFLOPS * HOUR)
    rel = em.resources[1].relative_speed
    cpu_part = 0.25 if compat == "bce" else 0.5
    assert gpu_job.peak_flop_count == pytest.approx((cpu_part + rel) * GFLOPS * HOUR)


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_under_bce_the_step_in_which_a_job_ends_is_charged_whole(compat):
    # ACTIVE_TASK_SET::poll (sim.cpp) charges every executing job diff x app_peak_flops and
    # diff of elapsed time for the step it accounts, and only then finds its FLOPs used up:
    # the step in which a job ends counts as used in full, and its CPU takes no other job
    # before the next step either way. A 90-second job on one CPU from 0 s ends in the step
    # [60, 120]: under bce 120 s of peak FLOPs and, elapsed time counting twice, 240 s of
    # elapsed time; intended counts the 90 s it computed.
    s = scenario(project("P", [job("j", hours=90 / HOUR)]), ncpus=1)
    em = boinc7_emulator(s, compat, duration=600, existing_jobs_only=True)
    result = em.run()
    (j,) = em.all_jobs
    charged = 120.0 if compat == "bce" else 90.0
    assert j.peak_flop_count == pytest.approx(charged * GFLOPS)
    assert em.flops_used == pytest.approx(charged * GFLOPS)
    assert j.elapsed == pytest.approx(240.0 if compat == "bce" else 90.0)
    assert [(sl.start, sl.end) for sl in result.slices] == [(0.0, 90.0)]


def test_under_bce_jobs_that_end_in_one_step_update_the_dcf_in_the_order_of_their_tasks():
    # handle_finished_apps (cs_apps.cpp) walks the active tasks, made at each job's first
    # start, and app_finished updates the project's duration correction factor for each in
    # turn. A (received first, so started first) ends 3,650 s in and B 3,620 s in: both are
    # found at the step of 3,660 s, with an elapsed time of twice the 61 steps they ran
    # (7,320 s; BCE's jobs run for exactly their estimate). A's ratio 7,320 / 3,650 is above
    # 1.1 x the DCF of 1, which it replaces; B's ratio 7,320 / 3,620 is then within 1.1 of
    # it and moves it a tenth of the way (update_duration_correction_factor).
    def sized(name, seconds, received):
        size = seconds * GFLOPS
        return InitialJob(name=name, app="a", fpops=size, fpops_est=size, deadline=10 * 86400.0, received=received)

    s = scenario(project("P", [sized("A", 3650.0, -10.0), sized("B", 3620.0, 0.0)]), ncpus=2)
    em = boinc7_emulator(s, "bce", duration=2 * HOUR, existing_jobs_only=True)
    em.run()
    raw_a, raw_b = 7320.0 / 3650.0, 7320.0 / 3620.0
    assert em.projects[0].dcf == 0.9 * raw_a + 0.1 * raw_b


def test_under_bce_a_fetched_gpu_job_goes_before_a_later_initial_one():
    # first_coproc_result (cpu_sched.cpp) breaks a tie of project priority and of having
    # started by the least RESULT::index. The results read from client_state.xml are
    # numbered 0, 1, ... by sort_results at start-up (received at once, so in the MD5 order
    # of their names, which is J0's before J1's); BOINC's emulator never sorts again
    # (simulate_rpc), so every result it fetches keeps RESULT::clear's 0. On one GPU, P's
    # initial jobs J0 and J1 (1 hour each) leave the GPU saturated for 2 hours, below the
    # 3-hour minimum buffer, so P is asked for work at 0 s while J0 runs. When J0 ends at
    # 3,600 s the first job fetched (index 0) goes before J1 (index 1); intended, as the
    # client numbers results in arrival order after each RPC, takes J1.
    version = AppVersion(avg_ncpus=0.5, flops=GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0, plan_class="cuda")
    app = App(name="g", versions=(version,), latency_bound=10 * 86400.0, fpops_est=HOUR * GFLOPS)

    def initial(name):
        size = HOUR * GFLOPS
        return InitialJob(name=name, app="g", fpops=size, fpops_est=size, deadline=10 * 86400.0, resource="NVIDIA")

    s = scenario(
        project("P", [initial("J0"), initial("J1")], apps=(app,)),
        prefs=Prefs(work_buf_min_days=3 / 24, work_buf_additional_days=0.0),
        host=Host(ncpus=2, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, GFLOPS),)),
    )
    for compat, second in (("bce", "P_g_3"), ("intended", "J1")):
        result = run(s, compat=compat, duration=2 * HOUR)
        assert result.rpcs[0].time == 0.0 and result.rpcs[0].jobs_received, compat
        started = sorted((sl.start, sl.job) for sl in result.slices)
        assert [job for _t, job in started[:2]] == ["J0", second], compat


def test_under_bce_running_jobs_appended_to_the_run_list_keep_their_cpu_in_arrival_order():
    # append_unfinished_time_slice (cpu_sched.cpp) appends the running jobs in an unfinished
    # time slice that make_run_list did not list with one seqno, the list's length, so
    # more_important orders them by its last tie-break, their RESULT pointers: the order a
    # fresh heap allocated them, their arrival. On 2 CPUs Q runs B (started before the run,
    # so it went first) and A (which arrived first); a new EDF job of P, the only job listed,
    # takes a CPU, and A keeps the other while B is preempted.
    def cpu_job(name, received, done=0.0):
        size = 10 * HOUR * GFLOPS
        return InitialJob(
            name=name, app="a", fpops=size, fpops_est=size, deadline=10 * 86400.0, received=received, flops_done=done
        )

    s = scenario(
        project("Q", [cpu_job("A", -20.0), cpu_job("B", -10.0, done=HOUR * GFLOPS)]),
        project("P", apps=(cpu_app(),)),
        ncpus=2,
    )
    em = boinc7_emulator(s, "bce", duration=60, existing_jobs_only=True)
    em.run()
    assert [j.name for j in em.running] == ["B", "A"]
    p = em.projects[1]
    app = p.spec.apps[0]
    urgent = em.new_job(p, app, app.versions[0], HOUR * GFLOPS, HOUR * GFLOPS, 60.0, 60.0 + 2 * HOUR)
    urgent.edf = True
    chosen = enforce(em, 60.0, [urgent], True)
    assert [j.name for j, _why, _gpu in chosen] == [urgent.name, "A"]


def test_under_bce_the_run_decides_at_its_last_instant_too():
    # simulate() (sim.cpp) adds a step to now and stops only once now is past start +
    # duration, so its last pass, an RPC included, runs at now == start + duration. One
    # CPU runs J (1 hour) with no buffer beyond the 180 s minimum: the saturated time is
    # 180 s at 3,420 s and below it from the next step, 3,480 s, where the project is asked
    # for work. A run of exactly 3,480 s makes that RPC under bce (BOINC's emulator makes it
    # too, with --duration 3480); intended ends before deciding at the end of the run.
    s = scenario(project("P", [job("J", hours=1.0)]), prefs=Prefs(work_buf_min_days=0.0, work_buf_additional_days=0.0))
    longer = run(s, compat="bce", duration=2 * HOUR)
    assert longer.rpcs[0].time == 3480.0
    at_end = run(s, compat="bce", duration=3480.0)
    assert [(r.time, r.project, sum(r.jobs_received.values())) for r in at_end.rpcs] == [(3480.0, "P", 1)]
    assert not run(s, compat="intended", duration=3480.0).rpcs


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_a_project_whose_dcf_is_90_or_more_has_every_job_taken_as_a_deadline_miss(compat):
    # earliest_deadline_result (cpu_sched.cpp) checks a project's count of predicted misses
    # only when its duration correction factor is below 90; at 90 or more every runnable
    # job of the project is an EDF candidate. With no predicted misses at all, Q's jobs are
    # listed by EDF, the earliest deadline first, until the scan's bound of twice the CPU
    # (2); below 90 no job is EDF.
    def due(name, days):
        size = HOUR * GFLOPS
        return InitialJob(name=name, app="a", fpops=size, fpops_est=size, deadline=days * 86400.0)

    s = scenario(project("P", [due("p1", 3.0)]), project("Q", [due("q1", 5.0), due("q2", 4.0)]))
    no_misses = types.SimpleNamespace(misses={})
    listed = {}
    for dcf in (90.0, 89.9):
        em = boinc7_emulator(s, compat, duration=60, existing_jobs_only=True)
        em.run()
        em.projects[1].dcf = dcf
        listed[dcf] = [(j.name, j.edf) for j in make_run_list(em, 60.0, no_misses, True)]
    assert listed[90.0] == [("q2", True), ("q1", True)]
    assert len(listed[89.9]) == 2 and not any(edf for _name, edf in listed[89.9])


def test_under_bce_rpc_back_off_takes_its_steps_in_scheduler_ops_order():
    # SCHEDULER_OP::project_rpc_backoff (scheduler_op.cpp) first sends a project that has had
    # MASTER_FETCH_RETRY_CAP (3) master fetches to a day's wait; then compares the failure
    # count with MASTER_FETCH_PERIOD (10) before raising it, so the 10th failure in a row is
    # backed off with n = 10 (min(2^10 x 60 s, 4 h) = 14,400 s, times 0.5 at drand() = 0)
    # and the 11th starts a master fetch, which sets min_rpc_time to 0, and the count again:
    # n = 1, 60 s. Otherwise a time is kept only if later than the one set
    # (PROJECT::set_min_rpc_time).
    from scheduling.engine import rpc

    class Rng:
        def random(self):
            return 0.0

    p = types.SimpleNamespace(nrpc_failures=0, master_fetch_failures=0, min_rpc_time=0.0, master_fetch_pending=False)
    backoffs = [rpc.project_rpc_backoff(p, 1000.0 * k, Rng(), bce=True)[0] for k in range(11)]
    assert backoffs == [60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3840.0, 7200.0, 7200.0, 7200.0, 60.0]
    assert (p.nrpc_failures, p.master_fetch_failures) == (1, 1)
    # the master fetch dropped the 10th failure's later time (9,000 s + 7,200 s)
    assert p.min_rpc_time == 10000.0 + 60.0
    p.master_fetch_failures = 3
    assert rpc.project_rpc_backoff(p, 20000.0, Rng(), bce=True)[0] == 86400.0
    assert p.min_rpc_time == 20000.0 + 86400.0 and p.nrpc_failures == 1


def slow_job_scenario(flops):
    # one CPU and one job of an hour at 1 GFLOPS, on a version of `flops`
    version = AppVersion(avg_ncpus=1.0, flops=flops)
    app = App(name="a", versions=(version,), latency_bound=10 * 86400.0, fpops_est=HOUR * GFLOPS)
    return scenario(project("P", [job("J")], apps=(app,)), ncpus=1)


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_under_bce_a_jobs_flops_left_lose_one_steps_work_at_a_time(compat):
    # ACTIVE_TASK_SET::poll (sim.cpp) takes diff x flops off sim_flops_left at every step,
    # and RR_SIM starts from that value (estimated_flops_remaining under SIM). After five
    # steps at 1.1/7 GFLOPS the sum of five subtractions is 3,552,857,142,857.1436 FLOPs,
    # one ulp from the size less 300 s of work (…7.143), which intended keeps.
    flops = 1.1 * GFLOPS / 7
    size = HOUR * GFLOPS
    em = boinc7_emulator(slow_job_scenario(flops), compat, duration=300, existing_jobs_only=True)
    em.run()
    (j,) = em.all_jobs
    stepwise = size
    for _ in range(5):
        stepwise -= 60.0 * flops
    assert stepwise != size - 300.0 * flops
    expected = stepwise if compat == "bce" else size - 300.0 * flops
    assert j.flops_left == expected
    assert j.est_flops_remaining(True) == expected


def test_under_bce_cpu_scale_adds_the_cpu_and_gpu_jobs_shares_apart_in_task_order():
    # ACTIVE_TASK_SET::poll sums the executing CPU jobs' avg_ncpus and the GPU jobs' apart,
    # each over the tasks in the order they were made, adds the two, and when that is
    # above the CPUs scales the CPU jobs by (ncpus - gpu) / (total - gpu). On 2 CPUs, CPU
    # jobs of 0.47, 0.94 and 0.88 CPUs and a GPU job of 0.14 give 0.812227074235808 that
    # way; summed in list order with the GPU job second the scale is one ulp lower.
    from scheduling.engine.accounting import job_rates

    gpu_version = AppVersion(avg_ncpus=0.14, flops=GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0, plan_class="cuda")
    apps = [
        App(name=f"c{k}", versions=(AppVersion(avg_ncpus=n, flops=GFLOPS),), fpops_est=HOUR * GFLOPS)
        for k, n in enumerate((0.47, 0.94, 0.88))
    ]
    apps.append(App(name="g", versions=(gpu_version,), fpops_est=HOUR * GFLOPS))
    s = scenario(
        project("P", apps=tuple(apps)),
        host=Host(ncpus=2, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, GFLOPS),)),
    )
    em = boinc7_emulator(s, "bce", duration=60, existing_jobs_only=True)
    p = em.projects[0]
    jobs = []
    for seq, app in enumerate(p.spec.apps):
        j = em.new_job(p, app, app.versions[0], HOUR * GFLOPS, HOUR * GFLOPS, 0.0, 86400.0)
        j.task_seq = seq + 1
        jobs.append(j)
    running = [jobs[0], jobs[3], jobs[1], jobs[2]]
    cpu = 0.47 + 0.94 + 0.88
    bce_scale = (2 - 0.14) / ((cpu + 0.14) - 0.14)
    mixed_scale = (2 - 0.14) / ((((0.47 + 0.14) + 0.94) + 0.88) - 0.14)
    assert bce_scale != mixed_scale
    assert job_rates(running, True, True, 2) == mixed_scale
    assert job_rates(running, True, True, 2, True) == bce_scale
    assert jobs[0].rate == GFLOPS * bce_scale and jobs[3].rate == GFLOPS


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_under_bce_a_project_held_back_by_a_zero_mc_shortfall_is_looked_at_the_next_step(compat):
    # choose_project (work_fetch.cpp) lets a processor type below the minimum buffer trigger
    # a fetch from a project with max_concurrent only when the project's MC shortfall on it
    # is above 0. That shortfall is the simulation's tail up to the buffer's end, which moves
    # every step, and BOINC's emulator looks at work fetch every step: with the CPU below
    # its minimum and P's MC shortfall 0, the next check is the next step under bce. With
    # the CPU saturated past the minimum, the check waits for that (6 hours at most).
    from scheduling.engine import work_fetch

    s = scenario(project("P", [job("J")]), ncpus=1)
    em = boinc7_emulator(s, compat, duration=60, existing_jobs_only=True)
    em.run()
    em.projects[0].fetch_ok[0] = True

    def rr(saturated, mc):
        return types.SimpleNamespace(
            rsc=[types.SimpleNamespace(saturated_time=saturated)], mc_shortfall={(0, 0): mc}, last_mc_limit={}
        )

    below = em.work_buf_min - 100.0
    expected = 60.0 + 60.0 if compat == "bce" else 60.0 + 6 * HOUR
    assert work_fetch.next_check(em, 60.0, rr(below, 0.0)) == expected
    assert work_fetch.next_check(em, 60.0, rr(below, 5.0)) == 60.0 + 6 * HOUR


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_under_bce_the_next_fetch_check_allows_for_every_running_job(compat):
    # The round-robin simulation can chain on one CPU jobs that run side by side, and each
    # second of the run then takes 1/overall_frac seconds off each of them: with 2 jobs
    # running the saturated time can fall twice as fast. 10,000 s above the minimum buffer
    # on an always-on host (overall_frac 1), the next check is 10,000 s away under intended,
    # and under bce half of what is left after a time-slice step (slice_bound).
    from scheduling.engine import work_fetch

    s = scenario(project("P", [job("J1", hours=20.0), job("J2", hours=20.0)]), ncpus=2)
    em = boinc7_emulator(s, compat, duration=60, existing_jobs_only=True)
    em.run()
    assert len(em.running) == 2
    rr = types.SimpleNamespace(
        rsc=[types.SimpleNamespace(saturated_time=em.work_buf_min + 10000.0)], mc_shortfall={}, last_mc_limit={}
    )
    if compat == "bce":
        expected = 60.0 + max(0.0, 10000.0 - work_fetch.slice_bound(em)) / 2
    else:
        expected = 60.0 + 10000.0
    assert work_fetch.next_check(em, 60.0, rr) == expected
