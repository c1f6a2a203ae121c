"""The round-robin simulation under `--compat bce` (rr_repick.Repick): its records of the
queued jobs, and whole simulations of small hand-computed cases (reference/client.md §6.4)."""

import pytest

from scheduling.engine.rr_repick import Repick
from scheduling.engine.rr_sim import RoundRobin, rr_simulate

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
    gpu_app,
    job,
    project,
    scenario,
)


def gpu_host(ncpus):
    return Host(ncpus=ncpus, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, GFLOPS),))


def finishes(em):
    return {j.name: j.rr_finish for p in em.projects for j in p.jobs}


def test_the_records_hold_the_queued_jobs_in_pick_order_gpu_types_first_projects_in_pointer_order():
    s = scenario(
        project("A", [job("a1", hours=1), job("a2", hours=2)]),
        project("B", [job("b1", hours=3), job("g1", app="g", hours=1)], apps=(cpu_app(), gpu_app())),
        project("C", [job("c1", hours=4, deadline=5 * HOUR)]),
        host=gpu_host(2),
        prefs=Prefs(work_buf_min_days=0.5 / 24, work_buf_additional_days=0.5 / 24),
    )
    em = boinc7_emulator(s, "bce")
    sim = RoundRobin(em, 0.0)
    rec = Repick.for_emulator(em, sim.static)
    rec.load(sim)
    # the GPU's one slot, then the CPU's projects from the last in the file to the first,
    # each project's jobs in arrival order (the emulator's list, which is the file's reversed)
    assert [j.name for j in em.projects[0].jobs] == ["a2", "a1"]
    assert [j.name for j in rec.jobs] == ["g1", "c1", "b1", "a2", "a1"]
    assert (rec.njobs, rec.nslots) == (5, 4)
    assert list(rec.slot_first)[:5] == [0, 1, 2, 3, 5]
    assert list(rec.slot_proj)[:4] == [1, 2, 1, 0]
    assert (list(rec.rsc_lo), list(rec.rsc_hi)) == ([1, 0], [4, 1])
    for k, j in enumerate(rec.jobs):
        assert (rec.rsc[k], rec.proj[k], rec.slot_of[k]) == (j.rsc, j.project.index, [0, 1, 2, 3, 3][k])
        # the same doubles as the jobs' own: the simulation's arithmetic starts from them
        assert rec.left[k] == j.est_flops_remaining(True)
        assert rec.rate[k] == j.flops * em.resources[j.rsc].overall_frac
        assert (rec.gpu_usage[k], rec.avg_ncpus[k], rec.deadline[k]) == (j.gpu_usage, j.avg_ncpus, j.deadline)
        assert rec.mc_limit[k] == 0 and not rec.gone[k]
    assert list(rec.caps) == [2.0, 1.0]


def test_a_gpu_job_with_a_larger_cpu_share_pushes_a_started_cpu_job_back():
    # 2 CPUs, 1 GPU; C's jobs arrive as c3 (4 h), c2, c1 (3 h each). At 0: g1 (0.5 CPU) on
    # the GPU, then c3 and c2 (2.5 CPUs). At 1 h g1 ends and the fresh pick takes g2 (1.5
    # CPUs) first, then c3, and the CPUs are full: c2 waits with an hour done until g2 ends
    # at 3 h, and ends at 5 h, after c3 at 4 h; c1 runs from 4 h to 7 h
    s = scenario(
        project("C", [job("c3", hours=4), job("c2", hours=3), job("c1", hours=3)]),
        project(
            "G",
            [job("g2", app="h", hours=2), job("g1", app="g", hours=1)],
            apps=(gpu_app("g", ncpus=0.5), gpu_app("h", ncpus=1.5)),
        ),
        host=gpu_host(2),
        prefs=Prefs(work_buf_min_days=1 / 24, work_buf_additional_days=1 / 24),
    )
    em = boinc7_emulator(s, "bce")
    assert [[j.name for j in p.jobs] for p in em.projects] == [["c3", "c2", "c1"], ["g1", "g2"]]  # arrival
    sim = RoundRobin(em, 0.0)
    rec = Repick.for_emulator(em, sim.static)
    rec.load(sim)
    rr = rec.run()
    # every job ended and every queue's head passed its last job
    n, slots = rec.njobs, rec.nslots
    assert all(list(rec.gone)[:n]) and not any(list(rec.slot_left)[:slots])
    assert list(rec.slot_head)[:slots] == list(rec.slot_first)[1 : slots + 1]
    assert finishes(em) == {"g1": HOUR, "g2": 3 * HOUR, "c3": 4 * HOUR, "c2": 5 * HOUR, "c1": 7 * HOUR}
    assert rr.rsc[0].nidle_now == 0 and rr.rsc[1].nidle_now == 0
    # the GPU idles from 3 h on; its buffer ends at 2 h
    assert rr.rsc[1].shortfall == 0.0 and rr.rsc[1].saturated_time == 3 * HOUR
    assert rr.rsc[0].saturated_time == 5 * HOUR
    assert not rr.misses


def test_a_project_at_its_max_concurrent_gives_no_more_jobs_to_the_set():
    # 3 CPUs; P's app runs one job at a time, so each pick takes q1 and one of P's jobs and
    # leaves a CPU idle, and the limit holds P's second job back until its first ends at 1 h
    s = scenario(
        # BOINC's emulator keeps max_concurrent only for a project with an app_config.xml
        project("P", [job("p2", hours=1), job("p1", hours=1)], apps=(cpu_app(max_concurrent=1),), app_config=True),
        project("Q", [job("q1", hours=3)]),
        ncpus=3,
        prefs=Prefs(work_buf_min_days=1 / 24, work_buf_additional_days=3 / 24),
    )
    em = boinc7_emulator(s, "bce")
    assert [j.name for j in em.projects[0].jobs] == ["p2", "p1"]  # arrival
    rr = rr_simulate(em, 0.0)
    assert finishes(em) == {"p2": HOUR, "p1": 2 * HOUR, "q1": 3 * HOUR}
    assert rr.last_mc_limit[(0, 0)] == HOUR  # the last pick that P's limit cut short
    assert rr.rsc[0].nidle_now == 1
    # idle CPU-hours up to the buffer end at 4 h: 1 + 1 + 2 + 3
    assert rr.rsc[0].shortfall == 7 * HOUR
    # P may fill one CPU whenever it runs nothing: from 2 h to the buffer end
    assert rr.mc_shortfall[(0, 0)] == 2 * HOUR


@pytest.mark.parametrize("hours", [3.0, 12.5])
def test_a_job_more_than_an_hour_from_its_end_runs_in_time_slices_and_ends_on_time(hours):
    s = scenario(project("P", [job("j", hours=hours)]), ncpus=1, prefs=Prefs(work_buf_min_days=0.1))
    em = boinc7_emulator(s, "bce")
    sim = RoundRobin(em, 0.0)
    rr = sim.run()
    assert sim.steps == 1  # time slices end no job and are not steps
    assert em.projects[0].jobs[0].rr_finish == pytest.approx(hours * HOUR, rel=1e-12)
    assert rr.rsc[0].saturated_time == em.projects[0].jobs[0].rr_finish


def test_a_job_past_its_deadline_less_the_buffer_minimum_is_a_miss_with_its_run_time_busy():
    s = scenario(
        project("P", [job("j1", hours=2), job("j2", hours=2, deadline=3 * HOUR)]),
        ncpus=1,
        prefs=Prefs(work_buf_min_days=0.5 / 24),
    )
    em = boinc7_emulator(s, "bce")
    rr = rr_simulate(em, 0.0)
    j1, j2 = em.projects[0].jobs
    assert (j1.rr_finish, j2.rr_finish) == (2 * HOUR, 4 * HOUR)
    assert (j1.rr_miss, j2.rr_miss) == (False, True)
    assert rr.misses == {(0, 0): 1}
    # the miss's run time, estimated as BOINC's emulator does: its estimate x the DCF
    assert rr.rsc[0].busy_time == j2.runtime_remaining(j2.flops * em.resources[0].overall_frac)


@pytest.mark.parametrize("compat", ["bce", "intended"])
def test_a_simulation_on_columns_an_earlier_one_filled_is_the_simulation_on_fresh_ones(compat):
    # one Repick (bce) or ByPriority (intended) serves every simulation of a run: a later
    # simulation with fewer jobs, some of them half done, must not see the earlier one's
    # entries past its own
    def make():
        s = scenario(
            project("A", [job(f"a{i}", hours=1 + i) for i in range(5)], share=300),
            project("B", [job(f"b{i}", hours=2) for i in range(3)], apps=(cpu_app(max_concurrent=1),), app_config=True),
            project("G", [job("g1", app="g", hours=1), job("g2", app="g", hours=3)], apps=(gpu_app(),)),
            host=gpu_host(2),
            prefs=Prefs(work_buf_min_days=2 / 24, work_buf_additional_days=4 / 24),
        )
        em = boinc7_emulator(s, "bce") if compat == "bce" else boinc7_emulator(s)
        for p, rec in zip(em.projects, (40.0, 10.0, 3.0)):
            p.rec = rec
        return em

    def shrink(em):
        for p in em.projects:
            del p.jobs[-1:]
            for j in p.jobs[:1]:
                j.done = j.fpops_est / 3

    def figures(em, rr):
        return (
            finishes(em),
            [(r.shortfall, r.nidle_now, r.saturated_time, r.busy_time) for r in rr.rsc],
            rr.misses,
            rr.mc_shortfall,
            rr.last_mc_limit,
            [(p.rec_temp, p.priority) for p in em.projects],
        )

    reused = make()
    rr_simulate(reused, 0.0)
    shrink(reused)
    fresh = make()
    shrink(fresh)
    assert figures(reused, rr_simulate(reused, 600.0)) == figures(fresh, rr_simulate(fresh, 600.0))


def test_a_missed_jobs_busy_time_is_its_estimate_in_boincs_order_of_operations():
    # rr_sim.cpp: estimated_runtime_remaining() / overall_cpu_frac(), where an unstarted
    # job's estimate is size / FLOPS, then x DCF (RESULT::estimated_runtime). Other orders
    # differ in the last bits here, and the busy time's ties between instances turn on them.
    flops = 3.867e9
    app = App(name="a", versions=(AppVersion(avg_ncpus=1.0, flops=flops),), fpops_est=1e11)
    late = InitialJob(name="late", app="a", fpops=1e11, fpops_est=1e11, deadline=10.0)
    s = scenario(
        project("P", [late], apps=(app,)),
        host=Host(ncpus=1, cpu_flops=flops, on=Availability(frac=0.8)),
    )
    em = boinc7_emulator(s, "bce")
    em.projects[0].dcf = 1.01
    frac = em.resources[0].overall_frac
    rr = rr_simulate(em, 0.0)
    assert em.projects[0].jobs[0].rr_miss
    assert rr.rsc[0].busy_time == 1e11 / flops * 1.01 / frac
    assert 1e11 / flops * 1.01 / frac != 1e11 * 1.01 / (flops * frac)


def test_a_project_at_its_limit_on_the_gpu_drops_an_ended_cpu_job_and_ends_its_turn():
    # pick_jobs_to_run: P's GPU app (max_concurrent 1) puts P at its limit in every pick's
    # GPU phase, and a project at its limit ends its turn on the CPU after one step of its
    # pending list. At 1 h that step drops P's first CPU job, which has just ended, so the
    # second waits for the next pick, at 1.5 h when Q's q1 ends, and ends at 2.5 h (not 2 h).
    s = scenario(
        project(
            "P",
            [job("c1"), job("c2"), job("g1", app="g", hours=5)],
            apps=(cpu_app(), gpu_app(ncpus=0.1, max_concurrent=1)),
            app_config=True,
        ),
        project("Q", [job("q1", hours=1.5)]),
        host=gpu_host(2),
        prefs=Prefs(work_buf_min_days=0.5 / 24, work_buf_additional_days=0.5 / 24),
    )
    em = boinc7_emulator(s, "bce")
    rr_simulate(em, 0.0)
    done = finishes(em)
    assert (done["q1"], done["g1"]) == (1.5 * HOUR, 5 * HOUR)
    assert sorted((done["c1"], done["c2"])) == [HOUR, 2.5 * HOUR]


def test_a_time_slice_step_picks_afresh_and_notes_the_limit_again():
    # RR_SIM::simulate picks at every iteration, time-slice steps included. P's app runs one
    # job at a time: p2 (1 h) first, then p1 (3 h) from 1 h to 4 h, in time-slice steps of an
    # hour while it is more than an hour from its end, so the limit holds at the picks at
    # 1 h, 2 h and 3 h; picking only at job ends would note it last at 1 h
    s = scenario(
        project("P", [job("p1", hours=3), job("p2", hours=1)], apps=(cpu_app(max_concurrent=1),), app_config=True),
        ncpus=2,
        prefs=Prefs(work_buf_min_days=0.5 / 24, work_buf_additional_days=0.5 / 24),
    )
    em = boinc7_emulator(s, "bce")
    assert [j.name for j in em.projects[0].jobs] == ["p2", "p1"]  # arrival
    rr = rr_simulate(em, 0.0)
    assert finishes(em) == {"p2": HOUR, "p1": 4 * HOUR}
    assert rr.last_mc_limit[(0, 0)] == 3 * HOUR
