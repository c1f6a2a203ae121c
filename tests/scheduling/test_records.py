"""Run records beyond the slices: the host's availability periods and the partial records a
run hands out while it goes."""

import math

import pytest

from scheduling.engine import HostPeriod, get_policy, run
from scheduling.engine.emulator import Emulator

from .helpers import GFLOPS, HOUR, App, AppVersion, Availability, GpuType, Host, Prefs, cpu_app, project, scenario


class ScriptedProcess:
    """An availability process that changes state at given times (state.RandomProcess's API)."""

    def __init__(self, up: bool, changes=()):
        self.up = up
        self.changes = list(changes)
        self.next_change = self.changes[0] if self.changes else math.inf

    def advance(self, t: float) -> bool:
        while self.next_change <= t:
            self.up = not self.up
            self.changes.pop(0)
            self.next_change = self.changes[0] if self.changes else math.inf
        return self.up


def cpu_and_gpu_host():
    gpu_app = App(
        "g",
        (AppVersion(avg_ncpus=0.5, flops=20 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0),),
        latency_bound=10 * 86400.0,
        fpops_est=HOUR * 20 * GFLOPS,
    )
    return scenario(
        project("C", apps=(cpu_app(hours=2.0),)),
        project("G", apps=(gpu_app,)),
        host=Host(ncpus=2, cpu_flops=GFLOPS, gpus=(GpuType("NVIDIA", 1, 100 * GFLOPS),)),
        prefs=Prefs(work_buf_min_days=0.1, work_buf_additional_days=0.1),
    )


def scripted_run(processes: dict, duration: float):
    em = Emulator(
        cpu_and_gpu_host(),
        get_policy("boinc7"),
        duration=duration,
        delta=60.0,
        seed=1,
        compat="intended",
        existing_jobs_only=False,
        policy_name="boinc7",
    )
    em.host_proc.update(processes)
    for name, proc in processes.items():
        setattr(em, name, proc.up)
    em.host_down_since = {state: 0.0 for state in em._host_states()}
    return em.run()


def test_host_periods_follow_a_hand_made_availability_trace():
    # changes off the 60 s grid take effect at the next grid point (1000 -> 1020, 5000 -> 5040,
    # 8000 -> 8040, 20000 -> 20040); the GPU comes back at 3000 while the host is off, so once the host is
    # on again at 5040 it is not suspended; while "not_active" the GPU state is not recorded
    result = scripted_run(
        {
            "on": ScriptedProcess(True, [1000, 5000]),
            "gpu_active": ScriptedProcess(False, [3000, 20000]),
            "connected": ScriptedProcess(True, [6000, 8000]),
            "active": ScriptedProcess(True, [7200, 9000]),
        },
        duration=10 * HOUR,
    )
    assert result.host_periods == (
        HostPeriod(0.0, 1020.0, "gpu_suspended"),
        HostPeriod(1020.0, 5040.0, "off"),
        HostPeriod(6000.0, 8040.0, "disconnected"),
        HostPeriod(7200.0, 9000.0, "not_active"),
        HostPeriod(20040.0, 36000.0, "gpu_suspended"),
    )
    assert result.to_dict()["host_periods"][1] == {"start": 1020.0, "end": 5040.0, "state": "off"}
    assert "host_periods" not in result.summary()
    # what the host could not do, it did not do
    for period in result.host_periods:
        inside = [s for s in result.slices if s.start < period.end and s.end > period.start]
        if period.state in ("off", "not_active"):
            assert inside == [], period
        elif period.state == "gpu_suspended":
            assert [s for s in inside if s.resource == "NVIDIA"] == [], period
        rpcs = [r for r in result.rpcs if period.start <= r.time < period.end]
        if period.state in ("off", "disconnected"):
            assert rpcs == [], period
    assert any(s.resource == "NVIDIA" and s.start >= 5040.0 for s in result.slices)


def test_an_always_available_host_has_no_periods():
    result = run(cpu_and_gpu_host(), duration=HOUR)
    assert result.host_periods == ()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_host_periods_tile_the_states_without_overlap(seed):
    host = Host(
        ncpus=2,
        cpu_flops=GFLOPS,
        gpus=(GpuType("NVIDIA", 1, 100 * GFLOPS),),
        on=Availability(0.7, 2 * HOUR),
        connected=Availability(0.8, HOUR),
        active=Availability(0.8, HOUR),
        gpu_active=Availability(0.6, HOUR),
    )
    base = cpu_and_gpu_host()
    result = run(scenario(*base.projects, host=host, prefs=base.prefs), duration=3 * 86400.0, seed=seed)
    periods = result.host_periods
    assert {p.state for p in periods} == {"off", "not_active", "gpu_suspended", "disconnected"}
    for state in ("off", "not_active", "gpu_suspended", "disconnected"):
        mine = [p for p in periods if p.state == state]
        assert all(p.end > p.start and p.start % 60 == 0 for p in mine)
        assert all(a.end < b.start for a, b in zip(mine, mine[1:])), f"{state} periods overlap or touch"
    off = [p for p in periods if p.state == "off"]
    for p in periods:
        if p.state != "off":
            assert not any(o.start < p.end and o.end > p.start for o in off), f"{p} overlaps an off period"
    for s in result.slices:
        assert not any(o.start < s.end and o.end > s.start for o in off), f"{s} ran while the host was off"


SERIES = ("slices", "rec", "buffers", "rpcs", "decisions", "host_periods")


def standard():
    from pathlib import Path

    from scheduling.engine import load_scenario

    return load_scenario(str(Path(__file__).resolve().parents[2] / "scenarios" / "standard.json"))


@pytest.mark.parametrize("policy", ["boinc7", "boinc5"])
def test_the_chunks_put_end_to_end_give_the_final_series(policy):
    chunks = []
    result = run(
        standard(), policy=policy, duration=2 * 86400.0, seed=4, partial=chunks.append, partial_interval=5 * HOUR
    )
    assert len(chunks) == 10 and [c.last for c in chunks] == [False] * 9 + [True]
    times = [c.time for c in chunks]
    assert times == sorted(times) and times[-1] == 2 * 86400.0
    assert all(b - a >= 5 * HOUR for a, b in zip(times[:-1], times[1:-1]))
    for name in ("rec", "buffers", "rpcs", "decisions"):
        joined = tuple(r for c in chunks for r in getattr(c, name))
        assert joined == getattr(result, name), name
    for name, key in (
        ("slices", lambda s: (s.start, s.resource, s.instance)),
        ("host_periods", lambda h: (h.start, h.state)),
    ):
        joined = [r for c in chunks for r in getattr(c, name)]
        assert len(joined) == len(getattr(result, name)) and tuple(sorted(joined, key=key)) == getattr(result, name)
    assert result.slices and result.host_periods and result.rpcs
    assert chunks[-1].open_slices == () and chunks[-1].open_host_periods == ()


def test_open_slices_and_periods_are_cut_at_the_chunk_time_and_end_later():
    chunks = []
    result = run(standard(), duration=86400.0, seed=4, partial=chunks.append, partial_interval=2 * HOUR)
    opened = [(c, s) for c in chunks for s in c.open_slices]
    assert opened, "jobs are running at some chunk time"
    for chunk, s in opened:
        assert s.start < s.end == chunk.time
        whole = [
            f
            for f in result.slices
            if (f.resource, f.instance, f.job, f.start) == (s.resource, s.instance, s.job, s.start)
        ]
        assert len(whole) == 1 and whole[0].end > chunk.time
    for chunk in chunks:
        for h in chunk.open_host_periods:
            assert h.end == chunk.time
            assert any(f.state == h.state and f.start == h.start and f.end >= h.end for f in result.host_periods)
    assert opened[0][0].to_dict()["open_slices"][0].keys() == {
        "resource",
        "instance",
        "job",
        "project",
        "start",
        "end",
        "why",
    }


def test_asking_for_chunks_does_not_change_the_run():
    plain = run(standard(), duration=86400.0, seed=5)
    watched = run(standard(), duration=86400.0, seed=5, partial=lambda chunk: None, partial_interval=600.0)
    for name in SERIES + ("figures", "projects", "events"):
        assert getattr(plain, name) == getattr(watched, name), name


@pytest.mark.parametrize("compat", ["intended", "bce"])
def test_a_run_that_keeps_no_series_decides_the_same_and_keeps_nothing_else(compat):
    kept = run(cpu_and_gpu_host(), duration=3 * 86400.0, seed=5, compat=compat)
    unkept = run(cpu_and_gpu_host(), duration=3 * 86400.0, seed=5, compat=compat, series=False)
    assert unkept.summary() | {"cpu_seconds": 0} == kept.summary() | {"cpu_seconds": 0}
    assert kept.slices and kept.decisions and kept.rpcs
    assert not any(getattr(unkept, name) for name in SERIES)


def test_partial_interval_must_be_positive():
    with pytest.raises(ValueError, match="partial_interval"):
        run(standard(), duration=HOUR, partial=print, partial_interval=0.0)


def test_the_records_are_named_tuples_as_typing_makes_them():
    import pickle
    import typing

    from scheduling.engine.records import RecordChunk, TimeSlice
    from scheduling.engine.work_fetch import FetchPlan

    Typed = typing.NamedTuple(
        "Typed",
        [(name, object) for name in ("resource", "instance", "job", "project")]
        + [("start", float), ("end", float), ("why", str)],
    )

    s = TimeSlice("cpu", 0, "j", "P", 0.0, 60.0, "edf")
    assert s == Typed(*s) and s._fields == Typed._fields and s._asdict() == Typed(*s)._asdict()
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is TimeSlice
    assert TimeSlice.__doc__.startswith("A job running") and TimeSlice.__module__ == "scheduling.engine.records"
    assert s._replace(end=120.0).end == 120.0
    chunk = RecordChunk(1.0, (s,), (), (), (), (), (), (), (), True)
    assert chunk.to_dict()["slices"] == [s._asdict()]
    assert FetchPlan._fields == ("project", "requests", "reason", "text")
