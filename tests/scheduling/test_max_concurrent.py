"""max_concurrent (reference/client.md §6.3 enforce step 5, §6.4, §6.5)."""

from scheduling.engine import rr_snapshot, run
from scheduling.engine.cpu_sched import make_run_list
from scheduling.engine.readers import project_dir, read_app_config
from scheduling.engine.rr_sim import rr_simulate
from scheduling.engine.work_fetch import set_request

from .helpers import (
    GFLOPS,
    HOUR,
    App,
    AppVersion,
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


def limited(n_jobs=4, mc=2):
    app = cpu_app(hours=1, max_concurrent=mc)
    return scenario(
        project("P", [job(f"j{i}", hours=1) for i in range(n_jobs)], apps=(app,)),
        ncpus=4,
        prefs=Prefs(work_buf_min_days=0.05, work_buf_additional_days=0.05),
    )


def test_enforce_runs_no_more_jobs_of_an_app_than_its_max_concurrent():
    result = run(limited(), duration=4 * HOUR, existing_jobs_only=True)
    points = sorted({sl.start for sl in result.slices})
    for t in points:
        assert sum(1 for sl in result.slices if sl.start <= t < sl.end) <= 2
    assert {sl.job for sl in result.slices} == {"j0", "j1", "j2", "j3"}


def test_the_round_robin_simulation_runs_two_at_a_time_and_counts_the_idle_cpus():
    snap = rr_snapshot(limited())
    finish = sorted(j["projected_finish"] for j in snap["jobs"])
    assert finish == [HOUR, HOUR, 2 * HOUR, 2 * HOUR]
    # two of four CPUs idle all along: the CPU is never saturated
    assert snap["resources"]["cpu"]["saturated_time"] == 0
    assert snap["resources"]["cpu"]["nidle_now"] == 2


def test_a_limited_project_asks_for_its_mc_shortfall_and_no_instances():
    em = boinc7_emulator(limited(n_jobs=0))
    rr = rr_simulate(em, 0.0)
    buffer = em.work_buf_total
    # with no jobs, its limit lets it fill 2 of the 4 CPUs up to the buffer end
    assert rr.mc_shortfall[(0, 0)] == 2 * buffer
    assert set_request(em, em.projects[0], 0, rr, 1.0) == (2 * buffer, 0.0)


def test_any_limited_app_makes_the_project_ask_for_its_smallest_limit_times_its_largest_usage():
    # RSC_PROJECT_WORK_FETCH::rr_init: one limited app (4 at once, 1 CPU each) beside an
    # unlimited 2-CPU app caps the project at 4 x 2 = 8 of the 11 CPUs, and at 4 x 1, at most
    # the 2 GPUs, on the GPU it has no app for; it asks for that MC shortfall on every
    # processor type and for no instances
    wide = App(name="b", versions=(AppVersion(avg_ncpus=2.0, flops=GFLOPS),), fpops_est=HOUR * GFLOPS)
    s = scenario(
        project("P", apps=(cpu_app(max_concurrent=4), wide), app_config=True, app_config_min_mc=4),
        prefs=Prefs(work_buf_min_days=0.05, work_buf_additional_days=0.05),
        host=Host(ncpus=11, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 2, GFLOPS),)),
    )
    for compat in ("bce", "intended"):
        em = boinc7_emulator(s, compat)
        rr = rr_simulate(em, 0.0)
        buffer = em.work_buf_total
        assert rr.mc_shortfall[(0, 0)] == 8 * buffer
        assert rr.mc_shortfall[(0, 1)] == 2 * buffer
        p = em.projects[0]
        assert set_request(em, p, 0, rr, 1.0) == (8 * buffer, 0.0)
        assert set_request(em, p, 1, rr, 1.0) == (2 * buffer, 0.0)


def test_app_config_gives_the_smallest_limit_even_of_an_app_the_project_does_not_have(tmp_path):
    # APP_CONFIGS::parse takes every <app>'s max_concurrent into project_min_mc
    p = project("P", apps=(cpu_app(max_concurrent=0),), master_url="http://p.example/")
    folder = tmp_path / project_dir(p.master_url)
    folder.mkdir(parents=True)
    (folder / "app_config.xml").write_text(
        "<app_config><app><name>a</name><max_concurrent>5</max_concurrent></app>"
        "<app><name>gone</name><max_concurrent>3</max_concurrent></app></app_config>"
    )
    read = read_app_config(str(tmp_path), p)
    assert read.app_config and read.app_config_min_mc == 3
    assert read.apps[0].max_concurrent == 5


def test_under_bce_gpu_jobs_cpu_shares_pile_up_in_the_cpu_count_of_a_project_without_cpu_jobs():
    # P runs two GPU jobs (1 h and 2 h, half a CPU each) with a limit of 2 and has no CPU
    # job; its CPU count is never set back to 0, so each pick adds the GPU jobs' CPU shares:
    # 1 CPU in the first hour, 1.5 after (0.5 more from the second pick), up to the buffer
    # end at 4 h. It could use min(2 x 1, 4) = 2 CPUs and 2 GPUs.
    def gpu_job(name, hours):
        size = hours * HOUR * GFLOPS
        return InitialJob(name=name, app="g", fpops=size, fpops_est=size, deadline=10 * 86400.0, resource="NVIDIA")

    s = scenario(
        project("P", [gpu_job("g1", 1), gpu_job("g2", 2)], apps=(gpu_app(max_concurrent=2),), app_config=True),
        prefs=Prefs(work_buf_min_days=2 / 24, work_buf_additional_days=2 / 24),
        host=Host(ncpus=4, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 2, GFLOPS),)),
    )
    em = boinc7_emulator(s, "bce")
    rr = rr_simulate(em, 0.0)
    assert rr.mc_shortfall[(0, 0)] == (1.0 + 0.5 + 2 * 0.5) * HOUR
    assert rr.mc_shortfall[(0, 1)] == (0.0 + 1.0 + 2 * 2.0) * HOUR


def test_a_wacky_dcf_asks_for_nothing_when_there_is_no_shortfall():
    # set_request: a DCF outside [0.02, 80] turns a shortfall into 1 s, and none into none
    from scheduling.engine.rr_sim import rr_simulate
    from scheduling.engine.work_fetch import set_request

    s = scenario(
        project("P", [job(f"j{i}", hours=10) for i in range(2)]),
        ncpus=2,
        prefs=Prefs(work_buf_min_days=0.05, work_buf_additional_days=0.05),
    )
    em = boinc7_emulator(s, "bce")
    p = em.projects[0]
    p.dcf = 100.0
    rr = rr_simulate(em, 0.0)
    assert rr.rsc[0].shortfall == 0
    assert set_request(em, p, 0, rr, 1.0) == (0.0, 0.0)


def test_make_run_list_passes_over_a_cpu_job_whose_app_is_at_its_max_concurrent():
    # make_run_list's CPU scan skips a job whose app already has max_concurrent jobs in the
    # list, so the scan's room (twice the CPUs) goes to other projects' jobs
    s = scenario(
        project("P", [job(f"p{i}", hours=1) for i in range(5)], apps=(cpu_app(max_concurrent=1),), app_config=True),
        project("Q", [job("q0", hours=1)], share=1.0),
        ncpus=2,
    )
    for compat in ("bce", "intended"):
        em = boinc7_emulator(s, compat)
        listed = [j.name for j in make_run_list(em, 0.0, em.rr(), True)]
        assert len(listed) == 2 and "q0" in listed, (compat, listed)


def test_a_project_held_back_by_its_limit_is_asked_at_the_first_step_the_limit_is_within_the_buffer():
    # compute_rsc_project_reason: P may not be asked for CPU work while the last simulated
    # time at which its limit of 1 held a job back is beyond the whole buffer (0.05 + 0.04
    # days = 7,776 s). Five 1-hour jobs run one at a time on an always-on host; the
    # simulation's picks are at each job's end, the last at the start of the fifth, so at t
    # (in the second job) that time is 14,400 - t s from now. It is within the buffer from
    # t = 6,624 s, so BOINC's emulator, which looks at every 60 s step, asks at 6,660 s: its
    # 3 idle CPUs (P's unlimited 3-CPU app can use them; mc_max_could_use = 1 x 3) give an
    # MC shortfall, and the CPU buffer is below its minimum. The second job ends at 7,200 s.
    wide = App(name="b", versions=(AppVersion(avg_ncpus=3.0, flops=3 * GFLOPS),), fpops_est=HOUR * GFLOPS)
    s = scenario(
        project(
            "P",
            [job(f"j{i}") for i in range(5)],
            apps=(cpu_app(max_concurrent=1), wide),
            app_config=True,
            app_config_min_mc=1,
        ),
        ncpus=4,
        prefs=Prefs(work_buf_min_days=0.05, work_buf_additional_days=0.04),
    )
    for compat in ("bce", "intended"):
        result = run(s, compat=compat, duration=3 * HOUR)
        assert result.rpcs[0].time == 6660.0, compat
