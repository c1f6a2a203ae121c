"""max_concurrent (reference/client.md §6.3 enforce step 5, §6.4, §6.5)."""

from scheduling.engine import rr_snapshot, run

from .helpers import HOUR, Prefs, cpu_app, job, project, scenario


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
    from scheduling.engine import get_policy
    from scheduling.engine.emulator import Emulator
    from scheduling.engine.rr_sim import rr_simulate
    from scheduling.engine.work_fetch import set_request

    em = Emulator(
        limited(n_jobs=0),
        get_policy("boinc7"),
        duration=60,
        delta=60,
        seed=1,
        compat="intended",
        existing_jobs_only=False,
        policy_name="boinc7",
    )
    rr = rr_simulate(em, 0.0)
    buffer = em.work_buf_total
    # with no jobs, its limit lets it fill 2 of the 4 CPUs up to the buffer end
    assert rr.mc_shortfall[(0, 0)] == 2 * buffer
    assert set_request(em, em.projects[0], 0, rr, 1.0) == (2 * buffer, 0.0)
