"""Frozen scenario dataclasses: the host, its preferences and the attached projects.

A scenario is what BOINC's client emulator reads from client_state.xml, global_prefs.xml and
cc_config.xml (reference/client.md §2), with a few additions the emulator lacks: several
scheduler URLs per project, project downtime windows, a checkpoint period and a resume cost
per app, and initial jobs with their own sizes.

Units: FLOPS and FLOPs as plain floats, times in seconds from the start of the run.

Limits
------
Every scenario, whatever door it came in by (the lab's forms, P(C, D, R) text,
client_state.xml, JSON, the command line), meets one set of limits, checked here when the
dataclasses are built, so the engine never sees a number that is not finite or out of range
and no input can make a run grow without bound: at most `MAX_CPUS` CPUs, `MAX_GPU_TYPES`
GPU types of at most `MAX_GPUS_PER_TYPE` devices, `MAX_PROJECTS` projects, `MAX_APP_VERSIONS`
app versions and `MAX_JOBS` initial jobs in all, speeds within [`MIN_FLOPS`, `MAX_FLOPS`],
job sizes up to `MAX_FPOPS`, a job of at least `MIN_JOB_SECONDS` and at most `MAX_TIME`,
every time and period within `MAX_TIME`, runs of at most `MAX_DURATION` on a step of
`MIN_DELTA` to `MAX_DELTA` (`check_run`). A refusal is a `ScenarioError` naming the field,
its value and the limit.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from dataclasses import dataclass, field

# reference/client.md §2 and §6.8
DEFAULT_LATENCY_BOUND = 864000.0
DEFAULT_FPOPS_EST = 3600e11
DEFAULT_LAMBDA = 3600.0
GPU_TYPES = ("NVIDIA", "ATI", "intel_gpu")


class ScenarioError(ValueError):
    """A scenario that cannot be read or does not make sense; the message names the place."""


# --------------------------------------------------------------------------- limits

DAY = 86400.0
MAX_CPUS = 1024
MAX_GPU_TYPES = 7  # BOINC's MAX_RSC (lib/coproc.h) is 8 processor types, the CPU among them
MAX_GPUS_PER_TYPE = 64
MAX_PROJECTS = 40
MAX_APPS_PER_PROJECT = 20
MAX_VERSIONS_PER_APP = 8
MAX_APP_VERSIONS = 120  # in the whole scenario
MAX_JOBS = 5000  # initial jobs in the whole scenario
MAX_SCHEDULER_URLS = 10  # per project
MAX_DOWNTIME_WINDOWS = 100  # per project
MIN_FLOPS = 1e6  # of a CPU, a GPU or an app version
MAX_FLOPS = 1e16
MAX_FPOPS = 1e21  # a job's size in floating-point operations
MIN_JOB_SECONDS = 1.0  # a job's estimated run time on any of its app versions
MAX_TIME = 10 * 365 * DAY  # any time, period or deadline in a scenario
MIN_LAMBDA = 60.0  # mean length of an availability period
MIN_FRAC = 1e-6  # an availability fraction above 0
MAX_BUFFER_DAYS = 10.0  # each of BOINC's two work-buffer preferences
MIN_SCHEDULING_PERIOD_MINUTES = 1.0
MAX_SCHEDULING_PERIOD_MINUTES = 7 * 24 * 60.0
MAX_REC_HALF_LIFE_DAYS = 3650.0
MAX_SHARE = 1e9  # a project's resource share, an app's weight
MAX_CONCURRENT = 100000
MAX_NAME = 200  # characters of a project, app, job, GPU type or plan class name
MAX_URL = 2000
MAX_SCENARIO_NAME = 120
MAX_DESCRIPTION = 10000
# a run (check_run)
MAX_DURATION = 100 * DAY
MIN_DELTA = 1.0
MAX_DELTA = DAY


def _show(value) -> str:
    """A number as a message quotes it: whole numbers in full up to 15 digits, others as %g."""
    if isinstance(value, int) and abs(value) < 10**15:
        return str(value)
    try:
        return f"{float(value):g}"
    except OverflowError:
        return "a number too large to write"


def check_number(
    value,
    what: str,
    low: float,
    high: float,
    *,
    above: bool = False,
    whole: bool = False,
    unit: str = "",
    note: str = "",
):
    """`value` if it is a finite number within [low, high] ((low, high] when `above`), a
    whole number when `whole`; a ScenarioError naming `what`, the value and the limit (with
    `note` after it) otherwise."""
    unit = f" {unit}" if unit else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(f"{what} must be a number, not {type(value).__name__}")
    if whole and not isinstance(value, int):
        raise ScenarioError(f"{what} must be a whole number, not {_show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(f"{what} is {value}, not a finite number")
    if value > high:
        raise ScenarioError(f"{what} is {_show(value)}{unit}; the limit is {_show(high)}{unit}{note}")
    if value < low or (above and value == low):
        bound = f"more than {_show(low)}" if above else f"at least {_show(low)}"
        raise ScenarioError(f"{what} is {_show(value)}{unit}; it must be {bound}{unit}")
    return value


def check_count(items, what: str, high: int, low: int = 0):
    """A ScenarioError unless `items` holds between `low` and `high` entries."""
    n = len(items)
    if n > high:
        raise ScenarioError(f"{what}: {n} given; the limit is {high}")
    if n < low:
        raise ScenarioError(f"{what}: at least {low} needed")


def check_text(value, what: str, high: int = MAX_NAME, *, empty: bool = True, lines: bool = False):
    """A ScenarioError unless `value` is a string of at most `high` characters without
    control characters (tabs and line breaks allowed when `lines`) or lone surrogates,
    which no database stores in JSON."""
    if not isinstance(value, str):
        raise ScenarioError(f"{what} must be text, not {type(value).__name__}")
    if not empty and not value:
        raise ScenarioError(f"{what} is empty")
    if len(value) > high:
        raise ScenarioError(f"{what} has {len(value)} characters; the limit is {high}")
    for ch in value:
        if lines and ch in "\t\n\r":
            continue
        if unicodedata.category(ch) in ("Cc", "Cs"):
            raise ScenarioError(f"{what} holds the control character U+{ord(ch):04X}")
    return value


def check_run(*, duration: float | None = None, delta: float | None = None, at: float | None = None) -> None:
    """The limits of a run: `duration` seconds simulated, `delta` the decision step, `at`
    the time of a round-robin snapshot (rrsim)."""
    days = f" ({MAX_DURATION / DAY:g} days)"
    if duration is not None:
        check_number(duration, "the duration", 0.0, MAX_DURATION, above=True, unit="s", note=days)
    if delta is not None:
        check_number(delta, "the step (delta)", MIN_DELTA, MAX_DELTA, unit="s")
    if at is not None:
        check_number(at, "the time (--at)", 0.0, MAX_DURATION, unit="s", note=days)


def _check_finite(obj) -> None:
    """Every number field of the dataclass `obj` is finite (no NaN, no infinity)."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ScenarioError(f"{f.name} is {value}, not a finite number")


@dataclass(frozen=True)
class Availability:
    """A two-state alternating process (reference/client.md §2, RANDOM_PROCESS).

    `frac` is the long-run fraction of time up; `mean_up` (BOINC's lambda) is the mean
    length of an up period in seconds.
    """

    frac: float = 1.0
    mean_up: float = DEFAULT_LAMBDA

    def __post_init__(self):
        _check_finite(self)
        if not 0.0 <= self.frac <= 1.0:
            raise ScenarioError(f"availability fraction {self.frac} is not in [0, 1]")
        if self.mean_up <= 0:
            raise ScenarioError(f"availability lambda {self.mean_up} must be positive")
        if 0.0 < self.frac < MIN_FRAC:
            raise ScenarioError(f"availability fraction {self.frac:g} must be 0 or at least {MIN_FRAC:g}")
        check_number(self.mean_up, "availability lambda (mean up period)", MIN_LAMBDA, MAX_TIME, unit="s")


@dataclass(frozen=True)
class GpuType:
    """One GPU vendor of the host: `count` devices of `peak_flops` each."""

    name: str
    count: int
    peak_flops: float

    def __post_init__(self):
        _check_finite(self)
        check_text(self.name, "a GPU type's name", empty=False)
        if isinstance(self.count, (int, float)) and self.count < 1:
            raise ScenarioError(f"GPU type {self.name} needs a count of at least 1")
        if isinstance(self.peak_flops, (int, float)) and self.peak_flops <= 0:
            raise ScenarioError(f"GPU type {self.name} needs positive peak_flops")
        check_number(self.count, f"GPU type {self.name}: count", 1, MAX_GPUS_PER_TYPE, whole=True)
        check_number(self.peak_flops, f"GPU type {self.name}: peak_flops", MIN_FLOPS, MAX_FLOPS, unit="FLOPS")


@dataclass(frozen=True)
class Host:
    """The volunteer's computer (reference/client.md §2, host_info and time_stats)."""

    ncpus: int = 1
    cpu_flops: float = 1e9
    gpus: tuple[GpuType, ...] = ()
    on: Availability = Availability()
    connected: Availability = Availability()
    active: Availability = Availability()
    gpu_active: Availability = Availability()

    def __post_init__(self):
        _check_finite(self)
        if isinstance(self.ncpus, (int, float)) and self.ncpus < 1:
            raise ScenarioError("the host needs at least one CPU (p_ncpus)")
        if isinstance(self.cpu_flops, (int, float)) and self.cpu_flops <= 0:
            raise ScenarioError("the host needs positive per-CPU FLOPS (p_fpops)")
        check_number(self.ncpus, "the host's CPUs (ncpus, p_ncpus)", 1, MAX_CPUS, whole=True)
        check_number(
            self.cpu_flops, "the host's per-CPU speed (cpu_flops, p_fpops)", MIN_FLOPS, MAX_FLOPS, unit="FLOPS"
        )
        check_count(self.gpus, "GPU types", MAX_GPU_TYPES)
        names = [g.name for g in self.gpus]
        if len(set(names)) != len(names):
            raise ScenarioError(f"GPU types listed twice: {names}")


@dataclass(frozen=True)
class Prefs:
    """Global preferences and cc_config options (reference/client.md §2, lib/prefs.cpp)."""

    work_buf_min_days: float = 0.1
    work_buf_additional_days: float = 0.5
    cpu_scheduling_period_minutes: float = 60.0
    leave_apps_in_memory: bool = False
    max_ncpus_pct: float = 100.0
    cpu_usage_limit: float = 100.0
    rec_half_life_days: float = 10.0
    ncpus: int | None = None
    report_results_immediately: bool = False
    fetch_minimal_work: bool = False

    def __post_init__(self):
        _check_finite(self)
        if self.work_buf_min_days < 0 or self.work_buf_additional_days < 0:
            raise ScenarioError("work buffer days cannot be negative")
        if self.cpu_scheduling_period_minutes <= 0:
            raise ScenarioError("cpu_scheduling_period_minutes must be positive")
        if not 0 < self.max_ncpus_pct <= 100:
            raise ScenarioError("max_ncpus_pct must be in (0, 100]")
        if not 0 < self.cpu_usage_limit <= 100:
            raise ScenarioError("cpu_usage_limit must be in (0, 100]")
        check_number(self.work_buf_min_days, "work_buf_min_days", 0.0, MAX_BUFFER_DAYS, unit="days")
        check_number(self.work_buf_additional_days, "work_buf_additional_days", 0.0, MAX_BUFFER_DAYS, unit="days")
        check_number(
            self.cpu_scheduling_period_minutes,
            "cpu_scheduling_period_minutes",
            MIN_SCHEDULING_PERIOD_MINUTES,
            MAX_SCHEDULING_PERIOD_MINUTES,
            unit="minutes",
        )
        check_number(self.rec_half_life_days, "rec_half_life_days", 0.0, MAX_REC_HALF_LIFE_DAYS, unit="days")
        if self.ncpus is not None:
            check_number(self.ncpus, "the ncpus option", 1, MAX_CPUS, whole=True)


@dataclass(frozen=True)
class AppVersion:
    """How a job of an app runs: its CPU usage, its GPU usage and its speed in FLOPS."""

    avg_ncpus: float = 1.0
    flops: float = 1e9
    gpu_type: str | None = None
    gpu_usage: float = 0.0
    plan_class: str = ""

    def __post_init__(self):
        _check_finite(self)
        if self.flops <= 0:
            raise ScenarioError("an app_version needs positive flops")
        if self.avg_ncpus < 0 or self.gpu_usage < 0:
            raise ScenarioError("an app_version cannot use a negative number of devices")
        if self.gpu_type is not None and self.gpu_usage <= 0:
            raise ScenarioError(f"a {self.gpu_type} app_version needs a positive GPU count")
        if self.gpu_type is None and self.avg_ncpus <= 0:
            raise ScenarioError("a CPU app_version needs a positive avg_ncpus")
        check_number(self.flops, "an app_version's flops", MIN_FLOPS, MAX_FLOPS, unit="FLOPS")
        check_number(self.avg_ncpus, "an app_version's avg_ncpus", 0.0, MAX_CPUS)
        check_number(self.gpu_usage, "an app_version's GPU usage", 0.0, MAX_GPUS_PER_TYPE)
        if self.gpu_type is not None:
            check_text(self.gpu_type, "an app_version's GPU type", empty=False)
        check_text(self.plan_class, "an app_version's plan_class")

    @property
    def resource(self) -> str:
        return self.gpu_type or "cpu"


@dataclass(frozen=True)
class App:
    """An app with its job size distribution (normal, `fpops_mean` +- `fpops_std_dev`).

    `fpops_est` is what the server tells the client; `checkpoint_period` is the seconds of
    computing between checkpoints (0: continuous), `resume_cost` the seconds a job spends
    restarting from its checkpoint after it was removed from memory.
    """

    name: str
    versions: tuple[AppVersion, ...]
    latency_bound: float = DEFAULT_LATENCY_BOUND
    fpops_est: float = DEFAULT_FPOPS_EST
    fpops_mean: float | None = None
    fpops_std_dev: float = 0.0
    weight: float = 1.0
    checkpoint_period: float = 0.0
    resume_cost: float = 0.0
    max_concurrent: int = 0

    def __post_init__(self):
        _check_finite(self)
        check_text(self.name, "an app's name", empty=False)
        if not self.versions:
            raise ScenarioError(f"app {self.name} has no app_version")
        if self.latency_bound <= 0:
            raise ScenarioError(f"app {self.name} needs a positive latency_bound")
        if self.fpops_est <= 0:
            raise ScenarioError(f"app {self.name} needs a positive fpops_est")
        if self.weight < 0 or self.fpops_std_dev < 0:
            raise ScenarioError(f"app {self.name} has a negative weight or std_dev")
        if self.checkpoint_period < 0 or self.resume_cost < 0:
            raise ScenarioError(f"app {self.name} has a negative checkpoint period or resume cost")
        what = f"app {self.name}"
        check_count(self.versions, f"{what}: app_versions", MAX_VERSIONS_PER_APP)
        check_number(self.latency_bound, f"{what}: latency_bound", 0.0, MAX_TIME, unit="s")
        check_number(self.fpops_est, f"{what}: fpops_est", 0.0, MAX_FPOPS, unit="FLOP")
        if self.fpops_mean is not None:
            check_number(self.fpops_mean, f"{what}: fpops mean", 0.0, MAX_FPOPS, above=True, unit="FLOP")
        check_number(self.fpops_std_dev, f"{what}: fpops std_dev", 0.0, MAX_FPOPS, unit="FLOP")
        check_number(self.weight, f"{what}: weight", 0.0, MAX_SHARE)
        check_number(self.checkpoint_period, f"{what}: checkpoint_period", 0.0, MAX_TIME, unit="s")
        check_number(self.resume_cost, f"{what}: resume_cost", 0.0, MAX_TIME, unit="s")
        check_number(self.max_concurrent, f"{what}: max_concurrent", 0, MAX_CONCURRENT, whole=True)
        for v in self.versions:
            for size in (self.fpops_est,) if self.fpops_mean is None else (self.fpops_est, self.fpops_mean):
                seconds = size / v.flops
                if not MIN_JOB_SECONDS <= seconds <= MAX_TIME:
                    raise ScenarioError(
                        f"{what}: a job of {size:g} FLOP takes {seconds:g} s on its {v.resource} version "
                        f"of {v.flops:g} FLOPS; the limit is {MIN_JOB_SECONDS:g} s to {MAX_TIME:g} s"
                    )

    @property
    def mean_fpops(self) -> float:
        return self.fpops_est if self.fpops_mean is None else self.fpops_mean


@dataclass(frozen=True)
class InitialJob:
    """A job already on the host at the start (a result in client_state.xml).

    `fpops` is its real size, `fpops_est` what the client believes; `received` and
    `deadline` are seconds from the start (received may be negative); `resource` picks the
    app version ("cpu" or a GPU type).
    """

    name: str
    app: str
    fpops: float
    fpops_est: float
    deadline: float
    received: float = 0.0
    resource: str | None = None
    flops_done: float = 0.0

    def __post_init__(self):
        _check_finite(self)
        check_text(self.name, "a job's name", empty=False)
        check_text(self.app, f"job {self.name}: app")
        if self.resource is not None:
            check_text(self.resource, f"job {self.name}: resource")
        if self.fpops <= 0 or self.fpops_est <= 0:
            raise ScenarioError(f"job {self.name} needs a positive size")
        if not 0 <= self.flops_done < self.fpops:
            raise ScenarioError(f"job {self.name} has flops_done outside [0, size)")
        what = f"job {self.name}"
        check_number(self.fpops, f"{what}: fpops", 0.0, MAX_FPOPS, unit="FLOP")
        check_number(self.fpops_est, f"{what}: fpops_est", 0.0, MAX_FPOPS, unit="FLOP")
        check_number(self.deadline, f"{what}: deadline", -MAX_TIME, MAX_TIME, unit="s")
        check_number(self.received, f"{what}: received", -MAX_TIME, MAX_TIME, unit="s")


@dataclass(frozen=True)
class SchedulerUrl:
    """One scheduler of a project with its own availability."""

    url: str
    available: Availability = Availability()

    def __post_init__(self):
        check_text(self.url, "a scheduler URL", MAX_URL, empty=False)


@dataclass(frozen=True)
class Project:
    """An attached project (reference/client.md §2, `<project>`)."""

    name: str
    resource_share: float = 100.0
    apps: tuple[App, ...] = ()
    available: Availability = Availability()
    master_url: str = ""
    scheduler_urls: tuple[SchedulerUrl, ...] = ()
    downtime: tuple[tuple[float, float], ...] = ()
    jobs: tuple[InitialJob, ...] = ()
    # processor types the project told the client it has no apps for (client_state.xml
    # <no_rsc_apps>, "CPU" or a GPU type); BOINC's emulator asks a project for work of every
    # other type (docs/engine-fidelity.md)
    no_rsc_apps: tuple[str, ...] = ()
    # whether client_state.xml gives the project an <available> element at fraction 1:
    # BOINC's emulator starts the availability process of every project with the element
    # (RANDOM_PROCESS::init, two draws), even at fraction 1, where a project without it draws
    # nothing; below fraction 1 the element is always written (docs/engine-fidelity.md)
    available_stated: bool = False
    # whether the project has an app_config.xml (readers.read_app_config): BOINC's emulator
    # keeps its apps' max_concurrent then, and clears every app's limit of a project without
    # one (docs/engine-fidelity.md, "max_concurrent, as app_config.xml gives it")
    app_config: bool = False
    # with app_config: APP_CONFIGS's project_min_mc, the smallest max_concurrent of its <app>
    # elements (apps the project does not have among them), 0 when none has one; work fetch
    # reads it (rr_sim.project_min_mc, docs/engine-fidelity.md "max_concurrent in work fetch")
    app_config_min_mc: int = 0

    def __post_init__(self):
        _check_finite(self)
        if not self.name:
            raise ScenarioError("a project needs a name")
        check_text(self.name, "a project's name")
        if self.resource_share < 0:
            raise ScenarioError(f"project {self.name} has a negative resource_share")
        what = f"project {self.name}"
        check_number(self.resource_share, f"{what}: resource_share", 0.0, MAX_SHARE)
        check_text(self.master_url, f"{what}: master_url", MAX_URL)
        check_count(self.apps, f"{what}: apps", MAX_APPS_PER_PROJECT)
        check_count(self.scheduler_urls, f"{what}: scheduler URLs", MAX_SCHEDULER_URLS)
        check_count(self.downtime, f"{what}: downtime windows", MAX_DOWNTIME_WINDOWS)
        check_count(self.jobs, f"{what}: jobs", MAX_JOBS)
        check_count(self.no_rsc_apps, f"{what}: no_rsc_apps", MAX_GPU_TYPES + 1)
        check_number(self.app_config_min_mc, f"{what}: app_config_min_mc", 0, MAX_CONCURRENT, whole=True)
        for rsc in self.no_rsc_apps:
            check_text(rsc, f"{what}: no_rsc_apps")
        for start, end in self.downtime:
            check_number(start, f"{what}: a downtime start", -MAX_TIME, MAX_TIME, unit="s")
            check_number(end, f"{what}: a downtime end", -MAX_TIME, MAX_TIME, unit="s")
        names = [a.name for a in self.apps]
        if len(set(names)) != len(names):
            raise ScenarioError(f"project {self.name} lists an app twice")
        for start, end in self.downtime:
            if end <= start:
                raise ScenarioError(f"project {self.name} has a downtime window that ends before it starts")
        for job in self.jobs:
            app = self.app(job.app)
            if app is None:
                raise ScenarioError(f"job {job.name} of project {self.name} names unknown app {job.app}")
            if job.resource is not None and all(v.resource != job.resource for v in app.versions):
                raise ScenarioError(f"job {job.name} asks for {job.resource} but app {app.name} has no such version")

    def app(self, name: str) -> App | None:
        for a in self.apps:
            if a.name == name:
                return a
        return None

    @property
    def resources(self) -> set[str]:
        return {v.resource for a in self.apps for v in a.versions}


@dataclass(frozen=True)
class Scenario:
    """A whole scenario. `name` and `description` are for people; `source` says which reader."""

    host: Host
    projects: tuple[Project, ...]
    prefs: Prefs = field(default_factory=Prefs)
    name: str = "scenario"
    description: str = ""
    source: str = ""

    def __post_init__(self):
        if not self.projects:
            raise ScenarioError("the scenario has no project")
        check_text(self.name, "the scenario's name", MAX_SCENARIO_NAME)
        check_text(self.description, "the scenario's description", MAX_DESCRIPTION, lines=True)
        check_count(self.projects, "projects", MAX_PROJECTS)
        check_count(
            [v for p in self.projects for a in p.apps for v in a.versions],
            "app versions in all projects",
            MAX_APP_VERSIONS,
        )
        check_count([j for p in self.projects for j in p.jobs], "initial jobs in all projects", MAX_JOBS)
        names = [p.name for p in self.projects]
        if len(set(names)) != len(names):
            raise ScenarioError(f"project names must be unique: {names}")

    @property
    def n_usable_cpus(self) -> int:
        """p_ncpus reduced by cc_config ncpus or the max_ncpus_pct preference (§2)."""
        if self.prefs.ncpus is not None and self.prefs.ncpus > 0:
            return self.prefs.ncpus
        n = int(self.host.ncpus * self.prefs.max_ncpus_pct / 100.0)
        return max(1, n)
