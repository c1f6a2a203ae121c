"""The engine's loops are bounded: numbers that would keep a run from ending stop it with a
ScenarioError (EngineLimitError) that names what ran away, never a hang or a traceback.

The scenario's own limits (scenario.py) refuse such numbers at the door; these tests put them
past the door (`unchecked`), as a bug elsewhere could, to show the bounds hold on their own."""

import pytest
from django.core.management import CommandError, call_command

from scheduling.engine import ScenarioError, rr_snapshot, run
from scheduling.engine import emulator as emulator_module
from scheduling.engine.readers import scenario_to_dict
from scheduling.engine.state import EngineLimitError

from .helpers import Availability, Host, InitialJob, project, scenario

INF = float("inf")


def unchecked(obj, **fields):
    """`obj` with `fields` set past its dataclass checks."""
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    return obj


def test_the_scenario_refuses_these_numbers_at_the_door():
    with pytest.raises(ScenarioError, match="fpops is inf, not a finite number"):
        InitialJob(name="endless", app="a", fpops=INF, fpops_est=INF, deadline=1e6)
    with pytest.raises(ScenarioError, match="mean up period"):
        Availability(0.5, 1e-300)


def endless_job():
    # a job of infinite size: its remaining work over any rate is never used up
    job = InitialJob(name="endless", app="a", fpops=1e12, fpops_est=1e12, deadline=1e6)
    return scenario(project("P", [unchecked(job, fpops=INF, fpops_est=INF)]))


@pytest.mark.parametrize("compat", ["intended", "bce"])
def test_a_job_that_never_ends_stops_the_round_robin_simulation_with_a_scenario_error(compat):
    with pytest.raises(ScenarioError, match="round-robin simulation at 0 s took more than 128 steps for 1 queued job"):
        run(endless_job(), duration=3600, compat=compat)


def test_rrsim_of_a_job_that_never_ends_is_the_same_error():
    with pytest.raises(EngineLimitError, match="job sizes or processor speeds are out of range"):
        rr_snapshot(endless_job())


def flickering_host():
    return scenario(
        project("P"), host=Host(ncpus=1, cpu_flops=1e9, on=unchecked(Availability(0.5, 60), mean_up=1e-300))
    )


def test_a_mean_up_time_too_short_to_move_the_clock_stops_the_run():
    s = flickering_host()
    with pytest.raises(EngineLimitError, match="mean up time of 1e-300 s changed more than 1000000 times"):
        run(s, duration=3600)


def test_a_run_past_its_event_bound_stops_with_the_time_it_reached(monkeypatch):
    # a day at 60 s steps allows 10,000 + 1,441 x MAX_EVENTS_PER_STEP events; with none per
    # step the day's own events go past the bound
    monkeypatch.setattr(emulator_module, "MAX_EVENTS_PER_STEP", 0)
    s = scenario(project("P"), ncpus=4, host=Host(ncpus=4, cpu_flops=1e9, on=Availability(0.5, 60)))
    with pytest.raises(EngineLimitError, match=r"the run made 10001 events by \d+ s"):
        run(s, duration=86400 * 30)


def test_simulate_says_why_in_one_line_and_exits_2(tmp_path):
    import json

    path = tmp_path / "flickering.json"
    path.write_text(json.dumps(scenario_to_dict(flickering_host())))
    with pytest.raises(CommandError, match="mean up period") as err:
        call_command("simulate", str(path), "--duration", "1h")
    assert err.value.returncode == 2
    assert "\n" not in str(err.value)


def test_a_step_too_small_for_the_duration_is_refused_before_the_run():
    with pytest.raises(ValueError, match=r"the step \(delta\)"):
        run(scenario(project("P")), duration=86400, delta=1e-300)
