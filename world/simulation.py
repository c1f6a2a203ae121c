"""The volunteer world: a simulated host population driving the back end in simulated time.

DESIGN.md "How data flows" 2: a world has a simulated clock; at each daemon round the back
end's daemons run (``backend.daemons.run_pass(name, now=clock)``, reference/server.md §3.1–§3.9)
and between rounds the hosts perform scheduler RPCs against
``backend.daemons.scheduler.handle_request`` (§3.4–§3.6): they report finished results, with
their outputs as real bytes so the validator compares real checksums, and ask for enough work
to fill their buffers.

The core follows the house's simulation rules: one ``random.Random(seed)``, an event heap of
``(time, priority, counter, event)`` so ties resolve in insertion order, no clock reads and no
printing. Same seed, same outcome. The state pickles, so an RQ job can run one slice of
simulated time and hand the rest to the next job (``world.jobs``).

Each host draws from the world's settings: CPU count and speed, GPUs, an on/off availability
process (exponential on periods of ``mean_on_period``, off periods making up ``1 - on_frac``),
an error rate, a wrong-output rate (its outputs differ from everyone's), a no-reply rate (a job
it silently drops), and churn (hosts joining during the run and leaving for good, dropping
their jobs). A host computes its queued jobs, one per CPU (or GPU) instance, only while on.

A host's preferences are its Host row's (``PREF_FIELDS``; the world's settings give the buffer
sizes the rows start with): it keeps ``work_buf_min_days`` of work and asks for
``work_buf_additional_days`` more, runs on ``max_ncpus_pct`` of its CPUs, and computes
``cpu_usage_limit`` percent of the time. Edits made through the prefs form are read back
(``read_prefs``) before the host's next RPC.

Work: a pool of big sticky data files (locality scheduling, §3.10), each used by
``workunits_per_file`` workunits named ``FILE__...``. With ``locality`` the app uses locality
scheduling, the scheduler waits ``wait_period`` for the on-demand generator, and the working-set
manager runs each round; without it a cushion generator makes the same kind of workunits file
by file and the scheduler sends them in the feeder's order. ``bytes_downloaded`` counts input
bytes the hosts fetched, so the two modes compare on the same seed.

After ``days`` of work the generators stop and the world drains: hosts finish, deadlines of
vanished hosts pass, retries complete, until every workunit is assimilated and its files are
deleted (or ``drain_days`` pass).

A *live* world (``live_app`` names one of the project's apps) volunteers for that app on the
wall clock, as ``make run``'s demo does (``world.live``): its hosts take the app's platform and
the work the project already has; it makes no app, no data files and no work, and its rounds
run no daemons, since the project's own daemons and work generator (the app's
``unsent_target``, reference/server.md §3.1) serve it in real time.

At each round the world takes a ``Sample`` of its app's results and its own counters, the
records its charts are drawn from (``world.charts``).
"""

import hashlib
import heapq
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple, Self

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Min, Q, Sum

from backend.daemons import daemon_names, run_pass, sched_locality, sched_version
from backend.daemons.sched_types import DAILY_RESULT_QUOTA, GlobalPrefs, SchedulerConfig
from backend.daemons.scheduler import (
    GpuRequest,
    HostInfo,
    ReplyResult,
    ReportedFile,
    ReportedResult,
    SchedulerReply,
    SchedulerRequest,
    SchedulerRequestError,
    StickyFile,
    TimeStats,
    handle_request,
)
from backend.daemons.work_generator import waiting_for_first_results
from backend.models import (
    INT_MAX,
    App,
    AppVersion,
    AssimilateState,
    ClientState,
    FileDeleteState,
    GpuType,
    Host,
    LocalityTrigger,
    Outcome,
    Project,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from scheduling import engine
from world.engine_host import ENGINE_DELTA, EngineClass, EngineHost, WorldServer, drawn_host, engine_scenario

DAY = 86400.0
HOUR = 3600.0
# (os_name, p_vendor, p_model) of a world with homogeneous redundancy, equally likely: five
# fine classes (two coarse ones), and one OS of no known class.
HR_PLATFORMS = (
    ("Linux", "GenuineIntel", "Intel(R) Xeon(R) CPU E5-2670 v3"),
    ("Linux", "GenuineIntel", "Intel(R) Core(TM) i7-8700 CPU"),
    ("Linux", "AuthenticAMD", "AMD Ryzen 7 5800X"),
    ("Microsoft Windows 10", "GenuineIntel", "Intel(R) Core(TM) i5-8250U CPU"),
    ("Microsoft Windows 10", "AuthenticAMD", "AMD Athlon(tm) 64 X2"),
    ("Haiku", "GenuineIntel", "Intel(R) Core(TM) i7-8700 CPU"),
)

# The plan classes of a world with ``plan_classes`` (BOINC's plan_class_spec.xml names): a
# multi-threaded CPU class and an NVIDIA GPU class whose jobs do a tenth of their work on a CPU.
PLAN_CLASS_SPEC = """<plan_classes>
  <plan_class>
    <name>mt</name>
    <min_ncpus>2</min_ncpus>
    <max_threads>{threads}</max_threads>
  </plan_class>
  <plan_class>
    <name>cuda</name>
    <gpu_type>nvidia</gpu_type>
    <cpu_frac>0.1</cpu_frac>
  </plan_class>
</plan_classes>
"""

# Event priorities at equal times: daemons first, then hosts.
DAEMONS, CHANGE, JOB_DONE, RPC, END = range(5)

# Work-fetch backoff when asked-for work doesn't come (reference/client.md §6.5); the world's
# ``backoff_min`` setting is the floor.
BACKOFF_MAX = DAY
# The preferences a simulated host computes by (Host's prefs form, reference/client.md §2).
PREF_FIELDS = ("work_buf_min_days", "work_buf_additional_days", "max_ncpus_pct", "cpu_usage_limit")


@dataclass(frozen=True)
class WorldSettings:
    """Everything a world draws from; ``WorldSettings.from_dict`` checks overrides."""

    hosts: int = 200
    days: float = 3.0
    seed: int = 1
    locality: bool = False
    start_time: int = 1_800_000_000
    # Population.
    ncpus_choices: tuple = (1, 2, 4, 8)
    ncpus_weights: tuple = (0.25, 0.35, 0.3, 0.1)
    cpu_gflops_median: float = 3.0
    cpu_gflops_sigma: float = 0.4
    gpu_fraction: float = 0.15
    gpu_gflops: float = 30.0
    on_frac_min: float = 0.6
    mean_on_period: float = 8 * HOUR
    error_rate: float = 0.01
    no_reply_rate: float = 0.005
    error_prone_fraction: float = 0.0
    error_prone_rate: float = 0.5
    wrong_output_fraction: float = 0.0
    wrong_output_rate: float = 1.0
    leave_per_day: float = 0.01
    join_per_day: float = 0.01
    work_buf_min_days: float = 0.25
    work_buf_additional_days: float = 0.5
    report_delay: float = 12 * HOUR  # a finished job waits at most this long to be reported
    backoff_min: float = 600.0
    first_rpc_within: float = 60.0  # the first hosts' first RPCs, spread over this time
    # Workload.
    job_gflop: float = 3.0 * 12 * HOUR  # 12 h on a median CPU
    min_quorum: int = 2
    target_nresults: int = 2
    max_error_results: int = 3
    max_total_results: int = 6
    max_success_results: int = 4
    delay_bound: int = int(3 * DAY)
    workunits_per_file: int = 40
    workunits_per_trigger: int = 20  # made by the on-demand generator per need_work
    file_nbytes: int = 16 * 2**20
    cushion: int = 0  # unsent results kept by the plain generator; 0: two files' worth
    wait_period: float = 10.0
    sorted_order: bool = False
    # Rounds.
    daemon_interval: float = 1800.0
    drain_days: float = 10.0
    batch_size: int = 1000
    # Volunteer for this existing app on the wall clock (a live world; see the module's doc).
    live_app: str = ""
    # The app's homogeneous redundancy type (0 off, 1 fine, 2 coarse; backend.daemons.sched_hr):
    # on, the hosts run a mix of OSes and CPUs (HR_PLATFORMS), some of no known class.
    homogeneous_redundancy: int = 0
    # App versions by plan class (backend.daemons.plan_class): on, the app has a multi-threaded
    # CPU version ("mt", up to ``mt_threads`` threads on hosts with two CPUs or more) beside the
    # sequential one, and its GPU version ("cuda"), both described by a plan_class_spec.xml the
    # world writes; off, the GPU version is described by its columns (docs/server-fidelity.md
    # departure 13). The scheduler picks per host the version it projects fastest
    # (get_app_version, with ``version_select_random_factor``), learning from runtimes.
    plan_classes: bool = False
    mt_threads: int = 4
    version_select_random_factor: float = 1.0
    # Real speeds, which the runtimes hosts report follow: a host's CPUs compute at its
    # benchmark (p_fpops) × exp(-|N(0, ``cpu_speed_sigma``)|), a benchmark overstating an app's
    # speed rather than understating it; each thread
    # of a multi-threaded job at a parallel efficiency drawn between ``mt_efficiency_min`` and
    # 1 (under 1 / threads, the job runs slower than a sequential one); a GPU at its peak ×
    # an efficiency drawn between ``gpu_efficiency_min`` and 1. GPU peaks spread around
    # ``gpu_gflops`` log-normally with ``gpu_gflops_sigma``.
    cpu_speed_sigma: float = 0.0
    mt_efficiency_min: float = 1.0
    gpu_gflops_sigma: float = 0.0
    gpu_efficiency_min: float = 1.0
    # Hosts short of disk (locality scheduling's deletions, sched_locality rule 11): this
    # fraction of them lets BOINC use only small_disk_gb GiB (disk_max_used_gb), their sticky
    # files counting as used; the others say nothing of their disk.
    small_disk_fraction: float = 0.0
    small_disk_gb: float = 0.95
    # Engine hosts (world.engine_host): classes of hosts driven by the client engine, each a
    # mapping of EngineClass's settings ({"count": 200, "policy": "boinc7", "preset": ...}),
    # beside the ``hosts`` simple ones.
    engine_hosts: tuple = ()
    # The scheduler's daily quota of jobs per app version per CPU (<daily_result_quota>,
    # reference/server.md §3.11); None: BOINC's default.
    daily_result_quota: int | None = None
    # The scheduler's job limits (reference/server.md §3.4): jobs per RPC per CPU
    # (<max_wus_to_send>, 0 for no limit) and in progress per CPU (<max_wus_in_progress>, 0
    # for no limit); None: BOINC's defaults.
    max_wus_to_send: int | None = None
    max_wus_in_progress: int | None = None
    # The scheduler estimates runtimes from the hosts' and app versions' reported elapsed
    # times (estimate_flops); off, from the benchmarks alone (<rte_no_stats>).
    runtime_stats: bool = True

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown world setting(s): {', '.join(unknown)}")
        kwargs: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        if not isinstance(kwargs.get("engine_hosts", ()), tuple):
            raise ValueError("engine_hosts must be a list of engine host classes")
        settings = cls(**kwargs)
        settings.check()
        return settings

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        if self.hosts < 0 or (self.hosts < 1 and not self.engine_hosts):
            raise ValueError(f"hosts must be at least 1, not {self.hosts}")
        classes = [EngineClass.from_dict(c) for c in self.engine_hosts]
        if classes and self.live_app:
            raise ValueError("a live world has simple hosts only; leave engine_hosts empty")
        for name in ("daily_result_quota", "max_wus_to_send", "max_wus_in_progress"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a whole number, 0 or more, not {value!r}")
        if not self.days > 0:
            raise ValueError(f"days must be positive, not {self.days}")
        for name in (
            "gpu_fraction",
            "on_frac_min",
            "error_rate",
            "no_reply_rate",
            "error_prone_fraction",
            "error_prone_rate",
            "wrong_output_fraction",
            "wrong_output_rate",
            "small_disk_fraction",
        ):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be between 0 and 1, not {getattr(self, name)}")
        if self.on_frac_min <= 0:
            raise ValueError("on_frac_min must be above 0")
        if not (
            1 <= self.min_quorum <= self.target_nresults <= self.max_success_results <= self.max_total_results
            and self.max_error_results <= self.max_total_results
        ):
            raise ValueError("the quorum and result limits are out of order")
        if (
            self.workunits_per_file < 1
            or self.workunits_per_trigger < 1
            or self.job_gflop <= 0
            or self.daemon_interval <= 0
        ):
            raise ValueError(
                "workunits_per_file, workunits_per_trigger, job_gflop and daemon_interval must be positive"
            )
        for name in ("report_delay", "backoff_min", "first_rpc_within"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be 0 or more, not {getattr(self, name)}")
        for name in ("mt_efficiency_min", "gpu_efficiency_min"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be above 0 and at most 1, not {getattr(self, name)}")
        for name in ("cpu_speed_sigma", "gpu_gflops_sigma", "version_select_random_factor"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be 0 or more, not {getattr(self, name)}")
        if isinstance(self.mt_threads, bool) or not isinstance(self.mt_threads, int) or self.mt_threads < 2:
            raise ValueError(f"mt_threads must be a whole number, 2 or more, not {self.mt_threads!r}")
        if self.plan_classes and self.live_app:
            raise ValueError("a live world runs its app's own versions; leave plan_classes off")
        if not self.small_disk_gb > 0:
            raise ValueError(f"small_disk_gb must be positive, not {self.small_disk_gb}")
        if self.homogeneous_redundancy not in (0, 1, 2):
            raise ValueError(f"homogeneous_redundancy must be 0, 1 or 2, not {self.homogeneous_redundancy}")
        if self.live_app and self.locality:
            raise ValueError("a live world serves its app's own scheduling; leave locality off")


@dataclass
class Job:
    name: str
    wu_name: str
    resource: str
    remaining: float
    runtime: float
    deadline: int
    output_name: str
    fate: str  # ok, error, wrong, lost
    ncpus: float = 1.0  # CPUs a CPU job takes (a multi-threaded version's threads)


@dataclass
class SimHost:
    index: int
    host_id: int
    user_id: int
    ncpus: int
    fpops: float
    gpus: int
    on_frac: float
    error_rate: float
    wrong_rate: float
    no_reply_rate: float
    join_time: float = 0.0
    leave_time: float = math.inf
    on: bool = True
    gone: bool = False
    epoch: int = 0
    rpc_seqno: int = 0
    progress_time: float = 0.0
    queued: dict = field(default_factory=lambda: {"cpu": [], "gpu": []})
    running: dict = field(default_factory=lambda: {"cpu": [], "gpu": []})
    done: list = field(default_factory=list)  # (completion time, ReportedResult)
    files: dict = field(default_factory=dict)
    backoff: float = 0.0
    next_rpc: float = 0.0
    rpc_pending: bool = False
    # Preferences, as on the Host row (edited through the prefs form) at ``prefs_mod_time``.
    work_buf_min_days: float = 0.0
    work_buf_additional_days: float = 0.0
    max_ncpus_pct: float = 100.0
    cpu_usage_limit: float = 100.0
    prefs_mod_time: int = 0
    # What the client says of its OS and CPU ("" leaves the Host row's as it is).
    os_name: str = ""
    p_vendor: str = ""
    p_model: str = ""
    # Real speeds (WorldSettings): CPU speed / p_fpops, a multi-threaded job's efficiency per
    # thread, the GPU's peak FLOPS (0: the world's gpu_gflops) and the share of it jobs reach.
    cpu_factor: float = 1.0
    mt_efficiency: float = 1.0
    gpu_peak: float = 0.0
    gpu_efficiency: float = 1.0
    # BOINC's disk allowance in GiB (disk_max_used_gb); 0: the host says nothing of its disk.
    disk_gb: float = 0.0

    @property
    def active(self) -> bool:
        return self.on and not self.gone

    @property
    def usable_cpus(self) -> int:
        """The CPUs the preferences let it use: max_ncpus_pct of them, at least one."""
        return max(int(self.ncpus * self.max_ncpus_pct / 100), 1)

    @property
    def speed(self) -> float:
        """The fraction of wall time its jobs compute (cpu_usage_limit throttles them)."""
        return max(self.cpu_usage_limit, 1.0) / 100

    def instances(self, resource: str) -> int:
        return self.usable_cpus if resource == "cpu" else self.gpus

    def load(self, jobs: Iterable[Job]) -> float:
        """Instances ``jobs`` take: a multi-threaded job its threads, any other one."""
        return sum(getattr(job, "ncpus", 1.0) for job in jobs)

    def work_seconds(self, resource: str) -> float:
        """Wall seconds of queued work per usable instance."""
        jobs = self.queued[resource] + self.running[resource]
        return (
            sum(job.remaining * getattr(job, "ncpus", 1.0) for job in jobs)
            / max(self.instances(resource), 1)
            / self.speed
        )


@dataclass
class Counters:
    rpcs: int = 0
    bytes_downloaded: int = 0
    downloads: int = 0
    jobs_received: int = 0
    jobs_reported: int = 0
    jobs_lost: int = 0
    hosts_left: int = 0
    hosts_joined: int = 0
    daemon_rounds: int = 0
    workunits_generated: int = 0
    sched_waits: int = 0
    disk_deletions: int = 0  # files the scheduler had a host short of disk delete
    rpcs_refused: int = 0  # requests the scheduler refused (an engine host backs off)
    # RPC outcomes: asked for work and got some, asked and got none, only reported.
    rpcs_with_work: int = 0
    rpcs_without_work: int = 0
    rpcs_report_only: int = 0


class Sample(NamedTuple):
    """The world at simulated time ``t`` (seconds): its app's results by server state and
    outcome, and its running totals (RPCs by outcome, credit, input bytes downloaded)."""

    t: float
    unsent: int
    in_progress: int
    over: int
    success: int
    client_error: int
    no_reply: int
    other_outcome: int
    valid: int
    invalid: int
    hosts_active: int
    rpcs: int
    rpcs_with_work: int
    rpcs_without_work: int
    rpcs_report_only: int
    credit: float
    bytes_downloaded: int


class Simulation:
    """One world's state; ``setup()`` once, then ``run_until(t)`` in as many slices as wanted."""

    def __init__(self, settings: WorldSettings, *, prefix: str = "w", project_id: int | None = None) -> None:
        settings.check()
        self.settings = settings
        self.prefix = prefix
        # The project the world's rows belong to and its daemons pass over (DESIGN.md
        # "Projects"): given, or made by ``setup`` (a live world's is its app's).
        self.project_id: int = project_id  # type: ignore[assignment]
        self.rng = random.Random(settings.seed)
        self.heap: list[tuple[float, int, int, str, tuple[Any, ...]]] = []
        self.counter = 0
        self.t = 0.0
        self.hosts: list[SimHost] = []
        self.engine_hosts: list[EngineHost] = []  # numbered after the simple hosts
        self.engine_records_at = 0.0  # when their records were last stored (world.engine_records)
        self.counters = Counters()
        # the app the world runs, set (by setup or join) before any pass reads it
        self.app_id: int = None  # type: ignore[assignment]
        self.work_end = settings.days * DAY
        self.end = self.work_end + settings.drain_days * DAY
        self.draining = False
        self.finished = False
        self.finished_at: float | None = None
        self.round_at = 0.0  # the time of the next daemon round
        self.file_names: list[str] = []
        self.wrong_checksums: set[str] = set()
        self.wrong_results: set[str] = set()  # names of results whose output was wrong
        self.abandoned: set[str] = set()  # names of results a host held when it left for good
        self.prefs_seen = 1  # the latest prefs_mod_time read back from the Host rows
        self.host_index: dict[int, int] = {}  # Host id -> index in ``hosts``
        self.samples: list[Sample] = []  # Sample records not yet stored (``take_samples`` hands them over)
        # The world's own platform name keeps its hosts and its app's work to each other
        # when several worlds (or a demo project) share the database.
        self.platform = f"{prefix}-x86_64-pc-linux-gnu"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_project", None)  # a row, read again where the state is loaded
        return state

    def project(self) -> Project:
        """The world's project row, read once per process."""
        row = self.__dict__.get("_project")
        if row is None or row.pk != self.project_id:
            row = self._project = Project.objects.get(pk=self.project_id)
        return row

    def own_project(self) -> int:
        """The id of the world's project: the one it was given, or a new world project named
        after its prefix."""
        if self.project_id is None:
            slug = f"world-{self.prefix}".lower().replace("_", "-")[:50]
            self.project_id = Project.objects.create(
                name=f"World {self.prefix}", slug=slug, kind=Project.Kind.WORLD, simulated_time=self.now(0)
            ).pk
        return self.project_id

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("samples", [])  # a world stored before samples were taken
        state.setdefault("engine_hosts", [])
        state.setdefault("engine_records_at", 0.0)
        self.__dict__.update(state)

    # --- the heap ---------------------------------------------------------------------------

    def push(self, time: float, priority: int, kind: str, *data: Any) -> None:
        self.counter += 1
        heapq.heappush(self.heap, (time, priority, self.counter, kind, data))

    def now(self, t: float | None = None) -> int:
        """Unix seconds the back end sees at simulated time ``t``."""
        return self.settings.start_time + int(self.t if t is None else t)

    # --- set-up -----------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the app, its versions, the volunteers, their hosts and the data files; a live
        world makes only the volunteers and hosts, for its existing app."""
        s = self.settings
        if s.live_app:
            self.setup_live()
            return
        with transaction.atomic():
            project_id = self.own_project()
            app = App.objects.create(
                project_id=project_id,
                name=f"{self.prefix}_einstein",
                user_friendly_name="World workload",
                locality_scheduling=s.locality,
                min_quorum=s.min_quorum,
                target_nresults=s.target_nresults,
                max_error_results=s.max_error_results,
                max_total_results=s.max_total_results,
                max_success_results=s.max_success_results,
                delay_bound=s.delay_bound,
                rsc_fpops_est=s.job_gflop * 1e9,
                rsc_fpops_bound=s.job_gflop * 1e10,
                unsent_target=0,
                create_time=self.now(0),
                homogeneous_redundancy=s.homogeneous_redundancy,
            )
            self.app_id = app.pk
            AppVersion.objects.create(
                project_id=project_id,
                app=app,
                version_num=100,
                flops=s.cpu_gflops_median * 1e9,
                platform=self.platform,
                create_time=self.now(0),
            )
            AppVersion.objects.create(
                project_id=project_id,
                app=app,
                version_num=100,
                plan_class="cuda",
                platform=self.platform,
                gpu_type=GpuType.NVIDIA,
                gpu_usage=1.0,
                avg_ncpus=0.1,
                flops=s.gpu_gflops * 1e9,
                create_time=self.now(0),
            )
            if s.plan_classes:
                AppVersion.objects.create(
                    project_id=project_id,
                    app=app,
                    version_num=100,
                    plan_class="mt",
                    platform=self.platform,
                    avg_ncpus=s.mt_threads,
                    flops=s.cpu_gflops_median * 1e9 * s.mt_threads,
                    create_time=self.now(0),
                )
                self.plan_class_spec()
            self.make_hosts(app)
            self.make_engine_hosts(app)
            self.make_files(app)
        self.schedule_round(0.0)
        self.push(self.end, END, "end")

    def plan_class_spec(self) -> str:
        """The path of the world's plan_class_spec.xml (``plan_classes``), written when
        missing (a world resumed on another machine writes it again); "" without."""
        s = self.settings
        if not s.plan_classes:
            return ""
        path = Path(django_settings.BOINCWEB_DATA_DIR) / "worlds" / f"{self.prefix}_plan_class_spec.xml"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(PLAN_CLASS_SPEC.format(threads=s.mt_threads))
        return str(path)

    def scheduler_config(self, locality_config: sched_locality.LocalityConfig | None = None) -> SchedulerConfig:
        """The scheduler's options for this world's requests: BOINC's defaults, with the
        world's plan classes and random factor, and ``locality_config`` (a request's
        sched_locality.LocalityConfig)."""
        return SchedulerConfig(
            plan_class_spec=self.plan_class_spec(),
            version_select_random_factor=(self.settings.version_select_random_factor),
            locality_config=locality_config,
            **self.scheduler_limits(),
        )

    def scheduler_limits(self) -> dict[str, Any]:
        """The world's scheduler options that may differ from BOINC's defaults (WorldSettings):
        its limits and whether runtime estimates learn."""
        s = self.settings
        limits: dict[str, Any] = {
            "daily_result_quota": DAILY_RESULT_QUOTA if s.daily_result_quota is None else s.daily_result_quota,
            "rte_no_stats": not s.runtime_stats,
        }
        for name in ("max_wus_to_send", "max_wus_in_progress"):
            if getattr(s, name) is not None:
                limits[name] = getattr(s, name)
        return limits

    def setup_live(self) -> None:
        app = App.objects.filter(name=self.settings.live_app).first()
        if app is None:
            raise ValueError(f"no app named {self.settings.live_app!r} to volunteer for")
        version = app.versions.filter(deprecated=False, gpu_usage=0).first()
        if version is None:
            raise ValueError(f"app {app.name!r} has no CPU version for the hosts to run")
        self.app_id = app.pk
        self.project_id = app.project_id
        self.platform = version.platform
        with transaction.atomic():
            self.make_hosts(app)
        self.schedule_round(0.0)
        self.push(self.end, END, "end")

    def make_hosts(self, app: App) -> None:
        s, rng = self.settings, self.rng
        n_joiners = sum(1 for _ in range(s.hosts) if rng.random() < s.join_per_day * s.days)
        total = s.hosts + n_joiners
        if not total:
            return  # a world of engine hosts only
        User = get_user_model()
        users = User.objects.bulk_create(User(username=f"{self.prefix}-volunteer{i}") for i in range(total))
        if users[0].pk is None:  # backends that don't return ids from bulk_create
            users = list(User.objects.filter(username__startswith=f"{self.prefix}-volunteer").order_by("id"))
        specs = []
        for i in range(total):
            ncpus = rng.choices(s.ncpus_choices, s.ncpus_weights)[0]
            fpops = s.cpu_gflops_median * 1e9 * math.exp(rng.gauss(0, s.cpu_gflops_sigma))
            gpus = 1 if rng.random() < s.gpu_fraction else 0
            on_frac = rng.uniform(s.on_frac_min, 1.0)
            error_rate = s.error_prone_rate if rng.random() < s.error_prone_fraction else s.error_rate
            wrong_rate = s.wrong_output_rate if rng.random() < s.wrong_output_fraction else 0.0
            join = rng.uniform(0, self.work_end) if i >= s.hosts else 0.0
            leave = join + rng.expovariate(s.leave_per_day / DAY) if s.leave_per_day else math.inf
            specs.append((ncpus, fpops, gpus, on_frac, error_rate, wrong_rate, join, leave))
        # their own generators, so a world without HR or real speeds draws as it always did
        hr_rng = random.Random(f"{s.seed}:hr")
        platforms = [hr_rng.choice(HR_PLATFORMS) for _ in range(total)]
        speed_rng = random.Random(f"{s.seed}:speed")
        speeds = [
            (
                math.exp(-abs(speed_rng.gauss(0, s.cpu_speed_sigma))),
                speed_rng.uniform(s.mt_efficiency_min, 1.0),
                s.gpu_gflops * 1e9 * math.exp(speed_rng.gauss(0, s.gpu_gflops_sigma)),
                speed_rng.uniform(s.gpu_efficiency_min, 1.0),
            )
            for _ in range(total)
        ]
        disk_rng = random.Random(f"{s.seed}:disk")
        small_disk = [disk_rng.random() < s.small_disk_fraction for _ in range(total)]
        rows = Host.objects.bulk_create(
            Host(
                project_id=app.project_id,
                owner=users[i],
                domain_name=f"{self.prefix}-host{i}",
                platform=self.platform,
                os_name=platforms[i][0] if s.homogeneous_redundancy else "Linux",
                p_ncpus=ncpus,
                p_fpops=fpops,
                gpu_type=GpuType.NVIDIA if gpus else GpuType.NONE,
                gpu_count=gpus,
                gpu_peak_flops=speeds[i][2] if gpus else 0.0,
                on_frac=on_frac,
                work_buf_min_days=s.work_buf_min_days,
                work_buf_additional_days=s.work_buf_additional_days,
                create_time=self.now(join),
            )
            for i, (ncpus, fpops, gpus, on_frac, error_rate, wrong_rate, join, leave) in enumerate(specs)
        )
        if rows[0].pk is None:
            rows = list(Host.objects.filter(domain_name__startswith=f"{self.prefix}-host").order_by("id"))
        for i, (row, spec) in enumerate(zip(rows, specs)):
            ncpus, fpops, gpus, on_frac, error_rate, wrong_rate, join, leave = spec
            host = SimHost(
                i,
                row.pk,
                row.owner_id,
                ncpus,
                fpops,
                gpus,
                on_frac,
                error_rate,
                wrong_rate,
                s.no_reply_rate,
                join_time=join,
                leave_time=leave,
                progress_time=join,
                gone=join > 0,
                work_buf_min_days=s.work_buf_min_days,
                work_buf_additional_days=s.work_buf_additional_days,
            )
            host.cpu_factor, host.mt_efficiency, host.gpu_peak, host.gpu_efficiency = speeds[i]
            self.hosts.append(host)
            self.host_index[row.pk] = i
            if s.homogeneous_redundancy:
                host.os_name, host.p_vendor, host.p_model = platforms[i]
            if small_disk[i]:
                host.disk_gb = s.small_disk_gb
            if join > 0:
                self.push(join, CHANGE, "join", i)
            else:
                self.push(self.rng.uniform(0, s.first_rpc_within), RPC, "rpc", i)
                self.schedule_off(host)
            if leave < self.work_end:
                self.push(leave, CHANGE, "leave", i)

    def make_engine_hosts(self, app: App) -> None:
        """The engine hosts of ``engine_hosts``, after the simple ones: a volunteer and a Host
        row each, and an engine run of its class's policy on its description with the world's
        project attached (world.engine_host). A drawn host draws as a simple one does, from a
        generator of its own, so adding engine hosts leaves the simple hosts' draws as they were."""
        s = self.settings
        classes = [EngineClass.from_dict(c) for c in s.engine_hosts]
        if not classes:
            return
        rng = random.Random(f"{s.seed}:engine")
        specs = []
        for eclass in classes:
            for _ in range(eclass.count):
                ncpus = rng.choices(s.ncpus_choices, s.ncpus_weights)[0]
                fpops = s.cpu_gflops_median * 1e9 * math.exp(rng.gauss(0, s.cpu_gflops_sigma))
                gpu_peak = s.gpu_gflops * 1e9 if rng.random() < s.gpu_fraction else 0.0
                on_frac = rng.uniform(s.on_frac_min, 1.0)
                error_rate = s.error_prone_rate if rng.random() < s.error_prone_fraction else s.error_rate
                wrong_rate = s.wrong_output_rate if rng.random() < s.wrong_output_fraction else 0.0
                drawn = drawn_host(ncpus, fpops, gpu_peak, on_frac, s.mean_on_period)
                specs.append((eclass, drawn, error_rate, wrong_rate, rng.randrange(1, 2**31)))
        first = len(self.hosts)
        project = f"{self.prefix} world"
        scenarios = [
            engine_scenario(s, eclass, project, app.name, drawn, f"{self.prefix}-engine{k}")
            for k, (eclass, drawn, *_rest) in enumerate(specs)
        ]
        User = get_user_model()
        users = User.objects.bulk_create(User(username=f"{self.prefix}-engine-volunteer{k}") for k in range(len(specs)))
        if users[0].pk is None:
            users = list(User.objects.filter(username__startswith=f"{self.prefix}-engine-volunteer").order_by("id"))
        rows = Host.objects.bulk_create(
            Host(
                project_id=app.project_id,
                owner=users[k],
                domain_name=f"{self.prefix}-engine{k}",
                platform=self.platform,
                os_name="Linux",
                p_ncpus=sc.host.ncpus,
                p_fpops=sc.host.cpu_flops,
                gpu_type=GpuType.NVIDIA if sc.host.gpus else GpuType.NONE,
                gpu_count=sum(g.count for g in sc.host.gpus),
                gpu_peak_flops=sc.host.gpus[0].peak_flops if sc.host.gpus else 0.0,
                on_frac=sc.host.on.frac,
                work_buf_min_days=sc.prefs.work_buf_min_days,
                work_buf_additional_days=sc.prefs.work_buf_additional_days,
                create_time=self.now(0),
            )
            for k, sc in enumerate(scenarios)
        )
        if rows[0].pk is None:
            rows = list(Host.objects.filter(domain_name__startswith=f"{self.prefix}-engine").order_by("id"))
        for k, (row, sc, spec) in enumerate(zip(rows, scenarios, specs)):
            eclass, _drawn, error_rate, wrong_rate, seed = spec
            server = WorldServer()
            em = engine.start(
                sc,
                servers={project: server},
                policy=eclass.policy,
                duration=self.end,
                delta=ENGINE_DELTA,
                seed=seed,
            )
            host = EngineHost(
                first + k,
                row.pk,
                row.owner_id,
                row.domain_name,
                eclass.policy,
                project,
                em,
                error_rate=error_rate,
                wrong_rate=wrong_rate,
                no_reply_rate=s.no_reply_rate,
                rng=random.Random(seed),
            )
            server.host = host
            self.engine_hosts.append(host)
            self.schedule_engine(host)

    def schedule_engine(self, host: EngineHost) -> None:
        """Put the engine host's next instant on the world's heap; an entry it had for another
        time goes stale (``step_engine`` passes it over)."""
        host.next_at = host.em.next_time
        if host.next_at < math.inf:
            self.push(host.next_at, RPC, "engine", host.index - len(self.hosts))

    def step_engine(self, host: EngineHost) -> None:
        """Play an engine host's instant at the world's time (its RPCs reach the scheduler
        now) and put its next instant on the world's heap."""
        if self.t != host.next_at:
            return  # an entry made stale by a preference change that brought the host forward
        server = host.em.servers[host.project]
        assert isinstance(server, WorldServer)
        server.world = self
        try:
            host.em.advance_to(self.t)
        finally:
            server.world = None
        self.schedule_engine(host)

    def make_files(self, app: App) -> None:
        """Enough data files that the population cannot run out of work in ``days``."""
        s = self.settings
        flops = sum(
            (h.ncpus * h.fpops * h.cpu_factor + h.gpus * h.gpu_peak * h.gpu_efficiency) * h.on_frac for h in self.hosts
        )
        flops += sum(h.peak_flops() * h.scenario.host.on.frac for h in self.engine_hosts)
        results = flops * s.days * DAY / (s.job_gflop * 1e9)
        n_files = math.ceil(1.5 * results / (s.workunits_per_file * s.target_nresults))
        n_files += math.ceil((len(self.hosts) + len(self.engine_hosts)) / s.target_nresults) + 1
        self.file_names = [f"{self.prefix}_data{i:06d}" for i in range(n_files)]
        sched_locality.create_data_files(app, self.file_names, nbytes=s.file_nbytes)

    # --- availability and churn ---------------------------------------------------------------

    def schedule_off(self, host: SimHost) -> None:
        if host.on_frac >= 1:
            return
        self.push(self.t + self.rng.expovariate(1 / self.settings.mean_on_period), CHANGE, "off", host.index)

    def turn_off(self, host: SimHost) -> None:
        self.advance(host)
        host.on = False
        host.epoch += 1
        mean_off = self.settings.mean_on_period * (1 - host.on_frac) / host.on_frac
        self.push(self.t + self.rng.expovariate(1 / mean_off), CHANGE, "on", host.index)

    def turn_on(self, host: SimHost) -> None:
        host.on = True
        host.progress_time = self.t
        self.schedule_off(host)
        self.start_jobs(host)
        self.maybe_rpc(host)

    def host_leaves(self, index: int, at: float) -> None:
        """Host ``index`` vanishes for good at simulated time ``at``, with its jobs."""
        self.push(at, CHANGE, "leave", index)

    def leave(self, host: SimHost) -> None:
        if host.gone:
            return
        self.advance(host)
        host.gone = True
        host.epoch += 1
        held = [job.name for jobs in (*host.queued.values(), *host.running.values()) for job in jobs] + [
            report.name for _, report in host.done
        ]
        self.abandoned.update(held)
        self.counters.jobs_lost += len(held)
        self.counters.hosts_left += 1

    def join(self, host: SimHost) -> None:
        host.gone = False
        host.progress_time = self.t
        self.counters.hosts_joined += 1
        self.schedule_off(host)
        self.maybe_rpc(host)

    # --- computing ----------------------------------------------------------------------------

    def advance(self, host: SimHost) -> None:
        """Count the computing done since the host's last change."""
        if host.active:
            elapsed = (self.t - host.progress_time) * host.speed
            for jobs in host.running.values():
                for job in jobs:
                    job.remaining = max(job.remaining - elapsed, 0.0)
        host.progress_time = self.t

    def start_jobs(self, host: SimHost) -> None:
        """Fill idle instances from the queue; (re)schedule every running job's end."""
        if not host.active:
            return
        self.advance(host)
        host.epoch += 1  # earlier end events of this host are stale from here on
        for resource in ("gpu", "cpu"):
            running, queued = host.running[resource], host.queued[resource]
            instances = host.instances(resource)
            while len(running) > 1 and host.load(running) > instances:  # fewer CPUs: preempt
                queued.insert(0, running.pop())
            # a multi-threaded job waits for its threads' CPUs (or runs alone when it has
            # more threads than the host lets it use)
            while queued and (not running or host.load(running) + host.load(queued[:1]) <= instances):
                running.append(queued.pop(0))
            for job in running:
                self.push(self.t + job.remaining / host.speed, JOB_DONE, "job_done", host.index, host.epoch, job.name)

    def job_done(self, host: SimHost, epoch: int, name: str) -> None:
        if epoch != host.epoch or not host.active:
            return
        self.advance(host)
        # The event is current (its epoch matches), so the job's time is up: finishing it
        # here, not by comparing a float remainder with zero, keeps rounding from looping.
        for jobs in host.running.values():
            for job in jobs:
                if job.name == name:
                    jobs.remove(job)
                    self.finish(host, job)
                    break
        self.start_jobs(host)
        self.maybe_rpc(host)

    def finish(self, host: SimHost, job: Job) -> None:
        if job.fate == "lost":
            self.counters.jobs_lost += 1
            return
        elapsed = job.runtime
        if job.fate == "error":
            report = ReportedResult(
                job.name,
                client_state=ClientState.COMPUTE_ERROR,
                exit_status=1,
                final_elapsed_time=elapsed,
                final_cpu_time=elapsed,
                stderr_out="simulated crash",
            )
        else:
            report = ReportedResult(
                job.name,
                final_elapsed_time=elapsed,
                final_cpu_time=elapsed,
                output_files=[
                    ReportedFile(job.output_name, data=self.output_bytes(host.index, job.wu_name, job.name, job.fate))
                ],
            )
        host.done.append((self.t, report))

    def output_bytes(self, index: int, wu_name: str, name: str, fate: str) -> bytes:
        """Result ``name``'s output from host ``index``: the same bytes on every good host,
        other bytes on a wrong one."""
        if fate == "wrong":
            data = f"{wu_name} wrong answer from host {index}\n".encode()
            self.wrong_checksums.add(hashlib.md5(data).hexdigest())
            self.wrong_results.add(name)
            return data
        return f"{wu_name} result {sum(wu_name.encode()) % 9973}\n".encode()

    # --- preferences ----------------------------------------------------------------------------

    def read_prefs(self) -> int:
        """Take up the preferences edited on the world's Host rows since the last look, so a
        host computes and asks for work by them from its next RPC on, as the prefs form
        promises.

        Called at each daemon round and at the start of each slice: one query for the rows
        whose ``prefs_mod_time`` is at or after the latest one seen (the form stamps it with
        the time of the edit; "at" catches a second edit in the same second), not one per RPC.
        Returns the number of hosts whose preferences changed.
        """
        rows = Host.objects.filter(platform=self.platform, prefs_mod_time__gte=self.prefs_seen).values_list(
            "id", "prefs_mod_time", *PREF_FIELDS
        )
        changed = 0
        engine_hosts = {h.host_id: h for h in self.engine_hosts if h is not None}  # a shard holds some
        for host_id, mod_time, *values in rows:
            self.prefs_seen = max(self.prefs_seen, mod_time)
            engine_host = engine_hosts.get(host_id)
            if engine_host is not None and engine_host.prefs_mod_time != mod_time:
                changed += self.engine_prefs(engine_host, mod_time, dict(zip(PREF_FIELDS, values)))
                continue
            index = self.host_index.get(host_id)
            if index is None or self.hosts[index].prefs_mod_time == mod_time:
                continue
            host = self.hosts[index]
            self.advance(host)  # the work done so far counts at the old speed
            for name, value in zip(PREF_FIELDS, values):
                setattr(host, name, value)
            host.prefs_mod_time = mod_time
            changed += 1
            self.start_jobs(host)  # CPUs allowed and speed may differ: new ends
            self.maybe_rpc(host)
        return changed

    def engine_prefs(self, host: EngineHost, mod_time: int, values: dict[str, float]) -> int:
        """An engine host takes up its edited work buffer (its engine's fetch checks follow it
        from the next step); the CPU limits it keeps from its description."""
        host.prefs_mod_time = mod_time
        prefs = host.em.prefs
        wanted = (values["work_buf_min_days"], values["work_buf_additional_days"])
        if wanted == (prefs.work_buf_min_days, prefs.work_buf_additional_days):
            return 0
        host.em.change_buffer(*wanted)
        if host.em.next_time < host.next_at:
            self.schedule_engine(host)
        return 1

    # --- scheduler RPCs -------------------------------------------------------------------------

    def buffer_low(self, host: SimHost) -> bool:
        low = host.work_buf_min_days * DAY
        return any(host.work_seconds(r) < low for r in ("cpu", "gpu") if host.instances(r))

    def maybe_rpc(self, host: SimHost) -> None:
        """Ask for an RPC when the buffer is low or a result waits too long to be reported."""
        if not host.active or host.rpc_pending:
            return
        # the same sum decides and schedules, so a check never finds itself early
        report_time = host.done[0][0] + self.settings.report_delay if host.done else math.inf
        report_due = bool(host.done) and (self.t >= report_time or self.draining)
        want = (self.buffer_low(host) and self.t >= host.next_rpc) or report_due
        if want:
            host.rpc_pending = True
            self.push(self.t, RPC, "rpc", host.index)
        elif host.done:
            self.push(report_time, RPC, "check", host.index)
        elif self.buffer_low(host):
            self.push(host.next_rpc, RPC, "check", host.index)

    def request(self, host: SimHost) -> SchedulerRequest:
        """The host's request: enough work to fill its buffer (its own preferences)."""
        s = self.settings
        fill = (host.work_buf_min_days + host.work_buf_additional_days) * DAY
        cpus = host.usable_cpus
        cpu_secs = max(fill - host.work_seconds("cpu"), 0.0) * cpus
        idle_cpus = max(cpus - host.load(host.running["cpu"] + host.queued["cpu"]), 0)
        gpu_requests = []
        if host.gpus:
            gpu_secs = max(fill - host.work_seconds("gpu"), 0.0) * host.gpus
            idle = max(host.gpus - len(host.running["gpu"]) - len(host.queued["gpu"]), 0)
            gpu_requests.append(
                GpuRequest(
                    GpuType.NVIDIA,
                    host.gpus,
                    host.gpu_peak or s.gpu_gflops * 1e9,
                    gpu_secs,
                    float(idle),
                    host.work_seconds("gpu"),
                )
            )
        host.rpc_seqno += 1
        disk = {}
        if host.disk_gb:
            disk = dict(d_total=1e12, d_free=5e11, d_boinc_used_total=sum(host.files.values()))
        return SchedulerRequest(
            hostid=host.host_id,
            userid=host.user_id,
            rpc_seqno=host.rpc_seqno,
            platform_name=self.platform,
            host_info=HostInfo(
                domain_name=f"{self.prefix}-host{host.index}",
                p_ncpus=host.ncpus,
                p_fpops=host.fpops,
                os_name=host.os_name,
                p_vendor=host.p_vendor,
                p_model=host.p_model,
                **disk,
            ),
            global_prefs=GlobalPrefs(disk_max_used_gb=host.disk_gb),
            time_stats=TimeStats(on_frac=host.on_frac),
            cpu_req_secs=cpu_secs,
            cpu_req_instances=float(idle_cpus),
            estimated_delay=host.work_seconds("cpu"),
            gpu_requests=gpu_requests,
            results=[report for _, report in host.done],
            file_infos=[StickyFile(name, nbytes) for name, nbytes in sorted(host.files.items())],
        )

    def call_scheduler(
        self, index: int, seqno: int, request: SchedulerRequest, *, asked: bool
    ) -> SchedulerReply | None:
        """Send host ``index``'s request (its ``seqno``-th) to the scheduler now and count the
        RPC; None when the scheduler refused it (SchedulerRequestError: the client backs off).
        When it finds no work for a request that asked for some, plain scheduling's
        generator tops the cushion up (``top_up``)."""
        # the host's index, not its database id, keeps the scheduler's choices the same
        # from one run of the seed to the next
        config = sched_locality.LocalityConfig(
            sorted_order=self.settings.sorted_order,
            wait_period=self.settings.wait_period,
            delete_files=True,
            scan_only_excluded=True,
            delete_only_finished=True,
            seed=self.settings.seed,
            wait=self.scheduler_wait,
            host_key=index,
        )
        # the scheduler's random factor (get_app_version) drawn from a generator of this
        # request's own, so the same seed makes the same choices
        sched_version.RNG.seed(f"{self.settings.seed}:{index}:{seqno}")
        try:
            reply = handle_request(
                request, project=self.project(), now=self.now(), config=self.scheduler_config(locality_config=config)
            )
        except SchedulerRequestError:
            self.counters.rpcs_refused += 1
            return None
        self.counters.rpcs += 1
        if reply.results:
            self.counters.rpcs_with_work += 1
        elif asked:
            self.counters.rpcs_without_work += 1
        else:
            self.counters.rpcs_report_only += 1
        if self.draining and (reply.result_acks or reply.results):
            self.wake_daemons()
        if asked and not reply.results and not self.settings.locality:
            self.top_up(self.now())
        return reply

    def rpc(self, host: SimHost) -> None:
        host.rpc_pending = False
        if not host.active:
            return
        self.advance(host)
        request = self.request(host)
        asked = request.cpu_req_secs > 0 or any(g.req_secs > 0 for g in request.gpu_requests)
        reply = self.call_scheduler(host.index, host.rpc_seqno, request, asked=asked)
        assert reply is not None, "a simple host's requests are well formed"
        acked = set(reply.result_acks)
        self.counters.jobs_reported += len(acked)
        host.done = [(t, r) for t, r in host.done if r.name not in acked]
        for name in reply.delete_file_infos:
            host.files.pop(name, None)
        # a host short of disk is told which file to delete with this message (rule 11)
        self.counters.disk_deletions += sum(m.text.startswith("BOINC will delete file") for m in reply.messages)
        for job in reply.results:
            self.receive(host, job)
        if reply.results or not asked:
            host.backoff = 0.0
            host.next_rpc = self.t
        else:
            host.backoff = min(max(self.settings.backoff_min, 2 * host.backoff), BACKOFF_MAX)
            host.next_rpc = self.t + (0.5 + self.rng.random()) * host.backoff
        self.start_jobs(host)
        self.maybe_rpc(host)

    def receive(self, host: SimHost, job: ReplyResult) -> None:
        """A job from a reply: download the inputs the host lacks, draw its fate, queue it."""
        self.download(host.files, job)
        fate = self.draw_fate(self.rng, host.no_reply_rate, host.error_rate, host.wrong_rate)
        resource = "cpu" if job.resource == "cpu" else "gpu"
        threads = max(job.app_version.avg_ncpus, 1.0) if resource == "cpu" else 1.0
        runtime = job.workunit.rsc_fpops_est / self.real_flops(host, resource, threads)
        host.queued[resource].append(
            Job(
                job.name,
                job.wu_name,
                resource,
                runtime,
                runtime,
                job.report_deadline,
                job.output_files[0].name,
                fate,
                ncpus=threads,
            )
        )
        self.counters.jobs_received += 1

    def download(self, files: dict[str, int], job: ReplyResult) -> None:
        """Fetch the job's input files a host lacks (``files``: the sticky ones it holds)."""
        for f in job.workunit.input_files:
            if f.name in files:
                continue
            self.counters.bytes_downloaded += f.nbytes
            self.counters.downloads += 1
            if f.sticky:
                files[f.name] = f.nbytes

    @staticmethod
    def draw_fate(rng: random.Random, no_reply_rate: float, error_rate: float, wrong_rate: float) -> str:
        """What becomes of a job: lost (no reply), error, wrong (output) or ok."""
        u = rng.random()
        if u < no_reply_rate:
            return "lost"
        if u < no_reply_rate + error_rate:
            return "error"
        if u < no_reply_rate + error_rate + wrong_rate:
            return "wrong"
        return "ok"

    def real_flops(self, host: SimHost, resource: str, threads: float) -> float:
        """The speed a job really runs at on ``host`` (WorldSettings' real speeds): on a GPU,
        its peak × its efficiency; on CPUs, p_fpops × the host's CPU factor, times the threads
        × their parallel efficiency for a multi-threaded job. The runtimes hosts report follow
        it, whatever the scheduler estimated."""
        if resource != "cpu":
            return (host.gpu_peak or self.settings.gpu_gflops * 1e9) * host.gpu_efficiency
        flops = host.fpops * host.cpu_factor
        return flops * threads * host.mt_efficiency if threads > 1 else flops

    def scheduler_wait(self, file_name: str, *, now: int, seconds: float) -> None:
        """The scheduler's locality wait in simulated time: the on-demand generator and the
        transitioner run meanwhile (reference/server.md §3.10)."""
        self.counters.sched_waits += 1
        self.generate(now)
        self.run_daemon("transitioner", now=now + max(int(seconds), 1))

    # --- daemons --------------------------------------------------------------------------------

    def top_up(self, now: int) -> int:
        """Run the world's generator and, when it made work, the transitioner for its results.

        Called at each daemon round and, with plain scheduling, after each request that found
        no work: BOINC's sample work generator polls the unsent count every 10 s
        (reference/server.md §3.1), so a cushion drawn down is refilled within seconds, not at
        the next round. Workunits are made a second before ``now`` because the transitioner
        takes those whose ``transition_time < now`` (§3.2): this pass then creates their results.
        """
        made = self.generate(now - 1)
        if made:
            self.run_daemon("transitioner", now=now)
        return made

    def run_daemon(self, name: str, *, now: int) -> int:
        """Passes of daemon ``name`` at ``now`` until one handles less than a batch; returns
        the work done. BOINC's daemons start their next pass at once after one that found work
        (reference/server.md §3), so between two rounds they keep up however many hosts
        report: a single pass of ``batch_size`` would leave a large world's backlog (and its
        new workunits, which the cushion generator waits for) to later rounds while the hosts
        back off empty-handed."""
        project = self.project()
        done = total = run_pass(name, project=project, now=now, batch_size=self.settings.batch_size)
        while done >= self.settings.batch_size:
            done = run_pass(name, project=project, now=now, batch_size=self.settings.batch_size)
            total += done
        return total

    def generate(self, now: int) -> int:
        """The world's work generator: on demand with locality, else a cushion of results (a live
        world's app has the project's own generator)."""
        if self.draining or self.settings.live_app:
            return 0
        app = App.objects.get(pk=self.app_id)
        s = self.settings
        if s.locality:
            made = sched_locality.generate_on_demand(
                app, now=now, per_file=s.workunits_per_file, per_trigger=s.workunits_per_trigger
            )
        else:
            # one cushion generator at a time per app, as work_generator.generate: the shards
            # of a sharded world (world.shards) top up at once
            with transaction.atomic():
                App.objects.select_for_update().filter(pk=app.pk).exists()
                made = self.generate_cushion(app, now)
        self.counters.workunits_generated += made
        return made

    def generate_cushion(self, app: App, now: int) -> int:
        s = self.settings
        if waiting_for_first_results(app):
            return 0
        # Small, as make_work's 300 or the sample generator's 10 (§3.1): the scheduler reads
        # the unsent results at each request, and ``top_up`` refills the cushion when a
        # request finds none.
        cushion = s.cushion or 2 * s.workunits_per_file * s.target_nresults
        unsent = app.results.filter(server_state__lte=ServerState.UNSENT).count()
        made = 0
        # the files with work left, in name order, read a few at a time: a large world has
        # thousands, and a top-up takes one or two
        open_files = LocalityTrigger.objects.filter(app=app, no_work_available=False).order_by("file_name")
        names: list[str] = []
        last = ""
        while unsent + made * s.target_nresults < cushion:
            if not names:
                names = list(open_files.filter(file_name__gt=last).values_list("file_name", flat=True)[:8])
                if not names:
                    break
            last = names.pop(0)
            made += sched_locality.make_file_work(app, last, now=now, per_file=s.workunits_per_file)
        return made

    def daemons(self) -> None:
        if self.t != self.round_at:
            return  # a round brought forward by ``wake_daemons`` replaced this one
        now = self.now()
        s = self.settings
        if not s.live_app:  # the world's clock is its project's
            Project.objects.filter(pk=self.project_id).update(simulated_time=now)
        self.read_prefs()
        if s.live_app:
            self.counters.daemon_rounds += 1
            self.sample()
            self.schedule_round(self.t + s.daemon_interval)
            return
        if not self.draining and self.t >= self.work_end:
            self.draining = True
            LocalityTrigger.objects.filter(app_id=self.app_id).update(no_work_available=True, need_work=False)
        work = 0
        for name in daemon_names():
            if name != "work_generator":
                work += self.run_daemon(name, now=now)
        work += self.top_up(now)
        if s.locality:
            work += sched_locality.manage_working_set(App.objects.get(pk=self.app_id), now=now)
        self.counters.daemon_rounds += 1
        self.sample()
        if self.draining and self.all_done():
            self.finished = True
            self.finished_at = self.t
            return
        next_round = self.t + s.daemon_interval
        if self.draining and not work:
            next_round = max(next_round, self.quiet_until())
        self.schedule_round(next_round)
        if self.draining:
            for host in self.hosts:
                if host.done:
                    self.maybe_rpc(host)

    def sample(self) -> None:
        """Record a Sample of the world now (one query over the app's results). A live world's
        app may hold work from before the world started; its counts include it."""
        totals = Result.objects.filter(project_id=self.project_id, app_id=self.app_id).aggregate(
            unsent=Count("id", filter=Q(server_state__lte=ServerState.UNSENT)),
            in_progress=Count("id", filter=Q(server_state=ServerState.IN_PROGRESS)),
            over=Count("id", filter=Q(server_state=ServerState.OVER)),
            success=Count("id", filter=Q(server_state=ServerState.OVER, outcome=Outcome.SUCCESS)),
            client_error=Count("id", filter=Q(server_state=ServerState.OVER, outcome=Outcome.CLIENT_ERROR)),
            no_reply=Count("id", filter=Q(server_state=ServerState.OVER, outcome=Outcome.NO_REPLY)),
            valid=Count("id", filter=Q(validate_state=ValidateState.VALID)),
            invalid=Count("id", filter=Q(validate_state=ValidateState.INVALID)),
            credit=Sum("granted_credit"),
        )
        c = self.totals()
        other = totals["over"] - totals["success"] - totals["client_error"] - totals["no_reply"]
        self.samples.append(
            Sample(
                t=self.t,
                unsent=totals["unsent"],
                in_progress=totals["in_progress"],
                over=totals["over"],
                success=totals["success"],
                client_error=totals["client_error"],
                no_reply=totals["no_reply"],
                other_outcome=other,
                valid=totals["valid"],
                invalid=totals["invalid"],
                hosts_active=self.active_hosts(),
                rpcs=c.rpcs,
                rpcs_with_work=c.rpcs_with_work,
                rpcs_without_work=c.rpcs_without_work,
                rpcs_report_only=c.rpcs_report_only,
                credit=round(totals["credit"] or 0.0, 6),
                bytes_downloaded=c.bytes_downloaded,
            )
        )

    def totals(self) -> Counters:
        """The world's counters (a sharded world's coordinator adds up its shards'; world.shards)."""
        return self.counters

    def active_hosts(self) -> int:
        return sum(1 for h in self.hosts if h.active) + sum(1 for h in self.engine_hosts if h.active)

    def take_samples(self) -> list[Sample]:
        """The samples taken since the last call, handed over to be stored."""
        taken, self.samples = self.samples, []
        return taken

    def schedule_round(self, t: float) -> None:
        self.round_at = t
        self.push(t, DAEMONS, "daemons")

    def round_after(self, t: float) -> float:
        """The first daemon round strictly after simulated time ``t`` (rounds are every
        ``daemon_interval`` from 0; at equal times the round comes before the hosts)."""
        interval = self.settings.daemon_interval
        return interval * (math.floor(t / interval) + 1)

    def quiet_until(self) -> float:
        """While draining, after a round in which no daemon found anything to do: the round
        after the earliest ``transition_time`` of the world's workunits, when the transitioner
        has something again (a timed-out result, a validator's retry; reference/server.md
        §3.2). Until then the daemons would find nothing unless a host reports, and a
        scheduler request brings the round forward (``wake_daemons``). The rounds left out
        are ones that change nothing, so the outcome is that of a round every interval.
        """
        due = Workunit.objects.filter(app_id=self.app_id, transition_time__lt=INT_MAX).aggregate(
            due=Min("transition_time")
        )["due"]
        if due is None:
            return self.end
        return min(self.round_after(due - self.settings.start_time), self.end)

    def wake_daemons(self) -> None:
        """A request during the drain reported or was sent results: the next round is the
        usual one (a request that did neither leaves the daemons nothing new)."""
        due = self.round_after(self.t)
        if due < self.round_at:
            self.schedule_round(due)

    def all_done(self) -> bool:
        wus = Workunit.objects.filter(app_id=self.app_id)
        return not wus.exclude(assimilate_state=AssimilateState.DONE, file_delete_state=FileDeleteState.DONE).exists()

    # --- the loop -------------------------------------------------------------------------------

    def run_until(self, t_end: float, progress: Callable[[Self], object] | None = None) -> int:
        """Process every event up to simulated time ``t_end``; return events processed."""
        processed = 0
        if not self.finished:
            self.read_prefs()
        while self.heap and not self.finished and self.heap[0][0] <= t_end:
            time, _, _, kind, data = heapq.heappop(self.heap)
            self.t = time
            self.handle(kind, data)
            processed += 1
            if progress and processed % 1000 == 0:
                progress(self)
        if not self.finished:
            self.t = max(self.t, min(t_end, self.end))
        return processed

    def run_shard(self, t_start: float, t_end: float, *, draining: bool) -> int:
        """Process this shard's host events from the daemon round at ``t_start`` up to (not
        including) the one at ``t_end``; return events processed.

        A sharded world (world.shards) splits its hosts between Simulation objects of their
        own, each holding its hosts' events, random generator and counters, and runs the
        daemon rounds apart; this is what the single chain does for the hosts between two
        rounds: their preferences read back, and while ``draining`` (the round at
        ``t_start`` said so) the hosts holding finished jobs report them.
        """
        processed = 0
        self.t = t_start
        self.draining = draining
        self.read_prefs()
        if self.draining:
            for index in self.host_index.values():
                if self.hosts[index].done:
                    self.maybe_rpc(self.hosts[index])
        while self.heap and self.heap[0][0] < t_end:
            time, _, _, kind, data = heapq.heappop(self.heap)
            self.t = time
            self.handle(kind, data)
            processed += 1
        self.t = t_end
        return processed

    def run(self, progress: Callable[[Self], object] | None = None) -> Self:
        self.run_until(self.end, progress)
        if not self.finished:
            self.finished, self.finished_at = True, self.t
            self.sample()
        return self

    def handle(self, kind: str, data: tuple[Any, ...]) -> None:
        if kind == "daemons":
            self.daemons()
        elif kind == "end":
            self.finished, self.finished_at = True, self.t
            self.sample()
        elif kind == "engine":
            self.step_engine(self.engine_hosts[data[0]])
        else:
            host = self.hosts[data[0]]
            if kind == "rpc":
                self.rpc(host)
            elif kind == "check":
                self.maybe_rpc(host)
            elif kind == "job_done":
                self.job_done(host, data[1], data[2])
            elif kind == "off" and host.active:
                self.turn_off(host)
            elif kind == "on" and not host.gone:
                self.turn_on(host)
            elif kind == "leave":
                self.leave(host)
            elif kind == "join":
                self.join(host)
