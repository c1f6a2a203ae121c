"""Mutable run state the emulator and the policies share: resources, projects, jobs.

These objects live only inside one run; what leaves a run are the records of records.py.
"""

from __future__ import annotations

import math

from .scenario import App, AppVersion, Availability, Project, ScenarioError

QUEUED, RUNNING, FINISHED = 0, 1, 2


class EngineLimitError(ScenarioError):
    """A loop of the engine went past its bound: the scenario's numbers (speeds, sizes, mean
    up times) are so far out of range that the run would never end. Callers show it as they
    show any ScenarioError."""


# RandomProcess.advance: changes applied in one call before the process is called runaway
MAX_CHANGES_PER_ADVANCE = 1_000_000

# reference/client.md §6.8
COBBLESTONE_SCALE = 200.0 / 86400e9
GPU_RELATIVE_SPEED_FACTOR = 0.2
WF_EST_FETCH_TIME = 180.0


class RandomProcess:
    """Two-state alternating process (reference/client.md §2): up periods exponential with
    mean `mean_up`, down periods with mean `mean_up/frac - mean_up`; starts up with
    probability `frac`. Advanced lazily: `advance(t)` applies every change up to `t`."""

    __slots__ = ("frac", "mean_up", "rng", "up", "next_change", "time_left", "lazy", "owed", "step")

    def __init__(self, availability: Availability, rng, start: float = 0.0, *, boinc: bool = False, step: float = 0.0):
        """`boinc`: start as RANDOM_PROCESS::init (sim_util.cpp) does under `--compat bce`: it
        always draws twice (the state, then the period), even for a process that is always up.
        With a `step` as well, the process is sampled as BOINC's emulator samples it every
        step: `advance` flips it at the step in whose interval its period ends (`change_step`)
        and its next period is drawn only at `settle` (docs/engine-fidelity.md, "One random
        stream, in BCE's order")."""
        self.frac = availability.frac
        self.mean_up = availability.mean_up
        self.rng = rng
        self.lazy = boinc and step > 0.0
        self.step = step
        self.owed = False
        if boinc:
            # BOINC: off when drand() > frac, as it reads
            self.up = not rng.random() > self.frac
            period = self._period()
            self.next_change = start + period if 0.0 < self.frac < 1.0 else math.inf
            if self.frac >= 1.0:
                self.up = True
        elif self.frac >= 1.0:
            self.up, self.next_change = True, math.inf
        elif self.frac <= 0.0:
            self.up, self.next_change = False, math.inf
        else:
            self.up = rng.random() < self.frac
            self.next_change = start + self._period()
        self.time_left = self.next_change - start

    def _period(self) -> float:
        if self.up:
            return self.rng.exponential(self.mean_up)
        if self.frac <= 0.0:
            self.rng.random()  # BOINC draws a period of infinite mean
            return math.inf
        return self.rng.exponential(self.mean_up / self.frac - self.mean_up)

    def change_step(self) -> float:
        """The step at which a lazy process changes: RANDOM_PROCESS::sample takes a step off
        the time left before it looks, so the step in whose interval the period ends."""
        return math.floor(self.next_change / self.step) * self.step

    def settle(self) -> None:
        """Draw the period that follows a change `advance` made (lazy processes only)."""
        if self.owed:
            self.owed = False
            self.next_change += self._period()

    def sample(self, dt: float) -> bool:
        """RANDOM_PROCESS::sample (sim_util.cpp), used instead of `advance` where BOINC's
        emulator samples a process now and then: `dt` seconds pass, with one change at most
        however long they are (docs/engine-fidelity.md)."""
        if self.frac >= 1.0:
            return True
        self.time_left -= dt
        if self.time_left < 0:
            self.up = not self.up
            self.time_left += self._period()
        return self.up

    def advance(self, t: float) -> bool:
        """Apply the changes up to time `t`; return the state at `t`. EngineLimitError when
        that takes more than MAX_CHANGES_PER_ADVANCE changes (a mean up time too short for
        the times, whose periods no longer move the clock)."""
        if self.lazy:
            # one change per call, as RANDOM_PROCESS::sample makes one per step; the period
            # after it is drawn by `settle`, in BOINC's order of draws
            if self.owed:
                self.settle()
            elif self.next_change < math.inf and self.change_step() <= t:
                self.up = not self.up
                self.owed = True
            return self.up
        n = 0
        while self.next_change <= t:
            self.up = not self.up
            self.next_change += self._period()
            n += 1
            if n > MAX_CHANGES_PER_ADVANCE:
                raise EngineLimitError(
                    f"an availability process with a mean up time of {self.mean_up:g} s changed more than "
                    f"{MAX_CHANGES_PER_ADVANCE} times before {t:.0f} s: the mean up time is too short"
                )
        return self.up


class Resource:
    """A processor type: "cpu" (index 0) or a GPU vendor (reference/client.md §6.8)."""

    __slots__ = ("index", "name", "ninstances", "relative_speed", "is_gpu", "overall_frac", "peak_flops")

    def __init__(self, index, name, ninstances, relative_speed, is_gpu, overall_frac, cpu_flops):
        self.index = index
        self.name = name
        self.ninstances = ninstances
        self.relative_speed = relative_speed
        self.is_gpu = is_gpu
        self.overall_frac = overall_frac
        # peak FLOPS of the whole resource, as the figures of merit count it (§5)
        self.peak_flops = ninstances * relative_speed * cpu_flops


class JobState:
    """A result on the host. `size` is its real size, `fpops_est` what the client believes.

    On the compiled core it is a C type (state.pxd) with the same attributes, so that compiled
    code reaches them without look-ups; it is pickled as its attributes (`__reduce__`), so
    either core reads an emulator the other pickled."""

    __slots__ = (
        "name",
        "project",
        "app",
        "version",
        "rsc",
        "avg_ncpus",
        "gpu_usage",
        "flops",
        "size",
        "fpops_est",
        "done",
        "ckpt_done",
        "received",
        "deadline",
        "index",
        "state",
        "in_memory",
        "started",
        "run_start",
        "resume_left",
        "completed_time",
        "peak_flop_count",
        "once_ran_edf",
        "last_deadline_miss_time",
        "rr_finish",
        "rr_miss",
        "elapsed",
        "instance",
        "slice_start",
        "slice_why",
        "rate",
        "edf",
        "unfinished",
        "initial",
        "checkpoint_period",
        "seqno_key",
        "task_seq",
        "peak_flops",
        "left_at_end",
        "flops_left",
        "pick_value",
        "pick_seq",
    )

    def __init__(
        self,
        name,
        project,
        app: App,
        version: AppVersion,
        rsc: int,
        size: float,
        fpops_est: float,
        received: float,
        deadline: float,
        index: int,
        initial: bool,
        checkpoint_period: float,
    ):
        self.name = name
        self.project = project
        self.app = app
        self.version = version
        self.rsc = rsc
        # its numbers are floats whatever the scenario wrote (an integer in JSON), as the
        # compiled core's C doubles hold them (state.pxd)
        self.avg_ncpus = float(version.avg_ncpus)
        self.gpu_usage = float(version.gpu_usage)
        self.flops = float(version.flops)
        self.size = float(size)
        self.fpops_est = float(fpops_est)
        self.done = 0.0
        self.ckpt_done = 0.0
        self.received = received
        self.deadline = deadline
        self.index = index
        self.state = QUEUED
        self.in_memory = False
        self.started = False
        self.task_seq = math.inf  # the order of its first start (BOINC's ACTIVE_TASK order)
        # under bce, BOINC's emulator's FLOPs left of a finished job: the step that ends it
        # takes a whole step's work off, so it is below zero (ACTIVE_TASK_SET::poll)
        self.left_at_end = 0.0
        # the FLOPs left: size - done, or under bce BOINC's emulator's sim_flops_left, which
        # each step of computing lowers by that step's work (Accounting._advance)
        self.flops_left = self.size
        self.run_start = 0.0
        self.resume_left = 0.0
        self.completed_time = None
        self.peak_flop_count = 0.0
        self.once_ran_edf = False
        self.last_deadline_miss_time = -math.inf
        self.rr_finish = math.inf
        self.rr_miss = False
        self.elapsed = 0.0
        self.instance = -1
        self.slice_start = 0.0
        self.slice_why = ""
        self.rate = 0.0
        self.edf = False
        self.unfinished = False
        self.initial = initial
        self.checkpoint_period = float(checkpoint_period)
        self.seqno_key = 0
        self.peak_flops = 0.0  # Emulator.job_peak_flops, set by new_job
        # what the policy compared when it picked the job (the project's scheduling priority,
        # or its anticipated debt under boinc5); the decision log quotes it, nothing reads it
        self.pick_value = math.nan
        self.pick_seq = 0  # how many picks of its run list came before it (Emulator.pick_log)

    def __reduce__(self):
        return (_new_job, (), {name: getattr(self, name) for name in JobState.__slots__})

    def __setstate__(self, state) -> None:
        if isinstance(state, tuple):  # (None, slots), as a plain class with __slots__ was pickled
            state = state[1]
        for name, value in state.items():
            setattr(self, name, value)

    def runtime_remaining(self, rate: float) -> float:
        """RESULT::estimated_runtime_remaining as BOINC's emulator computes it, at `rate`
        FLOPS (its version's speed): a started job's real remainder, an unstarted one's
        estimate (the drawn size the server told) times its project's duration correction
        factor, in BOINC's order of operations (estimated_runtime: size / FLOPS, then x DCF),
        since the busy time's ties between instances turn on the last bits."""
        if self.started:
            return self.est_flops_remaining(True) / rate
        return self.fpops_est / rate * self.project.dcf

    def est_flops_remaining(self, exact: bool) -> float:
        """estimated_flops_remaining: the real remainder when `exact` (BOINC's emulator, §6.4),
        otherwise what the client can know from the estimate."""
        left = self.flops_left if exact else self.fpops_est - self.done
        return 0.0 if 0.0 > left else left  # max(left, 0.0), without the call


def gpu_allowed(em) -> bool:
    """Whether a schedule made now may run GPU jobs (HostAvailability._gpu_allowed). BOINC's
    emulator sets gpu_suspend_reason from gpu_active at the end of each pass of a step's
    decision loop (sim.cpp simulate()), after schedule_cpus(), so a step's first schedule sees
    the value of the last step the host was on: GPU jobs start one step after GPU computing
    is allowed again (`--compat bce`). state.pxd makes it a C function over the emulator's
    C structure, which the schedule and the round-robin simulation call."""
    if em.bce:
        return em.gpu_seen
    return em.active and em.gpu_active


def _new_job() -> JobState:
    """A JobState without attributes, which unpickling then sets (JobState.__setstate__)."""
    return JobState.__new__(JobState)


# The Emulator's attributes that every instant reads or writes, which state.pxd gives the
# compiled core's C type: by kind, as the C structure holds them
EMULATOR_FLOATS = (
    "now",
    "delta",
    "duration",
    "period",
    "work_buf_min",
    "work_buf_total",
    "rec_half_life",
    "total_peak_flops",
    "cpu_scale",
    "last_sample",
    "rec_start",
    "flops_used",
    "active_time",
    "gpu_active_time",
)
EMULATOR_INTS = ("events", "epoch", "state_version")
EMULATOR_FLAGS = (
    "bce",
    "exact_estimates",
    "fixed_step",
    "ended",
    "on",
    "active",
    "connected",
    "gpu_active",
    "gpu_acct",
    "rec_acct",
    "gpu_seen",
    "gpu_recheck",
    "must_schedule",
    "rpc_this_instant",
    "keeps_series",
)
EMULATOR_OBJECTS = (
    "projects",
    "resources",
    "running",
    "project_order",
    "policy",
    "prefs",
    "n_usable_cpus",
    "cpu_flops",
    "sample_interval",
    "_rr_cache",
    "_push",
    "_rates_of",
)
EMULATOR_FIELDS = EMULATOR_FLOATS + EMULATOR_INTS + EMULATOR_FLAGS + EMULATOR_OBJECTS


class EmulatorState:
    """The base of the Emulator (emulator.py): the settings and the state that every instant
    reads or writes (`EMULATOR_FIELDS`). On the pure-Python core it is a plain class and these
    are instance attributes like any other; on the compiled core it is a C type (state.pxd)
    whose structure holds them, floats as C doubles, counts as C longs, flags as C ints, so
    that reading one is a fixed offset instead of a look-up in the emulator's attribute
    dictionary, which holds the rest. The values are the same on both cores: the floats are
    always floats (Emulator.__init__ sets them so), the flags always bools."""


class ProjectState:
    """A project's client-side state: REC, debts, RPC back-off, per-resource work-fetch back-off."""

    def __init__(self, spec: Project, index: int, nrsc: int):
        self.spec = spec
        self.index = index
        self.name = spec.name
        self.share = spec.resource_share
        self.jobs: list[JobState] = []  # queued or running, arrival order
        # bumped when a job arrives, starts, stops or finishes (cpu_sched keeps orders by it)
        self.jobs_version = 0
        self.ready: list[JobState] = []  # finished, not yet reported
        # REC (reference/client.md §6.1, §6.2)
        self.rec = 0.0
        self.rec_time = 0.0
        self.rec_temp = 0.0
        self.priority = 0.0
        self.share_frac = 0.0
        self.secs_this_interval = [0.0] * nrsc
        # debt era (reference/debt-era.md §3)
        self.std = 0.0
        self.ltd = 0.0
        # short-term debt as recorded and shown: less the mean over the runnable projects
        self.std_shown = 0.0
        self.wall_cpu_interval = 0.0
        self.anticipated_debt = 0.0
        # BOINC 6's debts per processor type (RSC_PROJECT_WORK_FETCH): index 0 unused (the
        # CPU's are std / ltd above), GPU types from 1; instance-seconds used this interval
        self.rsc_std = [0.0] * nrsc
        self.rsc_ltd = [0.0] * nrsc
        self.rsc_anticipated_debt = [0.0] * nrsc
        self.wall_rsc_interval = [0.0] * nrsc
        # duration correction factor (reference/client.md §6.3)
        self.dcf = 1.0
        # scheduler RPC back-off (seed 000, reference/client.md §6.6)
        self.nrpc_failures = 0
        self.min_rpc_time = 0.0
        self.master_fetch_pending = False
        self.master_fetch_failures = 0
        self.urls: list = []
        self.available: RandomProcess | None = None  # made by the Emulator, in its order of draws
        self.last_rpc_time = None  # the last RPC attempt, for sampling `available` (bce)
        # work fetch back-off per resource (§6.5)
        self.backoff_time = [0.0] * nrsc
        self.backoff_interval = [0.0] * nrsc
        self.rsc_ok = [False] * nrsc  # has an app version for the resource
        self.fetch_ok = [False] * nrsc  # may be asked for work of the resource (§6.5)
        # figures of merit (§5)
        self.idle_time = 0.0
        self.idle_time_sumsq = 0.0
        self.flops_used = 0.0
        self.flops_wasted = 0.0
        self.flops_lost = 0.0
        self.flops_computed = 0.0
        self.deadlines_met = 0
        self.deadlines_missed = 0
        self.jobs_completed = 0
        self.jobs_received = 0
        self.rpcs = 0
        self.rpc_failures = 0
        self.job_counter = 0

    def __reduce__(self):
        # pickled as its attributes, so either core reads a project the other pickled
        state = {name: getattr(self, name) for name in PROJECT_FIELDS}
        state.update(vars(self))
        return (_new_project, (), state)

    def __setstate__(self, state) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def down(self, now: float) -> bool:
        """Project downtime from the scenario (all schedulers unreachable)."""
        return any(start <= now < end for start, end in self.spec.downtime)


# ProjectState's attributes, which state.pxd gives the compiled core's C type
PROJECT_FIELDS = (
    "spec",
    "index",
    "name",
    "share",
    "jobs",
    "jobs_version",
    "ready",
    "rec",
    "rec_time",
    "rec_temp",
    "priority",
    "share_frac",
    "secs_this_interval",
    "std",
    "ltd",
    "std_shown",
    "wall_cpu_interval",
    "anticipated_debt",
    "rsc_std",
    "rsc_ltd",
    "rsc_anticipated_debt",
    "wall_rsc_interval",
    "dcf",
    "nrpc_failures",
    "min_rpc_time",
    "master_fetch_pending",
    "master_fetch_failures",
    "urls",
    "available",
    "last_rpc_time",
    "backoff_time",
    "backoff_interval",
    "rsc_ok",
    "fetch_ok",
    "idle_time",
    "idle_time_sumsq",
    "flops_used",
    "flops_wasted",
    "flops_lost",
    "flops_computed",
    "deadlines_met",
    "deadlines_missed",
    "jobs_completed",
    "jobs_received",
    "rpcs",
    "rpc_failures",
    "job_counter",
)


def _new_project() -> ProjectState:
    """A ProjectState without attributes, which unpickling then sets (ProjectState.__setstate__)."""
    return ProjectState.__new__(ProjectState)
