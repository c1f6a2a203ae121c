"""Frozen scenario dataclasses: the host, its preferences and the attached projects.

A scenario is what BOINC's client emulator reads from client_state.xml, global_prefs.xml and
cc_config.xml (reference/client.md §2), with a few additions the emulator lacks: several
scheduler URLs per project, project downtime windows, a checkpoint period and a resume cost
per app, and initial jobs with their own sizes.

Units: FLOPS and FLOPs as plain floats, times in seconds from the start of the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# reference/client.md §2 and §6.8
DEFAULT_LATENCY_BOUND = 864000.0
DEFAULT_FPOPS_EST = 3600e11
DEFAULT_LAMBDA = 3600.0
GPU_TYPES = ("NVIDIA", "ATI", "intel_gpu")


class ScenarioError(ValueError):
    """A scenario that cannot be read or does not make sense; the message names the place."""


@dataclass(frozen=True)
class Availability:
    """A two-state alternating process (reference/client.md §2, RANDOM_PROCESS).

    `frac` is the long-run fraction of time up; `mean_up` (BOINC's lambda) is the mean
    length of an up period in seconds.
    """

    frac: float = 1.0
    mean_up: float = DEFAULT_LAMBDA

    def __post_init__(self):
        if not 0.0 <= self.frac <= 1.0:
            raise ScenarioError(f"availability fraction {self.frac} is not in [0, 1]")
        if self.mean_up <= 0:
            raise ScenarioError(f"availability lambda {self.mean_up} must be positive")


@dataclass(frozen=True)
class GpuType:
    """One GPU vendor of the host: `count` devices of `peak_flops` each."""

    name: str
    count: int
    peak_flops: float

    def __post_init__(self):
        if self.count < 1:
            raise ScenarioError(f"GPU type {self.name} needs a count of at least 1")
        if self.peak_flops <= 0:
            raise ScenarioError(f"GPU type {self.name} needs positive peak_flops")


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
        if self.ncpus < 1:
            raise ScenarioError("the host needs at least one CPU (p_ncpus)")
        if self.cpu_flops <= 0:
            raise ScenarioError("the host needs positive per-CPU FLOPS (p_fpops)")
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
        if self.work_buf_min_days < 0 or self.work_buf_additional_days < 0:
            raise ScenarioError("work buffer days cannot be negative")
        if self.cpu_scheduling_period_minutes <= 0:
            raise ScenarioError("cpu_scheduling_period_minutes must be positive")
        if not 0 < self.max_ncpus_pct <= 100:
            raise ScenarioError("max_ncpus_pct must be in (0, 100]")
        if not 0 < self.cpu_usage_limit <= 100:
            raise ScenarioError("cpu_usage_limit must be in (0, 100]")


@dataclass(frozen=True)
class AppVersion:
    """How a job of an app runs: its CPU usage, its GPU usage and its speed in FLOPS."""

    avg_ncpus: float = 1.0
    flops: float = 1e9
    gpu_type: str | None = None
    gpu_usage: float = 0.0
    plan_class: str = ""

    def __post_init__(self):
        if self.flops <= 0:
            raise ScenarioError("an app_version needs positive flops")
        if self.avg_ncpus < 0 or self.gpu_usage < 0:
            raise ScenarioError("an app_version cannot use a negative number of devices")
        if self.gpu_type is not None and self.gpu_usage <= 0:
            raise ScenarioError(f"a {self.gpu_type} app_version needs a positive GPU count")
        if self.gpu_type is None and self.avg_ncpus <= 0:
            raise ScenarioError("a CPU app_version needs a positive avg_ncpus")

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
        if self.fpops <= 0 or self.fpops_est <= 0:
            raise ScenarioError(f"job {self.name} needs a positive size")
        if not 0 <= self.flops_done < self.fpops:
            raise ScenarioError(f"job {self.name} has flops_done outside [0, size)")


@dataclass(frozen=True)
class SchedulerUrl:
    """One scheduler of a project with its own availability."""

    url: str
    available: Availability = Availability()


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

    def __post_init__(self):
        if not self.name:
            raise ScenarioError("a project needs a name")
        if self.resource_share < 0:
            raise ScenarioError(f"project {self.name} has a negative resource_share")
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
