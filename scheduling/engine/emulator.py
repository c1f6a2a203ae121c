"""The event-driven client emulator (reference/client.md §3, re-done without a fixed step).

The run keeps a heap of `(time, priority, counter, event)`. Decision times (scheduling,
RPCs) fall on the `delta` grid, so the schedule is the one a `delta`-second step would
give wherever that step does not alias; between decisions the emulator jumps straight to the
next event: a job end, a time slice becoming preemptible, a buffer falling to its minimum,
an RPC or work-fetch back-off ending, a result falling due for reporting, or a change of
the host's on / connected / active / gpu_active processes.

`--compat intended` (default): a job preempted and removed from memory loses the work done
since its last checkpoint and pays its app's resume cost; "off" stops every job; the sampled
job size is the real size. `--compat bce` reproduces BOINC's emulator (reference/client.md
§9): free preemption with continuous checkpoints, CPU jobs computing while off, the real
size equal to fpops_est, elapsed time counted twice, GPU peak FLOPS growing with count²,
the RR-sim project order by pointer, REC dropping work done while off, never resetting
master_fetch_failures.

`Emulator` is the coordinator (BOINC's sim.cpp `simulate()`): the event loop, the decision
instant (schedule, RPC, schedule again), the next events, the results. Its sections are
mixins in their own modules, one object so the engine's state stays plain attributes:
host_availability.py (the host's on / connected / active / gpu_active processes),
job_lifecycle.py (start, preempt, checkpoint, finish), accounting.py (time passing, REC,
DCF, the records) and scheduler_rpc.py (master fetches, reports, work-fetch RPCs).
"""

from __future__ import annotations

import heapq
import math
import time as _time
from dataclasses import replace

from .accounting import Accounting, advance_interval, job_ends, set_rates
from .cpu_sched import WHY_EDF
from .draws import make_rng
from .events import EV_ACCT, EV_DONE, EV_END, EV_FETCH, EV_HOST, EV_REPORT, EV_SAMPLE, EV_SLICE, EV_WAKE, N_KINDS
from .host_availability import HOST_PROCESSES, HostAvailability
from .job_lifecycle import JobLifecycle
from .metrics import figures_of_merit
from .records import (
    Decision,
    Discarded,
    HostPeriod,
    ProjectResult,
    RunResult,
)
from .rpc import _due_time, report_cushion
from .rr_sim import rr_simulate
from .scenario import Scenario
from .scheduler_rpc import SchedulerRpc, rpc_poll
from .state import (
    EMULATOR_FIELDS,
    GPU_RELATIVE_SPEED_FACTOR,
    RUNNING,
    WF_EST_FETCH_TIME,
    EmulatorState,
    EngineLimitError,
    ProjectState,
    RandomProcess,
    Resource,
    gpu_allowed,
)

# the kinds of events an epoch makes stale (`_plan`); the others carry their own data
EPOCH_KINDS = frozenset((EV_DONE, EV_SLICE, EV_FETCH, EV_REPORT, EV_WAKE, EV_SAMPLE))

# bounds of the main loop: an instant pushes a few events of each kind and every instant but
# the first is at least `delta` after the one before, so far more than this is a runaway run
MAX_EVENTS_PER_STEP = 64
MAX_EVENTS_PER_INSTANT = 100_000


class Emulator(EmulatorState, HostAvailability, JobLifecycle, Accounting, SchedulerRpc):
    """One run. Build it, call `run()` once, get a `RunResult`.

    __init__ makes the run's fixed parts (resources, projects) and every RandomProcess, in
    one order of draws from `rng`; each section's `_init_*` sets the state it owns."""

    def __init__(
        self,
        scenario: Scenario,
        policy_factory,
        *,
        duration: float,
        delta: float,
        seed: int,
        compat: str,
        existing_jobs_only: bool,
        progress=None,
        sample_interval: float = 600.0,
        policy_name: str = "",
        partial=None,
        partial_interval: float | None = None,
        fixed_step: bool = False,
        servers: dict | None = None,
        series: bool = True,
    ):
        if compat == "bce":
            scenario = _without_max_concurrent(scenario)
        self.scenario = scenario
        self.duration = float(duration)
        self.delta = float(delta)
        # decide at every step, as BOINC's emulator does; only to check the event-driven run
        self.fixed_step = fixed_step
        self.seed = seed
        self.compat = compat
        self.bce = compat == "bce"
        # whether the instant at which the run ends is decided (docs/engine-fidelity.md, "The
        # run's last instant is decided"); a round-robin snapshot shows the state before it
        self.decide_at_end = self.bce
        self.exact_estimates = self.bce
        self.existing_jobs_only = existing_jobs_only
        self.progress = progress
        self.partial = partial
        self.partial_interval = partial_interval if partial_interval else self.duration / 20.0
        self.sample_interval = sample_interval
        self.policy_name = policy_name
        self.rng = make_rng(seed, self.bce)
        host, prefs = scenario.host, scenario.prefs
        self.prefs = prefs
        self.cpu_flops = host.cpu_flops
        self.n_usable_cpus = scenario.n_usable_cpus
        self.work_buf_min = max(prefs.work_buf_min_days * 86400.0, WF_EST_FETCH_TIME)
        self.work_buf_total = max(self.work_buf_min + prefs.work_buf_additional_days * 86400.0, 1.0)
        self.period = prefs.cpu_scheduling_period_minutes * 60.0
        self.rec_half_life = (prefs.rec_half_life_days if prefs.rec_half_life_days > 0 else 10.0) * 86400.0
        cpu_frac = min(max(host.on.frac * host.active.frac, 0.01), 1.0)
        # CLIENT_STATE::overall_gpu_frac is on_frac x gpu_active_frac. BOINC's emulator reads
        # gpu_active_frac as the GPU-active process's fraction of active on-time, so its
        # estimate leaves the active fraction out (docs/engine-fidelity.md); intended counts it
        gpu_frac = min(max((host.on.frac if self.bce else cpu_frac) * host.gpu_active.frac, 0.01), 1.0)
        self.resources = [Resource(0, "cpu", self.n_usable_cpus, 1.0, False, cpu_frac, host.cpu_flops)]
        for g in host.gpus:
            speed = GPU_RELATIVE_SPEED_FACTOR * g.peak_flops / host.cpu_flops
            if self.bce:
                speed *= g.count  # reference/client.md §9.5
            self.resources.append(Resource(len(self.resources), g.name, g.count, speed, True, gpu_frac, host.cpu_flops))
        self.rsc_index = {r.name: r.index for r in self.resources}
        self.total_peak_flops = sum(r.peak_flops for r in self.resources)
        nr = len(self.resources)
        if self.bce:
            # BOINC's emulator draws as it reads client_state.xml: <time_stats> (which the
            # client writes before the projects) starts the host's processes, then each
            # project's <available> starts its own (docs/engine-fidelity.md)
            self.host_proc = {
                name: RandomProcess(getattr(host, name), self.rng, boinc=True, step=self.delta)
                for name in HOST_PROCESSES
            }
        self.projects: list[ProjectState] = []
        for i, spec in enumerate(scenario.projects):
            p = ProjectState(spec, i, nr)
            for app in spec.apps:
                for v in app.versions:
                    r = self.rsc_index.get(v.resource)
                    if r is not None:
                        p.rsc_ok[r] = True
            # BOINC's emulator never learns which processor types a project has apps for: only
            # <no_rsc_apps> in the state file keeps it from asking (compute_rsc_project_reason)
            p.fetch_ok = [res.name not in spec.no_rsc_apps for res in self.resources] if self.bce else list(p.rsc_ok)
            urls = spec.scheduler_urls or ()
            p.urls = [(u.url, RandomProcess(u.available, self.rng)) for u in urls]
            # a project without <available> (fraction 1) starts no process in BOINC's emulator;
            # one with the element starts one, which draws twice even at fraction 1
            stated = spec.available.frac < 1.0 or spec.available_stated
            p.available = RandomProcess(spec.available, self.rng, boinc=self.bce and stated)
            self.projects.append(p)
        # BOINC's emulator sorts projects by name every step (reference/client.md §9.10)
        self.project_order = sorted(self.projects, key=lambda p: p.name) if self.bce else list(self.projects)
        if not self.bce:
            self.host_proc = {name: RandomProcess(getattr(host, name), self.rng) for name in HOST_PROCESSES}
        self._init_host()
        self._init_jobs()
        self._init_accounting()
        self._init_rpc(servers)
        self.now = 0.0
        self.decisions: list[Decision] = []
        # (project, value) pairs the last run list started from per resource (-1: all), quoted
        # by the decision log
        self.pick_table: dict = {}
        # the (project, value after the pick) of each pick of that run list, in pick order
        self.pick_log: dict = {}
        self.state_version = 0
        self._rr_cache = None
        self.events = 0
        self.epoch = 0
        self.must_schedule = True
        # a caller that reads only the figures and the projects' totals (the command line
        # without --out) keeps none of the series, nor the jobs that were, which over a long
        # run is most of the memory (issue 33), and the decision log's sentences are not
        # written; the run decides the same
        self.keeps_series = series
        if not series:
            for name in ("slices", "rec_samples", "buffer_samples", "rpc_events", "decisions", "host_periods"):
                setattr(self, name, Discarded())
            self.all_jobs = Discarded()
        self.policy = policy_factory(self)
        self._add_initial_jobs()

    # ------------------------------------------------------------------ helpers

    def job_peak_flops(self, j) -> float:
        """Peak FLOPS a job uses: CPUs at p_fpops plus GPUs at their relative speed (§6.2)."""
        gpu = j.gpu_usage * self.resources[j.rsc].relative_speed if j.rsc else 0.0
        return (j.avg_ncpus + gpu) * self.cpu_flops

    def grid(self, t: float) -> float:
        """The first decision time at or after `t`, never before the next step."""
        return grid_time(self.now, self.delta, t)

    def log(self, kind: str, project: str, job: str, text: str) -> None:
        self.decisions.append(Decision(self.now, kind, project, job, text))

    def rr(self):
        """The policy's round-robin simulation, computed once per instant and state (current_rr)."""
        return current_rr(self)

    def rr_now(self):
        """The round-robin simulation made at this instant, if one was (rr_made_now)."""
        return rr_made_now(self)

    # ------------------------------------------------------------------ main loop

    def run(self) -> RunResult:
        """The whole run at once: `begin`, `advance_to` the end, `result`."""
        self.begin()
        self.advance_to(math.inf)
        return self.result()

    def begin(self) -> None:
        """Start the run: its first events. A caller that drives the run from outside (a
        volunteer world, whose hosts are emulators) then calls `advance_to` at times of its
        own, and `result` at the end; the run is the one `run()` makes."""
        self._wall0 = _time.process_time()
        self._heap: list = []
        self._counter = [0]
        # the entry [time, kind, order, epoch, count] waiting for each (time, kind) of
        # EPOCH_KINDS: by kind, a dict of the entries by time
        self._waiting: list = [{} for _ in range(N_KINDS)]
        self._push = EventPush(self._heap, self._waiting, self._counter)
        push = self._push
        push(self.duration, EV_END)
        push(0.0, EV_FETCH, self.epoch)
        if self.bce:
            self._gate_host_clocks(push_events=False)
        for name, proc in self.host_proc.items():
            if proc.next_change < math.inf:
                self._push_host(proc, name)
        self._loop = {
            "next_progress": 0.0,
            "next_partial": self.partial_interval,
            "live": False,
            "light": True,  # only schedule checks (EV_SLICE) fired at this instant
            "sample_due": False,
            "instant_events": 0,
        }
        self.ended = False

    def __reduce__(self):
        # pickled as its attributes (__getstate__), on either core: the compiled core's C type
        # of EmulatorState would otherwise pickle its own way, which the other core cannot read
        return (_new_emulator, (), self.__getstate__())

    def __getstate__(self) -> dict:
        # the attributes of EmulatorState, which on the compiled core are not in __dict__, and
        # the others; the push object holds the heap, and is made again on unpickling
        state = {name: getattr(self, name) for name in EMULATOR_FIELDS if hasattr(self, name)}
        state.update(self.__dict__)
        state.pop("_push", None)
        state.pop("_rates_of", None)  # set again by the next set_rates
        # the round-robin simulations' and make_run_list's columns are working space, made
        # again at the next one
        state.pop("_rr_by_priority", None)
        state.pop("_rr_repick", None)
        state.pop("_run_list_picks", None)
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("keeps_series", True)  # a run pickled before runs could keep none
        state.setdefault("_rates_of", None)
        waiting = state.get("_waiting")
        if isinstance(waiting, dict):  # pickled when one dict keyed by (time, kind) held them
            by_kind: list = [{} for _ in range(N_KINDS)]
            for (t, kind), entry in waiting.items():
                by_kind[kind][t] = entry
            state["_waiting"] = by_kind
        for name, value in state.items():
            setattr(self, name, value)
        if "_heap" in state:
            self._push = EventPush(self._heap, self._waiting, self._counter)

    def change_buffer(self, min_days: float, additional_days: float) -> None:
        """The work buffer preferences edited while the run goes (reference/client.md §2, a
        volunteer's prefs form): they hold from the next fetch check on, on the next step."""
        self.prefs = replace(self.prefs, work_buf_min_days=min_days, work_buf_additional_days=additional_days)
        self.work_buf_min = max(min_days * 86400.0, WF_EST_FETCH_TIME)
        self.work_buf_total = max(self.work_buf_min + additional_days * 86400.0, 1.0)
        self.state_version += 1
        self._push(self.grid(self.now), EV_FETCH, self.epoch)

    @property
    def next_time(self) -> float:
        """The time of the run's next instant; infinity once it has ended."""
        if self.ended or not self._heap:
            return math.inf
        return min(self._heap[0][0], self.duration)

    def advance_to(self, t_stop: float) -> None:
        """Play every instant of the run up to `t_stop` seconds, all of it for infinity
        (advance_events)."""
        advance_events(self, t_stop)

    def result(self) -> RunResult:
        """End the run at its duration (the open slices and host periods closed there) and
        return its records."""
        self.now = self.duration
        for j in list(self.running):
            self._close_slice(j, self.duration)
        for state, start in sorted(self.host_down_since.items(), key=lambda kv: (kv[1], kv[0])):
            if self.duration > start:
                self.host_periods.append(HostPeriod(start, self.duration, state))
        self.host_down_since = {}
        if self.partial is not None:
            self.partial(self._chunk(True))
        if self.progress is not None:
            self.progress(1.0)
        return self._result(_time.process_time() - self._wall0)

    # ------------------------------------------------------------------ decisions

    def _decide(self) -> None:
        """One decision instant: schedule, at most one RPC, schedule again (decide)."""
        decide(self)

    def _schedule_unchanged(self) -> bool:
        """Whether the schedule stays as it is at an instant of schedule checks only
        (schedule_unchanged)."""
        return schedule_unchanged(self)

    def _schedule(self) -> None:
        """Make the schedule of this instant (schedule)."""
        schedule(self)

    def _plan(self) -> None:
        """Push the next events (plan)."""
        plan(self)

    # ------------------------------------------------------------------ results

    def snapshot(self) -> dict:
        """The round-robin simulation at `now` in the `rrsim --json` shape (DESIGN.md).
        Shortfalls are in instance-seconds, times in seconds from the start of the run."""
        now = self.now
        if self.policy_name == "boinc5":
            rr = self.policy.rr(now)
            per_project = {p.index: rr.project_shortfall[p.index] for p in self.projects}
            total = rr.total_shortfall
        else:
            rr = rr_simulate(self, now, detail=True)
            per_project = {
                p.index: sum(v for (pi, _r), v in rr.project_rsc_shortfall.items() if pi == p.index)
                for p in self.projects
            }
            total = sum(rs.shortfall for rs in rr.rsc)
        resources = {}
        for r, res in enumerate(self.resources):
            rs = rr.rsc[r]
            resources[res.name] = {
                "shortfall": _round(rs.shortfall),
                "nidle_now": _round(rs.nidle_now),
                "saturated_time": _round(rs.saturated_time),
                "busy_time": _round(rs.busy_time),
            }
        projects = []
        for p in self.projects:
            per_rsc = {}
            for r, res in enumerate(self.resources):
                if not p.rsc_ok[r]:
                    continue
                entry = {
                    "deadlines_missed": rr.misses.get((p.index, r), 0),
                    "nused_total": _round(rr.nused_total.get((p.index, r), 0.0)),
                }
                if (p.index, r) in rr.project_rsc_shortfall or self.policy_name != "boinc5":
                    entry["shortfall"] = _round(rr.project_rsc_shortfall.get((p.index, r), 0.0))
                per_rsc[res.name] = entry
            projects.append(
                {
                    "name": p.name,
                    "shortfall": _round(per_project[p.index]),
                    "deadlines_missed": sum(v for (pi, _r), v in rr.misses.items() if pi == p.index),
                    "resources": per_rsc,
                }
            )
        jobs = [
            {
                "name": j.name,
                "project": p.name,
                "resource": self.resources[j.rsc].name,
                "projected_finish": _round(j.rr_finish),
                "deadline": _round(j.deadline),
                "deadline_miss": bool(j.rr_miss),
            }
            for p in self.projects
            for j in p.jobs
        ]
        return {
            "time": now,
            "policy": self.policy_name,
            "resources": resources,
            "projects": projects,
            "jobs": jobs,
            "total_shortfall": _round(total),
            "work_buf_min": self.work_buf_min,
            "work_buf_total": self.work_buf_total,
        }

    def _result(self, cpu_seconds: float) -> RunResult:
        figures, flops_total = figures_of_merit(self)
        projects = tuple(
            ProjectResult(
                p.name,
                p.share,
                p.flops_used,
                p.flops_wasted,
                p.flops_lost,
                p.deadlines_met,
                p.deadlines_missed,
                p.jobs_completed,
                p.jobs_received,
                p.rpcs,
                p.rpc_failures,
                p.rec,
            )
            for p in self.projects
        )
        resources = {
            r.name: {"instances": r.ninstances, "relative_speed": r.relative_speed, "peak_flops": r.peak_flops}
            for r in self.resources
        }
        return RunResult(
            scenario=self.scenario.name,
            policy=self.policy_name,
            seed=self.seed,
            compat=self.compat,
            duration=self.duration,
            delta=self.delta,
            cpu_seconds=cpu_seconds,
            figures=figures,
            projects=projects,
            slices=tuple(sorted(self.slices, key=lambda s: (s.start, s.resource, s.instance))),
            rec=tuple(self.rec_samples),
            buffers=tuple(self.buffer_samples),
            rpcs=tuple(self.rpc_events),
            decisions=tuple(self.decisions),
            host_periods=tuple(sorted(self.host_periods, key=lambda h: (h.start, h.state))),
            events=self.events,
            flops_total=flops_total,
            resources=resources,
        )


def _new_emulator() -> Emulator:
    """An Emulator without attributes, which unpickling then sets (Emulator.__setstate__)."""
    return Emulator.__new__(Emulator)


# The run's heap of events, ordered as heapq orders it. Where this module runs as Python, heapq's
# own functions keep it; the compiled module keeps it with heap_push and heap_pop, the same
# algorithm as heapq's (CPython's _heapq: the same moves, so the same heap and the same order
# of pops) with the entries compared as their first fields' C values (emulator.pxd)
_OWN_HEAP = not __file__.endswith(".py")


def entry_before(a: list, b: list) -> bool:
    """a < b for two entries [time, kind, order, data, count], as the lists compare (the
    first fields that differ decide), the times and kinds taken as numbers."""
    ta = a[0]
    tb = b[0]
    if ta != tb:
        return ta < tb
    ka = a[1]
    kb = b[1]
    if ka != kb:
        return ka < kb
    return a < b


def heap_push(heap: list, entry: list) -> None:
    """heapq.heappush with entry_before."""
    heap.append(entry)
    _sift_down(heap, 0, len(heap) - 1)


def heap_pop(heap: list) -> list:
    """heapq.heappop with entry_before."""
    last = heap.pop()
    if heap:
        first = heap[0]
        heap[0] = last
        _sift_up(heap, 0)
        return first
    return last


def _sift_down(heap: list, start: int, pos: int) -> None:
    """heapq's _siftdown: the entry at `pos` moves up towards `start` past every greater parent."""
    entry = heap[pos]
    while pos > start:
        parent_pos = (pos - 1) >> 1
        parent = heap[parent_pos]
        if entry_before(entry, parent):
            heap[pos] = parent
            pos = parent_pos
            continue
        break
    heap[pos] = entry


def _sift_up(heap: list, pos: int) -> None:
    """heapq's _siftup: the smaller child moves up until a leaf is free, then the entry sifts
    down from there."""
    end = len(heap)
    start = pos
    entry = heap[pos]
    child = 2 * pos + 1
    while child < end:
        right = child + 1
        if right < end and not entry_before(heap[child], heap[right]):
            child = right
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    heap[pos] = entry
    _sift_down(heap, start, pos)


class EventPush:
    """Emulator._push(t, kind, data=None, order=None): push an event on the run's heap of
    `[time, kind, order, data, count]` entries. `order` ranks events of one kind at one
    instant; by default, push order (`counter[0]`, which each push without one advances).

    An event of a kind that goes stale by epoch (EPOCH_KINDS) joins the one of its kind
    already waiting at its time, if any (`waiting`: (time, kind) -> entry): those are popped
    together at that instant, where only whether one of them is of the current epoch counts,
    and the newest has the newest epoch; the entry's count keeps `events` as one entry each
    would. emulator.pxd makes it a C type, whose `push` the main loop and the plan call as a
    C function."""

    def __init__(self, heap: list, waiting: list, counter: list):
        self.heap = heap
        self.waiting = waiting
        self.counter = counter

    def __call__(self, t, kind, data=None, order=None) -> None:
        self.push(t, kind, data, order)

    def push(self, t, kind, data=None, order=None) -> None:
        counter = self.counter
        if order is None and kind in EPOCH_KINDS:
            waiting = self.waiting[kind]
            entry = waiting.get(t)
            if entry is not None:
                entry[3] = data
                entry[4] += 1
                return
            counter[0] += 1
            entry = [t, kind, counter[0], data, 1]
            waiting[t] = entry
        else:
            counter[0] += 1
            entry = [t, kind, counter[0] if order is None else order, data, 1]
        if _OWN_HEAP:
            heap_push(self.heap, entry)
        else:
            heapq.heappush(self.heap, entry)


def current_rr(em):
    """The policy's round-robin simulation, computed once per instant and state.

    BOINC's rr_simulation() runs at most once per instant (rr_sim.cpp, "one simulation
    per moment"), so under `--compat bce` jobs an RPC brings, or a job started, at this
    instant are not in it until the next step: a fetched job is no deadline-miss
    candidate and does not fill the buffer of a later check at the same instant
    (docs/engine-fidelity.md, "One round-robin simulation per instant")."""
    cache = em._rr_cache
    if em.bce and cache is not None and cache[0][0] == em.now:
        return cache[1]
    key = (em.now, em.state_version)
    if cache is None or cache[0] != key:
        cache = em._rr_cache = (key, em.policy.rr(em.now))
    return cache[1]


def rr_made_now(em):
    """The round-robin simulation made at this instant, if one was."""
    cache = em._rr_cache
    return cache[1] if cache is not None and cache[0][0] == em.now else None


def advance_events(em, t_stop: float) -> None:
    """Play every instant of the run up to `t_stop` seconds (all of it for infinity)."""
    heap, waiting, events = em._heap, em._waiting, em._push
    loop = em._loop
    next_progress, next_partial = loop["next_progress"], loop["next_partial"]
    live, light, sample_due = loop["live"], loop["light"], loop["sample_due"]
    instant_events = loop["instant_events"]
    max_events = MAX_EVENTS_PER_STEP * (em.duration / em.delta + 1.0) + 10_000
    while heap and not em.ended:
        if heap[0][0] > t_stop and heap[0][0] > em.now:
            break
        entry = heap_pop(heap) if _OWN_HEAP else heapq.heappop(heap)
        t, kind, _c, data, count = entry
        of_kind = waiting[kind]
        if of_kind.get(t) is entry:
            del of_kind[t]
        if t > em.duration:
            t = em.duration
        if t > em.now:
            advance_interval(em, t)
            instant_events = 0
        em.events += count
        instant_events += count
        if em.events > max_events or instant_events > MAX_EVENTS_PER_INSTANT:
            # the counts at the first of the entry's events past a bound
            while count > 1 and (em.events - 1 > max_events or instant_events - 1 > MAX_EVENTS_PER_INSTANT):
                em.events -= 1
                instant_events -= 1
                count -= 1
            raise EngineLimitError(
                f"the run made {em.events} events by {em.now:.0f} s, {instant_events} of them at that "
                f"instant: the scenario's numbers or the step of {em.delta:g} s keep time from moving on"
            )
        if kind == EV_END:
            if em.decide_at_end and live and not (light and schedule_unchanged(em)):
                # BOINC's emulator makes its last pass at now == start + duration
                # (simulate() stops only once now is past it): what is due at the
                # end is decided, an RPC included (docs/engine-fidelity.md)
                decide(em)
            em.ended = True
            break
        if kind == EV_HOST:
            em._host_change(data)
            live = True
            light = False
        elif kind == EV_ACCT:
            em._account_change(data)
            live = True
        elif kind == EV_DONE or kind == EV_SLICE:
            if data == em.epoch:
                em.must_schedule = True
                live = True
                light = light and kind == EV_SLICE
        elif kind == EV_SAMPLE:
            sample_due = data == em.epoch
        elif data == em.epoch:
            live = True
            light = False
        if heap and heap[0][0] <= em.now:
            continue
        if live:
            if not (light and schedule_unchanged(em)):
                decide(em)
            plan(em)
            live = False
        elif sample_due and em.on:
            # a series sample between decisions: records only, the run is unchanged
            em._sample()
            events.push(grid_time(em.now, em.delta, em.last_sample + em.sample_interval), EV_SAMPLE, em.epoch)
        light = True
        sample_due = False
        if em.progress is not None and em.now >= next_progress:
            em.progress(min(em.now / em.duration, 1.0))
            next_progress = em.now + em.duration / 100.0
        if em.partial is not None and next_partial <= em.now < em.duration:
            em.partial(em._chunk(False))
            next_partial = em.now + em.partial_interval
    if not heap:
        em.ended = True
    loop.update(
        next_progress=next_progress,
        next_partial=next_partial,
        live=live,
        light=light,
        sample_due=sample_due,
        instant_events=instant_events,
    )


def decide(em) -> None:
    """One decision instant: schedule, at most one RPC, schedule again if it brought work
    (the emulator's "repeat until no action", §3)."""
    if not em.on:
        return
    cpu_ok = em.bce or em.active
    if em.must_schedule and cpu_ok:
        schedule(em)
    em.rpc_this_instant = False
    got_work = em.connected and rpc_poll(em) and cpu_ok
    if em.bce:
        # the end of the emulator's first pass sets gpu_suspend_reason; the second pass,
        # which an RPC that brought jobs asks for, schedules with it, so GPU jobs start
        # or stop in this step then, and otherwise on the next (docs/engine-fidelity.md)
        gpu = em.active and em.gpu_active
        changed = gpu != em.gpu_seen
        em.gpu_seen = gpu
        if got_work:
            schedule(em)
            # that schedule used the round-robin simulation made before the RPC (rr());
            # the next step's fresh one may call the new jobs deadline misses
            em.must_schedule = True
        elif changed:
            em.must_schedule = em.gpu_recheck = True
    elif got_work:
        schedule(em)
    em._sample()


def schedule_unchanged(em) -> bool:
    """At an instant with only schedule checks: whether a schedule made with the last
    round-robin simulation, still valid for it (policy.rr_still_valid), keeps every
    running job as it is. Then nothing is done, as a fixed step would do nothing: no
    RPC can be due, since fetch checks, reports and back-off ends are events of their
    own."""
    if em.fixed_step or not em.on or not (em.bce or em.active):
        return False
    cache = em._rr_cache
    valid = getattr(em.policy, "rr_still_valid", None)
    if cache is None or valid is None or cache[0][1] != em.state_version or not valid(em.now, cache[1]):
        return False
    gpu_ok = gpu_allowed(em)
    if getattr(cache[1], "gpu_cpu", True) != gpu_ok:
        return False  # GPU computing was allowed or suspended since: the simulation counts CPUs otherwise
    chosen = em.policy.run_list(em.now, cache[1], gpu_ok)
    if len(chosen) != len(em.running):
        return False
    for j, why, _inst in chosen:
        if j.state != RUNNING or (why == WHY_EDF and j.slice_why != WHY_EDF):
            return False
    em.must_schedule = False
    em._sample()
    return True


def schedule(em) -> None:
    """Emulator._schedule: the policy's run list with the instant's round-robin simulation;
    the jobs it leaves out are preempted, the others start or go on, then the rates."""
    em.must_schedule = False
    rr = current_rr(em)
    chosen = em.policy.run_list(em.now, rr, gpu_allowed(em))
    keep = {j for j, _w, _i in chosen}
    for j in list(em.running):
        if j not in keep:
            em._preempt(j, "the scheduler gave its instance to another job")
    for j, why, inst in chosen:
        if j.state == RUNNING:
            if j.rsc and inst >= 0 and inst != j.instance:
                # a job placed before it in the run list took its device (the instances are
                # handed out in run-list order, cpu_sched.assign_coprocs): it goes on computing
                # on the device found for it, in a new slice, never two jobs on one device
                em._close_slice(j, em.now)
                j.slice_start = em.now
                j.instance = inst
            if why == WHY_EDF and j.slice_why != WHY_EDF:
                em._close_slice(j, em.now)
                j.slice_start = em.now
                j.slice_why = why
                j.once_ran_edf = True
            continue
        em._start(j, why, inst)
    set_rates(em)


def plan(em) -> None:
    """Push the next events: the earliest job end, time slice, fetch check, report and
    back-off end. Older events of the same kinds become stale (epoch).

    While the host is off nothing is decided (§3 step 3), so only job ends (BOINC's
    emulator computes while off) are pushed; the host coming on is an event of its own.
    While disconnected no RPC can happen, so the next fetch check waits for the
    connection. A result already due for reporting but not reported is held back by the
    host, the connection or a back-off, each of which has its own event."""
    em.epoch += 1
    epoch = em.epoch
    now = em.now
    events = em._push
    set_rates(em)
    ends = job_ends(em.running, now)
    if ends:
        events.push(grid_time(em.now, em.delta, min(ends)), EV_DONE, epoch)
    if not em.on:
        return
    if em.fixed_step:
        events.push(now + em.delta, EV_SLICE, epoch)
    t_slice = em.policy.reschedule_at(now)
    if t_slice < math.inf:
        # the first grid step at or after the first instant the schedule may change
        events.push(grid_time(em.now, em.delta, t_slice), EV_SLICE, epoch)
    rr = rr_made_now(em)
    if em.gpu_recheck:
        em.gpu_recheck = False
        events.push(now + em.delta, EV_SLICE, epoch)
    elif getattr(em.policy, "unfinished_slice_first", False) and _started_at(em.running, now):
        # a job started now is in an unfinished time slice from the next schedule on
        # (append_unfinished_time_slice takes only jobs already scheduled), which can
        # move it ahead of running jobs in enforce_run_list's order (more_important)
        events.push(now + em.delta, EV_SLICE, epoch)
    if em.rpc_this_instant:
        # one RPC per instant: a fetch it left waiting is looked at on the next step
        events.push(now + em.delta, EV_FETCH, epoch)
    elif not em.connected:
        pass
    elif rr is not None:
        events.push(grid_time(em.now, em.delta, em.policy.next_fetch_check(now, rr)), EV_FETCH, epoch)
    else:
        events.push(grid_time(em.now, em.delta, now + em.delta), EV_FETCH, epoch)
    # the first report due from now (rpc.report_due_time), and the first end of an RPC
    # back-off or of a resource's back-off after now, each a min() over the times written out
    cushion = report_cushion(em)
    due = wake = 0.0
    any_due = any_wake = False
    for p in em.projects:
        for j in p.ready:
            t = _due_time(j, cushion)
            if t >= now and (not any_due or t < due):
                due = t
                any_due = True
        t = p.min_rpc_time
        if t > now and (not any_wake or t < wake):
            wake = t
            any_wake = True
    for p in em.projects:
        for t in p.backoff_time:
            if t > now and (not any_wake or t < wake):
                wake = t
                any_wake = True
    if any_due:
        events.push(grid_time(em.now, em.delta, due + 1e-6), EV_REPORT, epoch)
    if any_wake:
        events.push(grid_time(em.now, em.delta, wake), EV_WAKE, epoch)
    events.push(grid_time(em.now, em.delta, em.last_sample + em.sample_interval), EV_SAMPLE, epoch)


def _started_at(running, now: float) -> bool:
    """Whether a running job started at `now` (plan)."""
    for j in running:
        if j.run_start == now:
            return True
    return False


def grid_time(now: float, delta: float, t: float) -> float:
    """Emulator.grid: the first step of `delta` at or after `t`, at least `now` + `delta`.
    A finite ceiling is taken as -(-x // 1.0), which is exactly math.ceil's value as a
    float; an infinite or undefined time raises in math.ceil, as it did. emulator.pxd types
    it in C doubles."""
    x = t / delta - 1e-9
    if x - x == 0.0:  # x is finite (for an infinite or undefined x it is undefined)
        c = -(-x // 1.0)
    else:
        c = math.ceil(x)
    g = c * delta
    first = now + delta
    return first if first > g else g  # max(g, first)


def _without_max_concurrent(scenario: Scenario) -> Scenario:
    """BOINC's emulator reads max_concurrent from client_state.xml, but check_app_config()
    (app_config.cpp) then clears APP::max_concurrent of every project that has no
    app_config.xml, so only the limits of projects with one hold (docs/engine-fidelity.md)."""
    if not any(a.max_concurrent for p in scenario.projects if not p.app_config for a in p.apps):
        return scenario
    projects = tuple(
        p if p.app_config else replace(p, apps=tuple(replace(a, max_concurrent=0) for a in p.apps))
        for p in scenario.projects
    )
    return replace(scenario, projects=projects)


def _round(x: float) -> float:
    """Output rounding: a micro-second or micro-instance is below any rule's resolution."""
    return round(float(x), 6)
