"""The scheduler RPC's request and reply objects (reference/protocol.md §4.2, §4.3).

Plain dataclasses, so the simulated world builds them directly and the wire layer parses XML
into a SchedulerRequest and writes a SchedulerReply as XML. ``backend.daemons.scheduler``
re-exports them; its docstring describes the entry point ``handle_request``.
"""

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from backend.daemons.host_app_version import check_quota
from backend.models import ClientState

if TYPE_CHECKING:
    from backend.daemons.sched_limit import JobLimits
    from backend.models import AppVersion

T = TypeVar("T")

# --- the request (reference/protocol.md §4.2) ----------------------------------------------


@dataclass
class HostInfo:
    """``<host_info>``: the hardware the client describes."""

    domain_name: str = ""
    host_cpid: str = ""
    ip_addr: str = ""
    timezone: int = 0
    p_ncpus: int = 1
    p_vendor: str = ""
    p_model: str = ""
    p_fpops: float = 1e9
    p_iops: float = 1e9
    # None: the caller does not model memory (a simulated host), so no memory check; a real
    # client always says, and 0 or less then means BOINC's default of 64 MB.
    m_nbytes: float | None = None
    # The disk (bytes): None for d_total and d_free means the caller does not model disk (a
    # simulated host), so no disk check; a real client always says, and 0 then means no room.
    # d_boinc_used_total and d_boinc_used_project come from the request's <disk_usage>.
    d_total: float | None = None
    d_free: float | None = None
    d_boinc_used_total: float = 0.0
    d_boinc_used_project: float = 0.0
    # The download speed measured by the client (<net_stats><bwdown>, bytes/s); 0: it has
    # never downloaded anything, and BOINC's bandwidth check is skipped.
    n_bwdown: float = 0.0
    os_name: str = ""
    os_version: str = ""
    # The CPU's features ("sse3 avx2 ..."), which plan classes' <cpu_feature> look for.
    p_features: str = ""


@dataclass
class TimeStats:
    """``<time_stats>``: the fractions of time the host is on, connected and allowed to compute."""

    on_frac: float = 1.0
    connected_frac: float = 1.0
    cpu_and_network_available_frac: float = 1.0
    active_frac: float = 1.0
    gpu_active_frac: float = 1.0


@dataclass
class GlobalPrefs:
    """The volunteer's global preferences the scheduler reads (sched_types.cpp
    GLOBAL_PREFS::parse): the request's ``<working_global_preferences>``, else its
    ``<global_preferences>``. BOINC's defaults are all 0 (no limit); the RAM fractions are
    the percentages the client gives, over 100."""

    disk_max_used_gb: float = 0.0
    disk_max_used_pct: float = 0.0
    disk_min_free_gb: float = 0.0
    ram_max_used_busy_frac: float = 0.0
    ram_max_used_idle_frac: float = 0.0


@dataclass
class GpuRequest:
    """One coprocessor type's request (``<coproc_cuda>``, ``<coproc_ati>``, ...).

    ``type`` is a GpuType value ("NVIDIA", "ATI", "intel_gpu", "apple_gpu").
    """

    type: str
    count: int = 1
    peak_flops: float = 0.0
    req_secs: float = 0.0
    req_instances: float = 0.0
    estimated_delay: float = 0.0
    # What plan classes check (backend.daemons.plan_class): the GPU's RAM in bytes, its
    # display driver version, NVIDIA compute capability (major × 100 + minor), CUDA version.
    gpu_ram: float = 0.0
    driver_version: int = 0
    compute_capability: int = 0
    cuda_version: int = 0


@dataclass
class ReportedFile:
    """A ``<file_info>`` inside a reported ``<result>``: an output file the client uploaded."""

    name: str
    nbytes: int = 0
    md5_cksum: str = ""
    max_nbytes: int = 0
    error_msg: str = ""
    # The contents, when the caller (a simulated host) uploads with the report.
    data: bytes | None = None


@dataclass
class ReportedResult:
    """A completed job (reference/protocol.md §4.4). ``client_state`` is the ``<state>`` element."""

    name: str
    client_state: int = ClientState.FILES_UPLOADED
    exit_status: int = 0
    final_elapsed_time: float = 0.0
    final_cpu_time: float = 0.0
    stderr_out: str = ""
    output_files: list[ReportedFile] = field(default_factory=list)
    app_version_num: int = 0
    platform: str = ""
    plan_class: str = ""


@dataclass
class StickyFile:
    """A top-level ``<file_info>``: a sticky file the client holds (``status`` 1 = present)."""

    name: str
    nbytes: int = 0
    status: int = 1


@dataclass
class ClientAppVersion:
    """An ``<app_version>`` the client lists (what an anonymous-platform client can run)."""

    app_name: str
    version_num: int
    platform: str = ""
    plan_class: str = ""
    avg_ncpus: float = 1.0
    flops: float = 0.0
    gpu_type: str = ""
    gpu_usage: float = 0.0


@dataclass
class SchedulerRequest:
    """One ``<scheduler_request>``.

    ``hostid`` 0 means a new host; then ``userid`` (the account the caller resolved from the
    authenticator) is required. With a ``hostid`` the ``userid``, when given, must own the host.
    """

    hostid: int = 0
    userid: int | None = None
    rpc_seqno: int = 0
    core_client_version: str = ""
    platform_name: str = "x86_64-pc-linux-gnu"
    alt_platforms: list[str] = field(default_factory=list)
    host_info: HostInfo = field(default_factory=HostInfo)
    time_stats: TimeStats = field(default_factory=TimeStats)
    global_prefs: GlobalPrefs = field(default_factory=GlobalPrefs)
    work_req_seconds: float = 0.0
    cpu_req_secs: float = 0.0
    cpu_req_instances: float = 0.0
    estimated_delay: float = 0.0
    gpu_requests: list[GpuRequest] = field(default_factory=list)
    dont_send_work: bool = False
    results: list[ReportedResult] = field(default_factory=list)
    file_infos: list[StickyFile] = field(default_factory=list)
    app_versions: list[ClientAppVersion] = field(default_factory=list)
    other_results: list[str] | None = None
    # The volunteer's project preference <allow_beta_work> (BOINC reads it from the user's
    # project_prefs): beta app versions go only to those who allow them.
    allow_beta_work: bool = False

    @property
    def models_disk(self) -> bool:
        """Whether the request says how much disk its host has (a real client always does;
        a simulated host leaves ``HostInfo.d_free`` None, and then no disk check applies)."""
        return self.host_info.d_free is not None


# --- the reply (reference/protocol.md §4.3) ------------------------------------------------


@dataclass
class ReplyFile:
    """A ``<file_info>`` of the reply: an input to download or an output to upload."""

    name: str
    nbytes: int = 0
    md5_cksum: str = ""
    max_nbytes: int = 0
    sticky: bool = False
    report_on_rpc: bool = False


@dataclass
class ReplyAppVersion:
    app_name: str
    version_num: int
    platform: str
    plan_class: str = ""
    avg_ncpus: float = 1.0
    flops: float = 0.0
    gpu_type: str = ""
    gpu_usage: float = 0.0

    @classmethod
    def of_row(cls, row: "AppVersion") -> "ReplyAppVersion":
        """The reply for an app version row as the row states it (its own CPUs, FLOPS and GPU
        usage), for versions no plan class chooser has described for this host."""
        return cls(
            row.app.name,
            row.version_num,
            row.platform,
            row.plan_class,
            row.avg_ncpus,
            row.flops,
            row.gpu_type,
            row.gpu_usage,
        )


@dataclass
class ReplyWorkunit:
    name: str
    app_name: str
    rsc_fpops_est: float
    rsc_fpops_bound: float
    rsc_memory_bound: float
    rsc_disk_bound: float
    delay_bound: int
    input_files: list[ReplyFile] = field(default_factory=list)


@dataclass
class ReplyResult:
    """A job to run. ``report_deadline`` is what the client is told: without the grace period.

    ``resource`` is "cpu" or a GpuType value; ``estimated_runtime`` the scheduler's estimate
    of the job's duration on this host (seconds of computing).
    """

    name: str
    wu_name: str
    report_deadline: int
    workunit: ReplyWorkunit
    app_version: ReplyAppVersion
    output_files: list[ReplyFile] = field(default_factory=list)
    resource: str = "cpu"
    estimated_runtime: float = 0.0


@dataclass
class Message:
    text: str
    priority: str = "low"


@dataclass
class RejectedReport:
    name: str
    reason: str


@dataclass
class SchedulerReply:
    hostid: int = 0
    request_delay: float = 0.0
    results: list[ReplyResult] = field(default_factory=list)
    result_acks: list[str] = field(default_factory=list)
    rejected: list[RejectedReport] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    delete_file_infos: list[str] = field(default_factory=list)
    result_aborts: list[str] = field(default_factory=list)
    result_abort_if_not_started: list[str] = field(default_factory=list)
    # BOINC's WORK_REQ mem, disk, bandwidth and speed .insufficient flags (not sent to the
    # client) that the lost results' resend set (sched_send's MEMORY, DISK, BANDWIDTH,
    # DEADLINE): sched_check.cpp wu_is_infeasible_fast sets them, and they last the request,
    # so a deadline refusal makes a reply that sends nothing say "Tasks won't finish in time"
    # (send_user_messages) and memory, disk or the deadline ends the locality search
    # (work_needed(true))
    insufficient: set[str] = field(default_factory=set)
    # BOINC's hr_reject_temp as the lost results' resend left it: whether the last job it
    # checked for homogeneous redundancy was committed to another class (sched_hr.LastCheck);
    # the send that follows starts from it (not sent to the client)
    hr_other_class: bool = False


# <daily_result_quota>: BOINC's scheduler reads 0 (no quota) when config.xml leaves it out,
# but make_project writes 500 into every new project's config.xml; a project gets 500.
DAILY_RESULT_QUOTA = 500


def real_sleep(file_name: str, *, now: float, seconds: float) -> None:
    """The scheduler's wait in real time: the daemons run meanwhile in their own processes."""
    time.sleep(seconds)


@dataclass(frozen=True)
class LocalityConfig:
    """A caller's locality options (backend.daemons.sched_locality), passed in the scheduler's
    config (``SchedulerConfig.locality_config``); None takes the project's config.xml one
    (``SchedulerConfig``, named in the comments)."""

    sorted_order: bool | None = None  # <locality_scheduling_sorted_order/>
    wait_period: float | None = None  # <locality_scheduling_wait_period>
    delete_files: bool | None = None  # <file_deletion_strategy> 1: delete files left without work
    send_timeout: int | None = None  # <locality_scheduling_send_timeout> (rule 10)
    scan_only_excluded: bool | None = None  # <seed004_scan_only_excluded/> (rule 9)
    delete_only_finished: bool | None = None  # <seed004_delete_only_finished/> (rule 7)
    seed: int = 0  # of the random choices (rules 3, 8 and 10)
    # The caller's alone: ``wait(file_name, now=, seconds=)``, the scheduler's sleep (None:
    # ``real_sleep``; a simulated world waits in its own time by running the on-demand
    # generator and the transitioner), and a stable integer naming the requesting host in
    # the random choices (None: its database id).
    wait: object = None
    host_key: int | None = None

    def resolved(self, config: "SchedulerConfig") -> "LocalityConfig":
        """These options with config.xml's (``config``, a SchedulerConfig) where None."""

        def pick(own: T | None, project: T) -> T:
            return project if own is None else own

        return replace(
            self,
            wait=self.wait or real_sleep,
            sorted_order=pick(self.sorted_order, config.locality_scheduling_sorted_order),
            wait_period=pick(self.wait_period, config.locality_scheduling_wait_period),
            delete_files=pick(self.delete_files, config.file_deletion_strategy == 1),
            send_timeout=pick(self.send_timeout, config.locality_scheduling_send_timeout),
            scan_only_excluded=pick(self.scan_only_excluded, config.seed004_scan_only_excluded),
            delete_only_finished=pick(self.delete_only_finished, config.seed004_delete_only_finished),
        )


@dataclass(frozen=True)
class SchedulerConfig:
    """The project's server options, with BOINC's config.xml names (sched/sched_config.cpp).

    Defaults are BOINC's where a project's config.xml leaves the option out, except where
    docs/server-fidelity.md says otherwise (``one_result_per_user_per_wu`` and
    ``daily_result_quota``, which make_project writes into every new project's config.xml).
    ``backend.server_config.read_config_xml`` builds one from a BOINC config.xml file.
    Options not in BOINC carry the name of the seed or rule they keep.

    Constructing one with a value out of range raises ValueError naming the option.
    """

    report_grace_period: int = 0
    max_wus_to_send: int = 10
    request_delay: float = 0.0
    one_result_per_user_per_wu: bool = True
    send_result_abort: bool = True
    # Jobs per day per host app version and CPU (or GPU); 0 turns the quota off
    # (reference/server.md §3.11, backend.daemons.host_app_version).
    daily_result_quota: int = DAILY_RESULT_QUOTA
    # Resend in-progress jobs a client no longer lists (reference/server.md §3.6).
    resend_lost_results: bool = False
    # GPUs count this many times in the jobs per RPC and the daily quota of GPU versions
    # (sched_send.cpp get_job_limits, sched_version.cpp scaled_max_jobs_per_day); BOINC's 0
    # means a GPU adds no jobs per RPC.
    gpu_multiplier: int = 0
    # Send jobs whatever their deadline (sched_check.cpp check_deadline).
    ignore_delay_bound: bool = False
    # Seed 003's infeasible queue, absent from BOINC's code (reference/server.md §4): off, as
    # in BOINC. On, a result the deadline check turns down is stamped ``infeasible_since`` and
    # after ``infeasible_timeout`` seconds of refusals falls off as OVER/COULDNT_SEND.
    seed003_infeasible_queue: bool = False
    infeasible_timeout: int = 7 * 86400
    # Delete the outputs of NO_REPLY, VALIDATE_ERROR and CLIENT_DETACHED results after
    # assimilation too (BOINC leaves them on disk: transitioner.cpp deletes only CLIENT_ERROR
    # and validated SUCCESS outputs).
    delete_abandoned_outputs: bool = False
    # Where BOINC writes transition_time = now (a report, the validator's IMMEDIATE, the
    # assimilator), write min(transition_time, now), so a workunit already due stays due for
    # a transitioner pass at the same now; off, now is written, as BOINC does.
    keep_due_workunits: bool = True
    # How many unsent results one request looks at: at least shmem_work_items (the size of
    # BOINC's shared-memory job cache, which its scheduler scans whole), and candidate_factor
    # times the jobs it may send.
    shmem_work_items: int = 100
    candidate_factor: int = 4
    # App version choice (backend.daemons.sched_version, sched_version.cpp get_app_version):
    # the standard deviation of the normal random factor each version's projected FLOPS is
    # multiplied by (divided by the host's samples), BOINC's default 1; stop at the first of
    # the client's platforms with a feasible version; estimate runtimes from no statistics;
    # estimate a host's speed from its PFC average rather than its elapsed-time average.
    version_select_random_factor: float = 1.0
    prefer_primary_platform: bool = False
    rte_no_stats: bool = False
    estimate_flops_from_hav_pfc: bool = False
    # The project's plan_class_spec.xml (a path; "" for none: every version with a plan
    # class is then infeasible, as in BOINC without the file and its custom code).
    plan_class_spec: str = ""
    # The validator's credit (backend.daemons.credit): CreditNew unless one of these is set;
    # BOINC's validator command-line options, read from config.xml's validator <cmd>.
    credit_from_wu: bool = False
    credit_from_runtime: bool = False
    no_credit: bool = False
    max_granted_credit: float = 200 * 1000 * 365
    # Credit per app for users and teams (config.xml <credit_by_app>).
    credit_by_app: bool = False
    # Of two results of one host checked together in one workunit, keep only the last one's
    # host app version change, as BOINC's validator does (docs/server-fidelity.md departure
    # 10); off, both changes are applied.
    hav_last_copy_wins: bool = False

    # Homogeneous redundancy (reference/server.md §3.11, backend.daemons.sched_hr): the HR
    # type of every app whose own ``App.homogeneous_redundancy`` is 0 (1 fine, 2 coarse);
    # with ``hr_class_static`` the transitioner never un-commits a workunit's hr_class and
    # app_version.
    homogeneous_redundancy: int = 0
    hr_class_static: bool = False
    # Limits on a host's jobs in progress (sched_config.cpp, backend.daemons.sched_limit):
    # max_wus_in_progress per CPU, max_wus_in_progress_gpu per GPU (0: no limit), and
    # ``job_limits``, the <max_jobs_in_progress> of BOINC's config_aux.xml (a JobLimits, or
    # None), per processor type and app.
    max_wus_in_progress: int = 0
    max_wus_in_progress_gpu: int = 0
    job_limits: "JobLimits | None" = None
    # The least free disk a host keeps, in GB, when its preferences ask for less
    # (sched_send.cpp max_allowable_disk; <default_disk_min_free_gb>, BOINC's default 1).
    default_disk_min_free_gb: float = 1.0
    # Seconds a host must wait after its last request before it is sent work again
    # (handle_request.cpp); 0: no wait.
    min_sendwork_interval: int = 0
    # At most this many reported results are handled per request; the rest are neither
    # handled nor acked (sched_result.cpp); 0: all.
    report_max: int = 0
    # At most this many reported results are read from a request (sched_types.cpp, parsing
    # it); the rest are dropped, neither handled nor acked, and lost results are not resent
    # in that request; 0: all.
    max_results_accepted: int = 0
    # Reliable hosts (backend.daemons.sched_reliable): jobs of priority at least
    # reliable_on_priority go only with app versions the host is reliable for, with the delay
    # bound times reliable_reduced_delay_bound when above 0.01; reliable_max_avg_turnaround
    # (seconds) is part of being reliable; retries made once results are over gain
    # reliable_priority_on_over (or, without errors, reliable_priority_on_over_except_error).
    reliable_on_priority: int = 0
    reliable_max_avg_turnaround: int = 0
    reliable_reduced_delay_bound: float = 0.0
    reliable_priority_on_over: int = 0
    reliable_priority_on_over_except_error: int = 0
    # Locality scheduling (reference/server.md §3.10, backend.daemons.sched_locality): look
    # at the files a host holds in name order rather than at random; seconds to wait for the
    # on-demand work generator when a file has no work; send results older than this many
    # seconds first (0: never); 1: tell a host to delete a held file that gave it no work.
    # The disk a request may fill is at least default_disk_min_free_gb short of the host's
    # free disk.
    locality_scheduling_sorted_order: bool = False
    locality_scheduling_wait_period: int = 0
    locality_scheduling_send_timeout: int = 0
    file_deletion_strategy: int = 0
    # Seed 004's locality rules in place of BOINC's (sched_locality rules 7 and 9): the
    # deterministic scan only when the working-set file is excluded for the volunteer; a held
    # file named for deletion only when no more work can be made for it and none is unsent.
    seed004_scan_only_excluded: bool = False
    seed004_delete_only_finished: bool = False
    # BOINC's locality limits (docs/server-fidelity.md departure 22): the daily quota checked
    # only when the version is chosen, and neither it nor the app's limit of jobs in progress
    # for a workunit committed to a version, as sched_locality.cpp's calls to get_app_version
    # let jobs past them; off, every locality job is held to both.
    boinc_locality_limits: bool = False
    # BOINC's locality deadlines (docs/server-fidelity.md, BOINC defect 2): a locality job
    # gets its workunit's full delay bound whatever its priority, as sched_locality.cpp's
    # swapped arguments to wu_is_infeasible_fast give it; off, a job of priority at least
    # reliable_on_priority gets reliable_reduced_delay_bound as on the ordinary path.
    boinc_locality_full_delay_bound: bool = False
    # BOINC's locality disk accounting (docs/server-fidelity.md, BOINC defect 3): a locality
    # job takes its workunit's whole rsc_disk_bound off the disk the request may fill, as
    # sched_locality.cpp's possibly_send_result does since it passes locality_scheduling
    # false to add_result_to_reply; off, the size of a file the host already has (or that
    # an earlier job of the reply brings) is not counted again (decrement_disk_space_locality).
    boinc_locality_full_disk_bound: bool = False
    # BOINC's reliability of a committed workunit's version (docs/server-fidelity.md, BOINC
    # defect 4): a job that needs a reliable host (priority at least reliable_on_priority)
    # whose workunit is committed to an app version (homogeneous app version) is never sent,
    # as sched_version.cpp's check_homogeneous_app_version leaves its BEST_APP_VERSION's
    # reliable flag false; off, the committed version is reliable when the host's record of
    # it is, as for any other version.
    boinc_committed_never_reliable: bool = False
    # A caller's locality options over the ones above, with the scheduler's wait and the seed
    # of its random choices (a LocalityConfig, or None), never config.xml's: a simulated
    # world waits in its own time and names its hosts by their index.
    locality_config: LocalityConfig | None = None

    def __post_init__(self) -> None:
        check_quota(self.daily_result_quota)
        factor = self.version_select_random_factor
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 0:
            raise ValueError(f"version_select_random_factor must be a number, 0 or more, not {factor!r}")
        from backend.daemons.credit import check_credit_options

        check_credit_options(self)
        from backend.daemons.sched_limit import JobLimits

        if self.job_limits is not None and not isinstance(self.job_limits, JobLimits):
            raise ValueError(f"job_limits must be JobLimits or None, not {self.job_limits!r}")
        if self.locality_config is not None and not isinstance(self.locality_config, LocalityConfig):
            raise ValueError(f"locality_config must be LocalityConfig or None, not {self.locality_config!r}")
        if not (
            isinstance(self.reliable_reduced_delay_bound, (int, float)) and 0 <= self.reliable_reduced_delay_bound <= 1
        ):
            raise ValueError(
                "reliable_reduced_delay_bound must be a fraction from 0 to 1, not "
                f"{self.reliable_reduced_delay_bound!r}"
            )
        minimum = self.default_disk_min_free_gb
        if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) or not 0 <= minimum < float("inf"):
            raise ValueError(f"default_disk_min_free_gb must be a number of GB, 0 or more, not {minimum!r}")
        if self.homogeneous_redundancy not in (0, 1, 2):
            raise ValueError(
                f"homogeneous_redundancy must be 0, 1 (fine) or 2 (coarse), not {self.homogeneous_redundancy!r}"
            )
        for name in (
            "report_grace_period",
            "max_wus_to_send",
            "infeasible_timeout",
            "candidate_factor",
            "gpu_multiplier",
            "shmem_work_items",
            "max_wus_in_progress",
            "max_wus_in_progress_gpu",
            "min_sendwork_interval",
            "report_max",
            "max_results_accepted",
            "reliable_on_priority",
            "reliable_max_avg_turnaround",
            "reliable_priority_on_over",
            "reliable_priority_on_over_except_error",
            "locality_scheduling_wait_period",
            "locality_scheduling_send_timeout",
            "file_deletion_strategy",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number, 0 or more, not {value!r}")
        for name in (
            "resend_lost_results",
            "one_result_per_user_per_wu",
            "send_result_abort",
            "ignore_delay_bound",
            "seed003_infeasible_queue",
            "delete_abandoned_outputs",
            "keep_due_workunits",
            "hav_last_copy_wins",
            "prefer_primary_platform",
            "rte_no_stats",
            "estimate_flops_from_hav_pfc",
            "hr_class_static",
            "locality_scheduling_sorted_order",
            "seed004_scan_only_excluded",
            "seed004_delete_only_finished",
            "boinc_locality_limits",
            "boinc_locality_full_delay_bound",
            "boinc_locality_full_disk_bound",
            "boinc_committed_never_reliable",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, not {getattr(self, name)!r}")


def project_config() -> SchedulerConfig:
    """The project's SchedulerConfig (backend.server_config.project_config: the settings
    BOINC_CONFIG_XML, BOINC_DAILY_RESULT_QUOTA and BOINC_RESEND_LOST_RESULTS)."""
    from backend.server_config import project_config as read

    return read()


class SchedulerRequestError(ValueError):
    """A request the scheduler refuses whole; nothing was changed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
