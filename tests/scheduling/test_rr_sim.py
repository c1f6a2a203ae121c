"""Round-robin simulations: seed 001's worked example and seed 002's shortfall."""

import io
import json
import os

from django.core.management import call_command

from scheduling.engine import rr_snapshot

from .helpers import GFLOPS, HOUR, Availability, Host, Prefs, boinc7_emulator, job, project, scenario

SCENARIOS = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios")


def rrsim(*args):
    out = io.StringIO()
    call_command("rrsim", *args, stdout=out)
    return json.loads(out.getvalue())


def test_seed_001_worked_example_gives_the_documents_three_numbers_through_rrsim_boinc5():
    snap = rrsim(os.path.join(SCENARIOS, "seed001_worked_example.json"), "--policy", "boinc5", "--json")
    shortfall = {p["name"]: p["shortfall"] for p in snap["projects"]}
    # the seed counts in hours: shortfall(A) = 4, shortfall(B) = 0, total_shortfall = 2
    assert shortfall["A"] == 4 * HOUR
    assert shortfall["B"] == 0.0
    assert snap["total_shortfall"] == 2 * HOUR
    finish = {j["name"]: j["projected_finish"] for j in snap["jobs"]}
    assert finish["A2"] == 4 * HOUR
    assert finish["A1"] == 8 * HOUR


def buffers(min_hours, extra_hours):
    return Prefs(work_buf_min_days=min_hours / 24, work_buf_additional_days=extra_hours / 24)


def test_an_empty_host_is_short_of_every_instance_up_to_the_buffer_end():
    s = scenario(project("P"), ncpus=2, prefs=buffers(1, 1))
    cpu = rr_snapshot(s)["resources"]["cpu"]
    assert cpu["shortfall"] == 2 * 2 * HOUR
    assert cpu["nidle_now"] == 2
    assert cpu["saturated_time"] == 0


def test_one_job_on_two_cpus_leaves_one_idle_then_both():
    s = scenario(project("P", [job("j1", hours=1)]), ncpus=2, prefs=buffers(1, 1))
    cpu = rr_snapshot(s)["resources"]["cpu"]
    assert cpu["nidle_now"] == 1
    assert cpu["shortfall"] == 1 * HOUR + 2 * HOUR
    assert cpu["saturated_time"] == 0


def test_saturated_time_lasts_while_every_instance_is_busy():
    s = scenario(project("P", [job("j1", hours=1), job("j2", hours=3)]), ncpus=2, prefs=buffers(1, 1))
    cpu = rr_snapshot(s)["resources"]["cpu"]
    assert cpu["saturated_time"] == 1 * HOUR
    assert cpu["shortfall"] == 1 * HOUR
    assert cpu["nidle_now"] == 0


def test_work_past_the_buffer_end_adds_no_shortfall():
    s = scenario(project("P", [job("j1", hours=5), job("j2", hours=5)]), ncpus=2, prefs=buffers(1, 1))
    cpu = rr_snapshot(s)["resources"]["cpu"]
    assert cpu["shortfall"] == 0
    assert cpu["saturated_time"] == 5 * HOUR


def test_the_on_fraction_stretches_the_simulated_run():
    host = Host(ncpus=1, cpu_flops=GFLOPS, on=Availability(0.5, 3600))
    s = scenario(project("P", [job("j1", hours=1)]), host=host, prefs=buffers(1, 3))
    snap = rr_snapshot(s)
    assert snap["jobs"][0]["projected_finish"] == 2 * HOUR
    assert snap["resources"]["cpu"]["shortfall"] == 2 * HOUR


def test_a_job_projected_past_its_deadline_is_a_deadline_miss_with_busy_time():
    s = scenario(
        project("P", [job("late", hours=5, deadline=4 * HOUR), job("fine", hours=1)]), ncpus=1, prefs=buffers(0, 1)
    )
    snap = rr_snapshot(s)
    miss = {j["name"]: j["deadline_miss"] for j in snap["jobs"]}
    assert miss == {"late": True, "fine": False}
    assert snap["projects"][0]["deadlines_missed"] == 1
    assert snap["resources"]["cpu"]["busy_time"] == 5 * HOUR


def test_the_buffer_minimum_counts_against_the_deadline():
    # computation deadline = report deadline - work_buf_min (reference/client.md §6.4)
    s = scenario(project("P", [job("j", hours=1, deadline=2 * HOUR)]), ncpus=1, prefs=buffers(1.5, 0))
    assert rr_snapshot(s)["jobs"][0]["deadline_miss"] is True


def test_rrsim_json_has_the_contract_keys():
    snap = rrsim(os.path.join(SCENARIOS, "standard.json"), "--json", "--at", "7200")
    assert_contract(snap, {"cpu", "NVIDIA"})
    assert snap["time"] == 7200


def assert_contract(snap, resources):
    assert set(snap["resources"]) == resources
    for r in snap["resources"].values():
        assert set(r) >= {"shortfall", "nidle_now", "saturated_time", "busy_time"}
    for p in snap["projects"]:
        assert set(p) >= {"name", "shortfall", "deadlines_missed"}
    for j in snap["jobs"]:
        assert set(j) >= {"name", "project", "projected_finish", "deadline_miss"}
    assert isinstance(snap["total_shortfall"], float)


def test_rrsim_reads_a_p_c_d_r_file_with_four_idle_cpus():
    # P1(1000, 2000, .5) P2(1, 10, .5) NCPUS=4 and no jobs yet: every CPU idle up to the buffer
    snap = rrsim(os.path.join(SCENARIOS, "seed001_example1.txt"), "--json")
    assert_contract(snap, {"cpu"})
    assert snap["jobs"] == []
    cpu = snap["resources"]["cpu"]
    assert cpu["nidle_now"] == 4 and cpu["saturated_time"] == 0
    assert snap["total_shortfall"] == cpu["shortfall"] == 4 * snap["work_buf_total"]
    # equal shares, equal halves of the shortfall
    assert {p["name"]: p["shortfall"] for p in snap["projects"]} == {
        "P1": 2 * snap["work_buf_total"],
        "P2": 2 * snap["work_buf_total"],
    }


def test_rrsim_boinc5_splits_a_p_c_d_r_files_shortfall_by_share_over_the_minimum_queue():
    # scenario1.txt: shares .5, .25, .25 on two CPUs, min_queue = 0.1 h
    snap = rrsim(os.path.join(SCENARIOS, "scenario1.txt"), "--policy", "boinc5", "--json")
    assert_contract(snap, {"cpu"})
    assert snap["work_buf_min"] == 360.0
    assert snap["total_shortfall"] == 2 * 360.0
    assert {p["name"]: p["shortfall"] for p in snap["projects"]} == {"P1": 360.0, "P2": 180.0, "P3": 180.0}


def test_rrsim_reads_a_client_state_directory_with_its_prefs_and_gpu():
    snap = rrsim(os.path.join(SCENARIOS, "client_state"), "--json")
    assert_contract(snap, {"cpu", "NVIDIA"})
    # global_prefs.xml: 0.2 + 0.3 days of buffer
    assert snap["work_buf_min"] == 0.2 * 86400 and snap["work_buf_total"] == 0.5 * 86400
    # the one result: 2.88e13 FLOPs at 2 GFLOPS is 14400 s, stretched by on 0.8 x active 0.9
    (only,) = snap["jobs"]
    assert (only["name"], only["project"], only["deadline_miss"]) == ("cpu_wu_1_0", "cpu_project", False)
    assert only["projected_finish"] == 20000.0
    cpu, gpu = snap["resources"]["cpu"], snap["resources"]["NVIDIA"]
    # three CPUs idle to the buffer end, the fourth from the job's end
    assert cpu["nidle_now"] == 3
    assert cpu["shortfall"] == 3 * 43200.0 + (43200.0 - 20000.0)
    assert gpu["nidle_now"] == 1 and gpu["shortfall"] == 43200.0
    assert snap["total_shortfall"] == cpu["shortfall"] + gpu["shortfall"]
    assert [p["name"] for p in snap["projects"]] == ["cpu_project", "gpu_project"]


# --------------------------------------------------------------------------- RoundRobin's own arithmetic

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from scheduling.engine.rec import compute_priority, update_average  # noqa: E402
from scheduling.engine.rr_sim import RoundRobin, decay_factors, decayed, rr_simulate  # noqa: E402

times = st.floats(min_value=0.0, max_value=1e9, allow_nan=False)
amounts = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@given(
    times,
    st.floats(min_value=0.0, max_value=1e7, allow_nan=False),
    amounts,
    amounts,
    st.floats(min_value=1.0, max_value=1e8),
)
def test_a_simulation_step_moves_rec_exactly_as_update_average(t0, dt, avg, work, half_life):
    diff, w = decay_factors(t0, t0 + dt, half_life)
    expected, _t = update_average(t0 + dt, t0, work, half_life, avg, t0)
    assert decayed(avg, work, diff, w, half_life) == expected


def test_the_projected_priorities_are_compute_prioritys_of_the_projected_rec():
    s = scenario(
        project("A", [job(f"a{i}", hours=1 + i) for i in range(4)], share=300),
        project("B", [job(f"b{i}", hours=2) for i in range(3)], share=100),
        project("Backup", [job("z", hours=5)], share=0),
        ncpus=2,
    )
    em = boinc7_emulator(s)
    for p, rec in zip(em.projects, (40.0, 10.0, 3.0)):
        p.rec = rec
    rr = rr_simulate(em, 0.0)
    assert rr.contested  # picks were made by priority with other projects in the running
    for p in em.projects:
        priority = p.priority
        compute_priority(p, rr.rec_sum)
        assert p.priority == priority
        assert p.rec_temp > p.rec  # projected credit of its jobs and the charges of its picks


def test_a_simulation_is_a_run_of_steps_each_ending_a_job():
    s = scenario(
        project("P", [job("j1", hours=1), job("j2", hours=2), job("j3", hours=3)]), ncpus=2, prefs=buffers(1, 1)
    )
    sim = RoundRobin(boinc7_emulator(s), 0.0)
    rr = sim.run()
    # j1 ends at 1 h, j2 at 2 h, j3 at 1 h + 3 h: three steps
    assert sim.steps == 3
    assert [j.rr_finish for j in sim.em.projects[0].jobs] == [HOUR, 2 * HOUR, 4 * HOUR]
    assert rr.rsc[0].saturated_time == 2 * HOUR


def test_busy_time_goes_on_the_least_busy_instance_and_the_next_ones_in_order():
    # BUSY_TIME_ESTIMATOR::update (reference/client.md §6.4): a 2-CPU job starts on the
    # first least-busy instance (0) and takes the next one (1), busy or not, so instance 2
    # stays idle and the busy time (the least busy instance) stays 0; usage below 1 adds
    # nothing, and the instances wrap around
    from scheduling.engine.rr_queue import busy_update

    busy = [0.0, 5.0, 0.0]
    busy_update(busy, 10.0, 2.0)
    assert busy == [10.0, 15.0, 0.0]
    busy_update(busy, 10.0, 0.5)
    assert busy == [10.0, 15.0, 0.0]
    busy_update(busy, 10.0, 2.9)
    assert busy == [20.0, 15.0, 10.0]
