"""boincweb's client scheduling engine: an event-driven emulator of BOINC's client.

No Django here: the engine reads scenarios, runs policies and returns immutable records.
Its modules run compiled (Cython, built by `make install`: build.py) or as pure Python, with
the same results; `CORE` says which, and `BOINCWEB_ENGINE_CORE` chooses (_core.py).
`python -m scheduling.engine SCENARIO` is `manage.py simulate` without Django (__main__.py).

Public API
----------

`load_scenario(path) -> Scenario`
    `*.txt`: seed 001's P(C, D, R) notation; a directory or `*.xml`: BOINC's client_state.xml
    with global_prefs.xml / cc_config.xml beside it; `*.json`: our format. Also
    `read_pcdr(text)`, `read_client_state(path)`, `read_json(text)` and
    `scenario_to_dict(scenario)` (the JSON form). Bad input raises `ScenarioError`, whose
    message names the line, element or key.

`run(scenario, *, policy="boinc7", duration=864000, delta=60, seed=1, compat="intended",
    existing_jobs_only=False, progress=None, sample_interval=600, partial=None,
    partial_interval=None, series=True) -> RunResult`
    Simulates `duration` seconds. `policy` is one of `POLICIES` ("boinc7", "boinc5", "wrr",
    "fifo"); decisions fall on a `delta`-second grid; `seed` drives the one
    `random.Random`; `compat` is "intended" or "bce" (BOINC's emulator, reference/client.md
    §9); `progress(fraction)` is called as the run advances; REC and buffer series are
    sampled at most every `sample_interval` seconds. `partial(chunk)` receives a
    `RecordChunk` (records.py) each time `partial_interval` simulated seconds (default a
    twentieth of the run) have passed since the previous one, and a last one at the end:
    the records produced since the previous chunk, plus the slices and host periods still
    open. Chunks do not change the run. `series=False` keeps none of the series (slices,
    rec, buffers, rpcs, decisions, host_periods: empty in the result and its chunks), for a
    caller that reads only the figures and the projects' totals; the run is the same.
    Raises ValueError on bad arguments, a ScenarioError (a ValueError) naming the limit for
    a duration over `scenario.MAX_DURATION` or a step outside [`MIN_DELTA`, `MAX_DELTA`]
    (scenario.py, "Limits").

`start(scenario, *, servers=None, **the arguments of run) -> Emulator`
    A run to drive from outside, already begun: `em.advance_to(t)` plays it up to `t`
    seconds, `em.next_time` is its next instant, `em.result()` ends it. `servers` maps a
    project's name to its scheduler (server.py `Server`: `rpc(em, project, requests,
    reported) -> ServerReply | None`); the other projects get the emulated one. The run
    pickles between instants. A volunteer world's engine hosts are such runs (world/engine_host.py).

`cost.estimate(scenario, duration, delta=60) -> Estimate`
    The run's expected jobs, queue, decisions and engine seconds, before it runs (cost.py);
    the lab refuses runs over its budget with it.

`get_policy(name)`
    The policy class called `name` (one of `POLICIES`); ValueError naming the known ones
    otherwise. A policy is one module of policies/ (reference/client.md §6, debt-era.md).

`rr_snapshot(scenario, *, policy="boinc7", at=0.0, seed=1, compat="intended") -> dict`
    The round-robin simulation of the state at `at` seconds, in the `rrsim --json` shape of
    DESIGN.md.

`RunResult` (records.py), frozen, with `to_dict()`, `summary()` and `results_dat_line()`:
    scenario, policy, seed, compat, duration, delta, cpu_seconds, events, flops_total,
    resources {name: {instances, relative_speed, peak_flops}},
    figures: Figures(wasted_fraction, idle_fraction, share_violation, monotony, rpcs_per_job),
    projects: ProjectResult(name, resource_share, flops_used, flops_wasted, flops_lost,
        deadlines_met, deadlines_missed, jobs_completed, jobs_received, rpcs, rpc_failures, rec),
    slices: TimeSlice(resource, instance, job, project, start, end, why) with why in
        "edf", "priority", "unfinished_time_slice", "fifo",
    rec: RecSample(time, project, rec, priority, short_term_debt, long_term_debt),
    buffers: BufferSample(time, resource, saturated_time, shortfall, nidle_now, busy_time,
        work_buf_min, work_buf_total),
    rpcs: RpcEvent(time, project, url, reason, ok, requests, jobs_received, reported,
        backoff, message),
    decisions: Decision(time, kind, project, job, text), kind in "schedule", "preempt",
        "finish", "fetch", "rpc", "backoff",
    host_periods: HostPeriod(start, end, state) with state in "off", "not_active" (computing
        suspended), "gpu_suspended", "disconnected" (reference/client.md §2).
    Times are seconds from the start of the run, FLOPs are floating-point operations.
"""

from __future__ import annotations

import gc

# importing the engine makes thousands of lasting objects and little garbage: the collections
# they would set off were about 6 % of `python -m scheduling.engine`'s start-up (issue 33),
# so the collector waits until the imports below are done
_collecting = gc.isenabled()
gc.disable()
try:
    import math

    from . import _core

    # the core chosen by BOINCWEB_ENGINE_CORE (_core.py), before the modules below are imported
    _core.select()
    _core.import_dataclasses()

    from .emulator import Emulator
    from .policies import POLICIES, get_policy
    from .readers import load_scenario, read_client_state, read_json, read_pcdr, scenario_to_dict
    from .records import (
        BufferSample,
        Decision,
        Figures,
        HostPeriod,
        ProjectResult,
        RecordChunk,
        RecSample,
        RpcEvent,
        RunResult,
        TimeSlice,
    )
    from .scenario import Scenario, ScenarioError, check_run
finally:
    if _collecting:
        gc.enable()

COMPAT_MODES = ("intended", "bce")
# which core runs: "compiled" (the Cython-built modules) or "python" (_core.py)
CORE = _core.loaded()

__all__ = [
    "COMPAT_MODES",
    "CORE",
    "POLICIES",
    "BufferSample",
    "Decision",
    "Figures",
    "HostPeriod",
    "ProjectResult",
    "RecordChunk",
    "RecSample",
    "RpcEvent",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "TimeSlice",
    "get_policy",
    "load_scenario",
    "read_client_state",
    "read_json",
    "read_pcdr",
    "rr_snapshot",
    "run",
    "scenario_to_dict",
    "start",
]


def _emulator(
    scenario,
    policy,
    duration,
    delta,
    seed,
    compat,
    existing_jobs_only,
    progress,
    sample_interval,
    partial=None,
    partial_interval=None,
    servers=None,
    series=True,
) -> Emulator:
    cls = get_policy(policy)
    if compat not in COMPAT_MODES:
        raise ValueError(f"unknown compat mode {compat!r} (expected intended or bce)")
    if not isinstance(scenario, Scenario):
        raise ValueError(f"expected a Scenario, not {type(scenario).__name__}")
    check_run(duration=duration, delta=delta)
    if not (isinstance(sample_interval, (int, float)) and math.isfinite(sample_interval) and sample_interval > 0):
        raise ValueError("sample_interval must be a positive finite number")
    if partial_interval is not None and not (math.isfinite(partial_interval) and partial_interval > 0):
        raise ValueError("partial_interval must be positive")
    return Emulator(
        scenario,
        cls,
        duration=duration,
        delta=delta,
        seed=seed,
        compat=compat,
        existing_jobs_only=existing_jobs_only,
        progress=progress,
        sample_interval=sample_interval,
        policy_name=policy,
        partial=partial,
        partial_interval=partial_interval,
        servers=servers,
        series=series,
    )


def start(
    scenario: Scenario,
    *,
    servers: dict | None = None,
    policy: str = "boinc7",
    duration: float = 864000.0,
    delta: float = 60.0,
    seed: int = 1,
    compat: str = "intended",
    sample_interval: float = 600.0,
) -> Emulator:
    """A begun run that its caller advances; see the module docstring."""
    em = _emulator(scenario, policy, duration, delta, seed, compat, False, None, sample_interval, None, None, servers)
    em.begin()
    return em


def run(
    scenario: Scenario,
    *,
    policy: str = "boinc7",
    duration: float = 864000.0,
    delta: float = 60.0,
    seed: int = 1,
    compat: str = "intended",
    existing_jobs_only: bool = False,
    progress=None,
    sample_interval: float = 600.0,
    partial=None,
    partial_interval: float | None = None,
    series: bool = True,
) -> RunResult:
    """Run the emulator; see the module docstring."""
    em = _emulator(
        scenario,
        policy,
        duration,
        delta,
        seed,
        compat,
        existing_jobs_only,
        progress,
        sample_interval,
        partial,
        partial_interval,
        series=series,
    )
    return em.run()


def rr_snapshot(
    scenario: Scenario,
    *,
    policy: str = "boinc7",
    at: float = 0.0,
    seed: int = 1,
    compat: str = "intended",
    delta: float = 60.0,
) -> dict:
    """The round-robin simulation at `at` seconds (`rrsim --json`, DESIGN.md)."""
    check_run(at=at)
    if policy not in ("boinc7", "boinc5"):
        raise ValueError(f"rrsim supports the boinc7 and boinc5 policies, not {policy!r}")
    em = _emulator(scenario, policy, at if at > 0 else delta, delta, seed, compat, False, None, 600.0)
    em.decide_at_end = False
    if at > 0:
        em.run()
    em.now = at
    return em.snapshot()
