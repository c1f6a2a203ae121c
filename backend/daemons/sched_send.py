"""The scheduler's sending of work (reference/server.md §3.4) and result aborts (§3.6).

For each resource the client asks work for (GPU types first, then the CPU), the scheduler
looks at unsent results in the feeder's default order (``priority`` descending, then workunit
id: "do retries before new jobs"), of apps the host has a usable app version for, whose
workunit has no error, and, with ``one_result_per_user_per_wu``, never a second result of one
workunit for the same volunteer. Each job is checked as sched_check.cpp wu_is_infeasible_fast
does (``infeasible``): its memory bound against the RAM the host lets BOINC use, its disk
bound against the disk it may still fill, its bandwidth bound against its download speed,
then its deadline, a check a host with nothing queued skips. Jobs are added until the
request (seconds and instances, each job taking its duration stretched by the host's
availability, times the CPUs it uses) is met or the jobs per RPC are reached, and never
beyond an app version's daily quota on this host (§3.11). docs/server-fidelity.md lists each
rule with the BOINC function it follows. Each send counts in the host app version's
``n_jobs_today``, creating the record on the first send (``backend.daemons.host_app_version``).

Sending follows BOINC's code, not the seed (§4): the database stores ``report_deadline = now +
delay_bound + report_grace_period`` and the client is told the deadline without the grace;
the workunit's ``transition_time`` becomes ``min(transition_time, report_deadline)``.
Results are claimed with ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL and written
compare-and-set (``WHERE server_state = UNSENT``), so two scheduler processes never send the
same result. As in BOINC, the result update and the workunit update are two transactions (a
transitioner holding the workunit waits for nothing of ours).

The infeasible queue is seed 003's rule, absent from BOINC's code (§4), and off unless
``seed003_infeasible_queue``: then a result the deadline check turns down is stamped
``infeasible_since``; once every host that looked at it for ``infeasible_timeout`` seconds has
turned it down, it becomes OVER/COULDNT_SEND and its workunit is due for the transitioner,
which sets WU_ERROR_COULDNT_SEND_RESULT.
"""

from __future__ import annotations

import functools
import heapq
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.db.models import Case, Exists, F, Field, OuterRef, Q, When

from backend.daemons import sched_hr, sched_limit, sched_reliable, sched_shmem
from backend.daemons.claim import locked_in_id_order, lower_transition_time, placeholders, read_rows
from backend.daemons.host_app_version import count_sent, jobs_today, scaled_max_jobs_per_day
from backend.daemons.plan_class import GPU_NAMES, GpuRequirements, plan_class_proc_type
from backend.daemons.sched_types import (
    Message,
    ReplyAppVersion,
    ReplyFile,
    ReplyResult,
    ReplyWorkunit,
    SchedulerConfig,
    SchedulerReply,
    SchedulerRequest,
)
from backend.daemons.sched_version import (
    GIGA,
    ask_for_each_job_kind,
    ask_for_job,
    daily_limit_notice,
    has_jobs_for,
    job_version,
)
from backend.events import event, record
from backend.models import (
    App,
    AppVersion,
    AssimilateState,
    ErrorMask,
    File,
    Host,
    HostAppVersion,
    Outcome,
    Result,
    ServerState,
    TransitionerFlags,
    Workunit,
)

if TYPE_CHECKING:
    from backend.daemons.sched_locality import WorkNeeded
    from backend.daemons.sched_version import BestVersions

ACTOR = "scheduler"
CPU = "cpu"


# sched_send.cpp: the host's RAM when the client gives none, and the least fraction of time
# a host is taken to be available (FRAC_MIN, clamp_frac).
DEFAULT_RAM_SIZE = 64e6
KILO = 1024.0  # lib/util.h KILO, MEGA
MEGA = 1024 * KILO
FRAC_MIN = 0.1
# sched_config.cpp MAX_NCPUS: <max_ncpus>'s default, the CPUs counted for jobs per RPC.
MAX_NCPUS = 64
DEFAULT_CONFIG = SchedulerConfig()


@dataclass
class DiskSpace:
    """The disk one request may still fill (sched_send.cpp ``g_wreq->disk_available``): what
    max_allowable_disk allows at the start, less the ``rsc_disk_bound`` of each job added to
    the reply, new or resent. One object is shared by the request's resources."""

    available: float

    def take(self, wu: Workunit) -> None:
        self.available -= wu.rsc_disk_bound


@dataclass
class Resource:
    """What the client asks of one processor type, and how fast this host runs it.

    ``usable_ram`` is the memory a job may use (None: the caller does not model memory);
    ``disk`` the request's DiskSpace (None: the caller does not model disk); ``n_bwdown`` the
    host's measured download speed in bytes/s (0: never measured).
    """

    name: str
    req_secs: float
    req_instances: float
    estimated_delay: float
    flops: float
    available_frac: float
    count: int
    usable_ram: float | None = None
    disk: DiskSpace | None = None
    n_bwdown: float = 0.0


def clamp_frac(frac: float) -> float:
    """An availability fraction the client reports, held to [0.1, 1] (sched_send.cpp
    clamp_frac: "based on client-supplied data, so do sanity checks")."""
    return min(max(frac, FRAC_MIN), 1.0)


def usable_ram(request: SchedulerRequest) -> float | None:
    """reference/server.md §3.4; sched_send.cpp get_mem_sizes: the host's RAM, 64 MB when
    it says 0 or less, times the larger of the preferences' busy and idle RAM fractions
    when both are set (at most 1); None when the request does not model memory
    (``HostInfo.m_nbytes`` None)."""
    ram = request.host_info.m_nbytes
    if ram is None:
        return None
    ram = ram if ram > 0 else DEFAULT_RAM_SIZE
    prefs = request.global_prefs
    busy, idle = prefs.ram_max_used_busy_frac, prefs.ram_max_used_idle_frac
    if busy > 0 and idle > 0:
        ram *= min(max(busy, idle), 1.0)
    return ram


def disk_allowance(request: SchedulerRequest, config: SchedulerConfig) -> tuple[float, str] | None:
    """reference/server.md §3.4; sched_send.cpp max_allowable_disk: ``(bytes, bound)``, the
    disk the request's jobs may still take (negative when the host is already over its
    limits) and which bound set it ("min_free", "max_frac" or "max_used", for locality
    scheduling's notice); None when the request does not model disk (``HostInfo.d_free``
    None).

    The preferences' ``disk_min_free_gb`` is raised to the project's
    ``default_disk_min_free_gb``. A client that says how much BOINC uses
    (``d_boinc_used_total``, not 0) gets the least of: free space less that minimum,
    ``disk_max_used_pct`` of the disk less BOINC's use, and ``disk_max_used_gb`` less BOINC's
    use (each percentage and size only when above 0). Otherwise only the free space less the
    minimum counts. Gigabytes are 2^30 bytes."""
    info, prefs = request.host_info, request.global_prefs
    if info.d_free is None:
        return None
    min_free = max(prefs.disk_min_free_gb, config.default_disk_min_free_gb)
    allowed, which = info.d_free - min_free * GIGA, "min_free"
    used = info.d_boinc_used_total
    if used:
        if prefs.disk_max_used_pct > 0:
            by_pct = (info.d_total or 0.0) * prefs.disk_max_used_pct / 100 - used
            if by_pct < allowed:
                allowed, which = by_pct, "max_frac"
        if prefs.disk_max_used_gb > 0:
            by_size = prefs.disk_max_used_gb * GIGA - used
            if by_size < allowed:
                allowed, which = by_size, "max_used"
    return allowed, which


def max_allowable_disk(request: SchedulerRequest, config: SchedulerConfig) -> float | None:
    """The disk the request's jobs may take (``disk_allowance``), never below 0: a client
    that reports no free disk gets no job that needs any; None when the request does not
    model disk."""
    allowance = disk_allowance(request, config)
    return None if allowance is None else max(allowance[0], 0.0)


@dataclass
class Version:
    """An app version the host can run: the row (None on anonymous platform) and its reply.

    ``limit`` is the version's daily quota on this host and ``room`` how many more jobs of it
    may be sent today (None: no quota applies).
    """

    row: AppVersion | None
    reply: ReplyAppVersion | None
    instances: float
    limit: int | None = None
    room: int | None = None
    # The FLOPS a job's runtime is estimated from (sched_version estimate_flops; 0: job_flops
    # decides), and the chooser of the version for jobs that need another (pinned or 64-bit).
    projected_flops: float = 0.0
    chooser: BestVersions | None = None
    # Stands for no version of the app on this resource (``committed_only_versions``): only
    # jobs whose workunits are committed to a version are looked at, with that version.
    committed_only: bool = False


# A job chosen for the reply: (result, version, runtime).
Chosen = tuple[Result, Version, float]
# ``pick(host, app_ids, limit, config)``: the unsent results a send looks at, in order.
Picker = Callable[[Host, list[int], int, SchedulerConfig], Iterable[Result]]


def requested_resources(
    host: Host, request: SchedulerRequest, config: SchedulerConfig = DEFAULT_CONFIG
) -> list[Resource]:
    """The resources with a work request, GPU types first (``send_work_score_type`` order).

    sched_send.cpp send_work: a request is per resource only when some resource asks for
    seconds (``rsc_spec_request``); then a resource needs work if it asks for seconds or
    instances. Instances alone ask for nothing."""
    resources = host_resources(host, request, config)
    if not any(r.req_secs for r in resources):
        return []
    return [r for r in resources if r.req_secs > 0 or r.req_instances > 0]


def host_resources(host: Host, request: SchedulerRequest, config: SchedulerConfig = DEFAULT_CONFIG) -> list[Resource]:
    """Every processor type of the host, GPU types first, with what the client asks of each;
    all share one DiskSpace (send_work_setup: ``disk_available = max_allowable_disk()``)."""
    stats = request.time_stats
    ram = usable_ram(request)
    allowed = max_allowable_disk(request, config)
    disk = None if allowed is None else DiskSpace(allowed)
    bwdown = request.host_info.n_bwdown
    found = []
    for gpu in request.gpu_requests:
        if gpu.count > 0:
            found.append(
                Resource(
                    gpu.type,
                    gpu.req_secs,
                    gpu.req_instances,
                    gpu.estimated_delay,
                    gpu.peak_flops,
                    clamp_frac(stats.on_frac * stats.gpu_active_frac),
                    gpu.count,
                    ram,
                    disk,
                    bwdown,
                )
            )
    cpu_secs = request.cpu_req_secs
    if not cpu_secs and not request.cpu_req_instances and not request.gpu_requests:
        cpu_secs = request.work_req_seconds  # clients before per-resource requests
    found.append(
        Resource(
            CPU,
            cpu_secs,
            request.cpu_req_instances,
            request.estimated_delay,
            host.p_fpops,
            clamp_frac(stats.on_frac * stats.active_frac),
            host.p_ncpus,
            ram,
            disk,
            bwdown,
        )
    )
    return found


def usable_versions(
    request: SchedulerRequest,
    resource: Resource,
    host: Host | None = None,
    *,
    config: SchedulerConfig,
    havs: dict[int, HostAppVersion] | None = None,
    now: int = 0,
    notices: list[str] | None = None,
    spent: set[int] | None = None,
    gpu_requirements: dict[str, GpuRequirements] | None = None,
) -> dict[int, Version]:
    """app id -> the Version of that app the host runs on ``resource``: with ``host``, the
    fastest (backend.daemons.sched_version, get_app_version); without, the newest.
    ``gpu_requirements``: see sched_version.best_versions.

    On the anonymous platform, the versions the client lists. Otherwise the project's
    versions for the client's platforms; for a real client (one that reports its
    ``core_client_version``) only versions that have executables to download, so a client
    is never sent an app version it could not run (reference/protocol.md §7).
    """
    gpu_type = "" if resource.name == CPU else resource.name
    found = {}
    if request.platform_name == "anonymous":
        apps = {app.name: app for app in sched_shmem.apps().values() if not app.deprecated}
        for v in sorted(request.app_versions, key=lambda v: -v.version_num):
            app = apps.get(v.app_name)
            if app is None or app.pk in found or (v.gpu_type or "") != gpu_type:
                continue
            reply = ReplyAppVersion(
                v.app_name,
                v.version_num,
                v.platform or "anonymous",
                v.plan_class,
                v.avg_ncpus,
                v.flops,
                v.gpu_type,
                v.gpu_usage,
            )
            found[app.pk] = Version(None, reply, v.gpu_usage if gpu_type else v.avg_ncpus)
        return found
    if host is not None:
        from backend.daemons.sched_version import best_versions

        return best_versions(
            host,
            request,
            resource,
            config=config,
            havs=havs,
            now=now,
            make=Version,
            notices=notices,
            spent=spent,
            gpu_requirements=gpu_requirements,
        )
    platforms = [request.platform_name, *request.alt_platforms]
    rows = (
        AppVersion.objects.filter(deprecated=False, app__deprecated=False, platform__in=platforms, gpu_type=gpu_type)
        .select_related("app")
        .order_by("-version_num", "id")
    )
    if request.core_client_version:
        # A real client (it says its version) runs what it downloads: only app versions with
        # a main program (protocol.models.AppVersionFile). Simulated hosts run nothing.
        rows = rows.filter(files__main_program=True).distinct()
    for row in rows:
        if row.app_id in found:
            continue
        reply = ReplyAppVersion.of_row(row)
        found[row.app_id] = Version(row, reply, row.gpu_usage if gpu_type else row.avg_ncpus)
    return found


def below_app_limits(
    versions: dict[int, Version], resource: Resource, in_progress: sched_limit.InProgress | None
) -> dict[int, Version]:
    """``versions`` without the apps at their jobs-in-progress limit on ``resource``
    (sched_limit.InProgress.app_exceeded; reference/server.md §3.4 "Limits").

    get_app_version skips a version whose app is at its ``max_jobs_in_progress`` limit for
    the version's processor type and takes the app's next best; each pass of
    send_work_score_type chooses among one processor type's versions only, so an app at its
    limit for this type has no version in this pass, and its jobs wait for the pass of
    another type, where its version for that type is chosen (GPU types first, then the
    CPU). Its jobs are then never checked, and give no memory, disk or bandwidth notice."""
    if in_progress is None or not versions or not in_progress.active():
        return versions
    apps = sched_shmem.apps()
    return {
        app_id: v for app_id, v in versions.items() if not in_progress.app_exceeded(apps[app_id].name, resource.name)
    }


def committed_only_versions(
    host: Host,
    request: SchedulerRequest,
    resource: Resource,
    versions: Collection[int],
    *,
    config: SchedulerConfig,
    havs: dict[int, HostAppVersion],
    now: int,
    spent: set[int] | None = None,
    every_app: bool = False,
    gpu_requirements: dict[str, GpuRequirements] | None = None,
) -> dict[int, Version]:
    """app id -> a Version standing for none, for each homogeneous-app-version app (with
    ``every_app``, each app) the host has no version of on ``resource`` (``versions``: the
    ones it has; reference/server.md §3.11). Such an app's jobs
    whose workunits are committed to a version still go with that one: get_app_version
    looks at the commitment (check_homogeneous_app_version, which takes the committed
    version even when the feeder no longer holds it) before it looks for a version of its
    own. Its other jobs get none. Never for the anonymous platform, which gets no
    homogeneous-app-version work.

    With ``every_app`` (a locality app that has no version on any resource), the stand-in's
    chooser holds the project's versions for the client's platforms, so that a job the
    locality pass looks at asks for its version (``ask_for_job``), and the GPU plan classes
    that choice checks go to ``gpu_requirements``, as get_app_version checks every version's
    plan class before it finds none."""
    if request.platform_name == "anonymous":
        return {}
    apps = [
        app_id
        for app_id, app in sched_shmem.apps().items()
        if not app.deprecated and (every_app or app.homogeneous_app_version) and app_id not in versions
    ]
    if not apps:
        return {}
    from backend.daemons.sched_version import BestVersions, feeder_versions

    rows: dict[int, dict[str, list[AppVersion]]] = {}
    if every_app:
        rows = feeder_versions(
            None, [request.platform_name, *request.alt_platforms], real_client=bool(request.core_client_version)
        )
    # a chooser of no versions of its own (but a locality app's job's), for the committed
    # versions' plan classes
    chooser = BestVersions(host, request, resource, config=config, havs=havs, now=now, rows=rows)
    chooser.make, chooser.variants, chooser.gpu_requirements = Version, {}, gpu_requirements
    if spent is not None:
        chooser.spent = spent
    return {app_id: Version(None, None, 0.0, chooser=chooser, committed_only=True) for app_id in apps}


def job_flops(resource: Resource, version: Version) -> float:
    """The FLOPS a job of ``version`` gets on this host's ``resource``."""
    if version.projected_flops > 0:
        return version.projected_flops
    if resource.name == CPU:
        return resource.flops * max(version.instances, 1e-3)
    if resource.flops > 0:
        return resource.flops * max(version.instances, 1e-3)
    assert version.reply is not None  # only committed_only stand-ins have none, and no job goes with one
    return version.reply.flops


# The columns a send reads: the job's own and its workunit's (for the runtime, the deadline and
# the reply). Loading only these keeps a request's candidates cheap to build.
RESULT_COLUMNS = (
    "id",
    "name",
    "random",
    "project_id",
    "app_id",
    "workunit_id",
    "priority",
    "infeasible_since",
    "server_state",
)
WORKUNIT_COLUMNS = (
    "id",
    "name",
    "rsc_fpops_est",
    "rsc_fpops_bound",
    "rsc_memory_bound",
    "rsc_disk_bound",
    "rsc_bandwidth_bound",
    "delay_bound",
    "app_version_num",
    "hr_class",
    "app_version_id",
)
# The same columns as ``only`` names them on a query of results with their workunits.
ONLY_COLUMNS = (*RESULT_COLUMNS, *(f"workunit__{name}" for name in WORKUNIT_COLUMNS))
FIRST_CHUNK = 8


@functools.cache
def field_order(model: type[Result] | type[Workunit], names: tuple[str, ...]) -> tuple[Field[Any, Any], ...]:
    """The fields ``names`` in the model's order: the order ``from_db`` takes values in."""
    return tuple(f for f in model._meta.concrete_fields if f.attname in names)


@functools.cache
def candidate_sql(n_apps: int, hr: bool, one_per_user: bool, after: bool, lock: bool) -> str:
    """The candidate query, written once per shape (it runs on every request, and building it
    through the ORM each time costs more than running it). Parameters, in order: the host's
    project, the app ids,
    UNSENT, the ORDINARY transitioner flag, the host's owner (``one_per_user``), then (``after``)
    the last row's score, workunit id and id, and the row limit.

    Rows come in the feeder's order: by score (``priority``, plus 1 for a workunit committed
    to an HR class where an app uses HR, as sched_score.cpp puts committed jobs first), then
    (with HR) ``priority``, as BOINC's sort of a few jobs keeps the feeder's slots
    (``--priority_order``) among equal scores, then workunit id, then id; without HR the
    order is the partial index res_unsent_order's."""
    q = connection.ops.quote_name
    r, w = q(Result._meta.db_table), q(Workunit._meta.db_table)
    columns = [f"{r}.{q(f.column)}" for f in field_order(Result, RESULT_COLUMNS)]
    columns += [f"{w}.{q(f.column)}" for f in field_order(Workunit, WORKUNIT_COLUMNS)]
    score = f"({r}.priority + CASE WHEN {w}.hr_class > 0 THEN 1 ELSE 0 END)" if hr else f"{r}.priority"
    where = [
        f"{r}.project_id = %s",
        f"{r}.app_id IN ({placeholders(n_apps)})",
        f"{r}.server_state = %s",
        f"{w}.error_mask = 0",
        f"{w}.transitioner_flags = %s",
    ]
    if one_per_user:  # sched_check.cpp: one result of a workunit per volunteer
        where.append(f"NOT EXISTS (SELECT 1 FROM {r} u0 WHERE u0.user_id = %s AND u0.workunit_id = {r}.workunit_id)")
    if after and hr:  # keyset: strictly after the last row read, in the same order
        p = f"{r}.priority"
        where.append(
            f"({score} < %s OR ({score} = %s AND {p} < %s) OR ({score} = %s AND {p} = %s AND {r}.workunit_id > %s)"
            f" OR ({score} = %s AND {p} = %s AND {r}.workunit_id = %s AND {r}.id > %s))"
        )
    elif after:
        where.append(
            f"({score} < %s OR ({score} = %s AND {r}.workunit_id > %s)"
            f" OR ({score} = %s AND {r}.workunit_id = %s AND {r}.id > %s))"
        )
    tie = f"{r}.priority DESC, " if hr else ""
    sql = (
        f"SELECT {', '.join(columns)} FROM {r} INNER JOIN {w} ON {r}.workunit_id = {w}.id"
        f" WHERE {' AND '.join(where)} ORDER BY {score} DESC, {tie}{r}.workunit_id ASC, {r}.id ASC LIMIT %s"
    )
    return sql + f" FOR UPDATE OF {r} SKIP LOCKED" if lock else sql


def candidates(host: Host, app_ids: Sequence[int], limit: int, config: SchedulerConfig) -> Iterator[Result]:
    """Unsent results to consider, in the feeder's order (``candidate_sql``), locked where the
    database can (FOR UPDATE SKIP LOCKED: a job another request holds is passed over).

    A generator: rows are read in chunks that double in size (8, 16, ...) up to ``limit``,
    each chunk after the last one read in the order, so a request that is satisfied by its
    first jobs reads and locks only those. Each result comes with its workunit's columns
    (``RESULT_COLUMNS``, ``WORKUNIT_COLUMNS``) and the rest deferred, as ``only`` would.
    """
    if not app_ids:
        return
    hr = sched_hr.uses_hr(app_ids, config)
    one_per_user = config.one_result_per_user_per_wu
    lock = connection.features.has_select_for_update_skip_locked
    base: list[Any] = [host.project_id, *app_ids, ServerState.UNSENT, TransitionerFlags.ORDINARY]
    if one_per_user:
        base.append(host.owner_id)
    result_columns = tuple(f.attname for f in field_order(Result, RESULT_COLUMNS))
    workunit_columns = tuple(f.attname for f in field_order(Workunit, WORKUNIT_COLUMNS))
    n, pk, priority = len(result_columns), result_columns.index("id"), result_columns.index("priority")
    workunit_id, hr_class = result_columns.index("workunit_id"), n + workunit_columns.index("hr_class")
    workunit = Result._meta.get_field("workunit")
    read, chunk = 0, FIRST_CHUNK
    keyset: tuple[Any, ...] | None = None
    while read < limit:
        size = min(chunk, limit - read)
        with connection.cursor() as cursor:
            cursor.execute(
                candidate_sql(len(app_ids), hr, one_per_user, keyset is not None, lock), [*base, *(keyset or ()), size]
            )
            rows = cursor.fetchall()
        for row in rows:
            result = Result.from_db(connection.alias, result_columns, row[:n])
            workunit.set_cached_value(result, Workunit.from_db(connection.alias, workunit_columns, row[n:]))
            yield result
        read += len(rows)
        if len(rows) < size:
            return
        last = rows[-1]
        score = last[priority] + (hr and last[hr_class] > 0)
        if hr:
            p, wu = last[priority], last[workunit_id]
            keyset = (score, score, p, score, p, wu, score, p, wu, last[pk])
        else:
            keyset = (score, score, last[workunit_id], score, last[workunit_id], last[pk])
        chunk *= 2


def with_dropped_jobs(
    jobs: Iterable[Result], host: Host, app_ids: Sequence[int], limit: int, config: SchedulerConfig
) -> tuple[Iterator[Result], set[int]]:
    """``jobs`` (``candidates``' results) merged, in the same order, with the unsent results
    the one-result-per-user rule keeps from the volunteer, and the ids of those. BOINC's
    scan checks each job's homogeneous redundancy class (wu_is_infeasible_fast) before
    slow_check applies that rule, and "Tasks are committed to other platforms" follows the
    last class checked (sched_hr.LastCheck), so these jobs are looked at for that alone;
    they are read without a lock, as nothing is sent from them. Jobs of equal score come in
    workunit and id order, where BOINC's order among them is its unstable sort's. Called
    only where an app uses homogeneous redundancy, so a committed workunit scores one more."""
    rows = list(
        Result.objects.filter(
            project_id=host.project_id,
            app_id__in=app_ids,
            server_state=ServerState.UNSENT,
            workunit__error_mask=0,
            workunit__transitioner_flags=TransitionerFlags.ORDINARY,
        )
        .filter(Exists(Result.objects.filter(user_id=host.owner_id, workunit_id=OuterRef("workunit_id"))))
        .select_related("workunit")
        .annotate(score=F("priority") + Case(When(workunit__hr_class__gt=0, then=1), default=0))
        .order_by("-score", "-priority", "workunit_id", "id")[:limit]
    )

    def order(result: Result) -> tuple[int, int, int, int]:
        score = result.priority + (1 if result.workunit.hr_class > 0 else 0)
        return (-score, -result.priority, result.workunit_id, result.pk)

    return heapq.merge(jobs, rows, key=order), {r.pk for r in rows}


def send_work(
    host: Host,
    request: SchedulerRequest,
    *,
    now: int,
    config: SchedulerConfig,
    reply: SchedulerReply,
    notices: list[str] | None = None,
) -> int:
    """Send jobs for each requested resource; fill ``reply.results``; return how many.

    ``notices``: the request's no-work messages so far (the lost-result resend's, which
    BOINC also gives when this sends nothing)."""
    resources = requested_resources(host, request, config)
    if not resources:
        return 0
    host_class = sched_hr.HostClass(host, request)
    if sched_hr.unknown_platform(host_class, config):
        return 0  # BOINC returns before explaining: its hr_reject_perm message is never sent
    in_progress = sched_limit.jobs_in_progress(host, request, config)
    resources = [r for r in resources if not in_progress.project_exceeded(r.name)]
    if not resources:
        reply.messages.append(Message("No tasks sent", "low"))
        reply.messages.extend(Message(text, "notice") for text in notices or ())
        reply.messages.append(Message("This computer has reached a limit on tasks in progress", "low"))
        return 0
    max_jobs = max_jobs_per_rpc(host, request, config)
    havs = {hav.app_version_id: hav for hav in read_rows(HostAppVersion, "t.host_id = %s", [host.pk])}
    reliability = sched_reliable.Reliability(host, request, havs, config)
    taken_wus: set[int] = set()
    sent: list[Chosen] = []
    limited = []
    refusals: set[str] = set()
    notices = [] if notices is None else notices
    looked_at: dict[int, tuple[Version, Resource]] = {}
    apps = sched_shmem.apps()
    over_quota: set[int] = set()  # the app versions a job found over their daily quota
    hr_last = sched_hr.LastCheck()
    hr_last.other_class = reply.hr_other_class  # as the lost results' resend left it
    # the GPU plan classes' requirements, for the volunteer whose GPU falls short (BOINC
    # tells no anonymous-platform client, and notes them only for a GPU the host has)
    gpu_requirements: dict[str, GpuRequirements] | None = None
    if request.platform_name != "anonymous" and any(gpu.count > 0 for gpu in request.gpu_requests):
        gpu_requirements = {}
    with_version: set[int] = set()  # the apps with a version on some resource so far
    for resource in resources:
        versions = usable_versions(
            request,
            resource,
            host,
            config=config,
            havs=havs,
            now=now,
            notices=notices,
            spent=over_quota,
            gpu_requirements=gpu_requirements,
        )
        limited.extend(
            apply_daily_quota(
                versions, havs, resource, now=now, quota=config.daily_result_quota, gpu_multiplier=config.gpu_multiplier
            )
        )
        # an app whose version is at its daily quota still sends its committed workunits
        # with their own versions: get_app_version looks at the commitment first
        # (check_homogeneous_app_version), and send_work_score_type then checks that version's
        # quota (a locality app at its quota keeps its version: see ``spent`` below)
        within_quota = {
            app_id
            for app_id, v in versions.items()
            if v.room is None or v.room > 0 or (v.row is not None and v.row.app.locality_scheduling)
        }
        committed_only = committed_only_versions(
            host, request, resource, within_quota, config=config, havs=havs, now=now, spent=over_quota
        )
        versions = below_app_limits(versions, resource, in_progress)
        committed_only = below_app_limits(committed_only, resource, in_progress)
        # (locality scheduling has no job cache scanned whole: only the jobs it looks at speak)
        looked_at.update(
            (app_id, (v, resource))
            for app_id, v in versions.items()
            if v.row is None or not v.row.app.locality_scheduling
        )
        # a locality app at its daily quota is still looked at: its held files may be named
        # for deletion before its first job finds no version and ends the search
        # (sched_locality.cpp possibly_send_result, ERR_NO_APP_VERSION)
        spent = {
            app_id: v
            for app_id, v in versions.items()
            if v.room is not None and v.room <= 0 and v.row is not None and v.row.app.locality_scheduling
        }
        versions = {app_id: v for app_id, v in versions.items() if v.room is None or v.room > 0}
        versions.update(committed_only)
        for app_id, v in committed_only.items():
            if not apps[app_id].locality_scheduling:
                looked_at.setdefault(app_id, (v, resource))
        for app_id, v in spent.items():
            versions.setdefault(app_id, v)
        with_version.update(app_id for app_id, v in versions.items() if not v.committed_only)
        if resource is resources[-1]:
            # a locality app with no version on any resource still has its locality pass:
            # its held files are looked at (and may be named for deletion) before its first
            # job finds no version and ends the search (sched_locality.cpp
            # possibly_send_result, ERR_NO_APP_VERSION)
            for app_id, v in committed_only_versions(
                host,
                request,
                resource,
                with_version | set(versions),
                config=config,
                havs=havs,
                now=now,
                spent=over_quota,
                every_app=True,
                gpu_requirements=gpu_requirements,
            ).items():
                if apps[app_id].locality_scheduling:
                    versions.setdefault(app_id, v)
        if not versions or len(sent) >= max_jobs:
            continue
        # under locality scheduling only send_work_locality runs (sched_send.cpp send_work):
        # a locality app's jobs never go by the ordinary scan, not even when the host has
        # no version of its own and only its committed workunits are left (committed_only)
        by_locality = {app_id: v for app_id, v in versions.items() if apps[app_id].locality_scheduling}
        if by_locality:
            # Locality scheduling (§3.10) sends these apps' jobs (sched_locality, which sends
            # through this module's send_for_resource, so it is imported here)
            from backend.daemons.sched_locality import send_work_by_locality

            local, resource = send_work_by_locality(
                host,
                request,
                resource,
                by_locality,
                now=now,
                config=config,
                max_jobs=max_jobs - len(sent),
                taken_wus=taken_wus,
                reply=reply,
                notices=notices,
                in_progress=in_progress,
                refusals=refusals,
                hr_last=hr_last,
            )
            sent.extend(local)
            versions = {app_id: v for app_id, v in versions.items() if app_id not in by_locality}
            if not versions or len(sent) >= max_jobs:
                continue
        sent.extend(
            send_for_resource(
                host,
                resource,
                versions,
                now=now,
                config=config,
                max_jobs=max_jobs - len(sent),
                taken_wus=taken_wus,
                notices=notices,
                request=request,
                host_class=host_class,
                in_progress=in_progress,
                reliability=reliability,
                refusals=refusals,
                hr_last=hr_last,
            )
        )
    if sent:
        lower_transition_times(sent)
        reply.results.extend(reply_results(sent, now=now, config=config))
    for v in limited:
        text = daily_limit_notice(v.limit)
        assert v.room is not None  # apply_daily_quota set it
        if v.room <= 0 and has_jobs_for(v):
            assert v.row is not None  # apply_daily_quota limits rows only
            if v.row.app.locality_scheduling:
                # locality scheduling asks get_app_version only for the jobs it looks at,
                # whose choices tell of their versions over quota (sched_version.job_version)
                continue
            add_notice(notices, text)  # sched_version.cpp daily_quota_exceeded
            over_quota.add(v.row.pk)
    if not sent:
        # BOINC's scan asks get_app_version for every job of its cache, those the
        # one-result-per-user rule drops later included: the versions it looked at over
        # their daily quota for each kind of job are told of, though another version was
        # taken
        for app_id, (v, _) in looked_at.items():
            if v.chooser is not None and not v.committed_only:
                ask_for_each_job_kind(v.chooser, app_id)
    if gpu_requirements:
        reply.messages.extend(gpu_messages(request, gpu_requirements))
    if not sent and (request.work_req_seconds > 0 or request.cpu_req_secs > 0):
        # sched_send.cpp send_user_messages: "No tasks sent", then why
        # (WORK_REQ::add_no_work_message, kept only when nothing was sent), when the request
        # has work_req_seconds, which BOINC's client sets to its CPU request (a simulated
        # host's request says cpu_req_secs only).
        reply.messages.append(Message("No tasks sent", "low"))
        lacking_notices(
            looked_at,
            notices,
            host_class=host_class,
            config=config,
            reliability=reliability,
            request=request,
            refusals=refusals,
        )
        reply.messages.extend(Message(text, "notice") for text in notices)
        if DEADLINE in refusals or DEADLINE in reply.insufficient:
            reply.messages.append(Message(too_slow_message(request), "low"))
        if hr_last.other_class:
            reply.messages.append(Message("Tasks are committed to other platforms", "low"))
        if over_quota:
            # send_user_messages: quota_exceeded_version, the first of the host's records
            # (by app version id) found over its quota, with its own max_jobs_per_day
            hav = havs.get(min(over_quota))
            if hav is not None:
                reply.messages.append(
                    Message(f"This computer has finished a daily quota of {hav.max_jobs_per_day} tasks", "low")
                )
        if any(in_progress.project_exceeded(kind) for kind in have_apps(request)):
            # work_needed flags each processor type the project has apps for that is at its
            # limit (max_jobs_on_host_proc_type_exceeded), asked for or not, though another
            # type goes on
            reply.messages.append(Message("This computer has reached a limit on tasks in progress", "low"))
    return len(sent)


def gpu_messages(request: SchedulerRequest, requirements: Mapping[str, GpuRequirements]) -> list[Message]:
    """What each of the host's GPUs lacks for the project's GPU plan classes checked in this
    request (sched_send.cpp send_gpu_messages, send_gpu_property_messages), for a GPU type
    the project has versions for (by plan class name, sched_shmem.cpp
    have_apps_for_proc_type); given whether jobs were sent or not."""
    from backend.daemons.sched_version import core_client_version

    client = core_client_version(request.core_client_version)
    have_apps = project_proc_types()
    messages = []
    for gpu_type in GPU_NAMES:
        gpu = next((g for g in request.gpu_requests if g.type == gpu_type and g.count > 0), None)
        if gpu is None or gpu_type not in have_apps:
            continue
        # BOINC reads no driver version of Intel and Apple GPUs
        version = gpu.driver_version if gpu_type in ("NVIDIA", "ATI") else 0
        found = requirements.get(gpu_type, GpuRequirements())
        messages += [
            Message(text, priority)
            for text, priority in found.messages(GPU_NAMES[gpu_type], gpu.gpu_ram, version, client)
        ]
    return messages


def project_proc_types() -> set[str]:
    """The processor types ("cpu", GpuType values) the project has app versions for, by plan
    class name (the feeder's versions: of apps and versions not deprecated, any platform;
    sched_shmem.cpp have_apps_for_proc_type)."""

    def read() -> set[str]:
        rows = AppVersion.objects.filter(deprecated=False, app__deprecated=False)
        project_id = sched_shmem.project_id()
        if project_id is not None:
            rows = rows.filter(project_id=project_id)
        return {plan_class_proc_type(name) for name in rows.values_list("plan_class", flat=True).distinct()}

    return sched_shmem.kept(("project_proc_types",), read)


def have_apps(request: SchedulerRequest) -> set[str]:
    """The processor types the request may get jobs for: those of the versions an
    anonymous-platform client lists, else the project's (sched_send.cpp have_apps)."""
    if request.platform_name == "anonymous":
        return {v.gpu_type or CPU for v in request.app_versions}
    return project_proc_types()


def too_slow_message(request: SchedulerRequest) -> str:
    """reference/server.md §3.4; sched_send.cpp send_user_messages, when a job was refused
    for its deadline (``speed.insufficient``): how much of the time the host computes, in
    the words for clients after 4.19 (core client version 41900) or before."""
    from backend.daemons.sched_version import core_client_version

    stats = request.time_stats
    if core_client_version(request.core_client_version) > 41900:
        return (
            f"Tasks won't finish in time: BOINC runs {100 * stats.on_frac:.1f}% of the "
            f"time; computation is enabled {100 * stats.active_frac:.1f}% of that"
        )
    return f"Tasks won't finish in time: Computer available {100 * stats.on_frac:.1f}% of the time"


def max_jobs_per_rpc(host: Host, request: SchedulerRequest, config: SchedulerConfig) -> int:
    """sched_send.cpp get_job_limits: ``max_wus_to_send`` × (CPUs, at most ``MAX_NCPUS``,
    + ``gpu_multiplier`` × GPUs); ``max_wus_to_send`` 0 means no limit."""
    if not config.max_wus_to_send:
        return 999999
    ncpus = min(max(host.p_ncpus, 1), MAX_NCPUS)
    ngpus = sum(gpu.count for gpu in request.gpu_requests if gpu.count > 0)
    return config.max_wus_to_send * (ncpus + config.gpu_multiplier * ngpus)


def apply_daily_quota(
    versions: Mapping[int, Version],
    havs: Mapping[int, HostAppVersion],
    resource: Resource,
    *,
    now: int,
    quota: int,
    gpu_multiplier: int,
) -> list[Version]:
    """Set each version's daily ``limit`` and ``room`` (backend.daemons.host_app_version);
    return the versions with a quota. A version not yet sent to the host has the full quota."""
    if not quota:
        return []
    limited = []
    for v in versions.values():
        if v.row is None:  # anonymous platform: no app version row, no quota
            continue
        hav = havs.get(v.row.pk)
        if hav is None:
            continue  # sched_version.cpp daily_quota_exceeded: no record, no limit yet
        v.limit = scaled_max_jobs_per_day(
            hav, resource.count, gpu_multiplier=0 if resource.name == CPU else gpu_multiplier
        )
        v.room = v.limit - jobs_today(hav, now)
        limited.append(v)
    return limited


def send_for_resource(
    host: Host,
    resource: Resource,
    versions: dict[int, Version],
    *,
    now: int,
    config: SchedulerConfig,
    max_jobs: int,
    taken_wus: set[int],
    pick: Picker = candidates,
    notices: list[str] | None = None,
    request: SchedulerRequest | None = None,
    host_class: sched_hr.HostClass | None = None,
    in_progress: sched_limit.InProgress | None = None,
    reliability: sched_reliable.Reliability | None = None,
    refusals: set[str] | None = None,
    work_needed: WorkNeeded | None = None,
    hr_last: sched_hr.LastCheck | None = None,
) -> list[Chosen]:
    """Claim and mark sent the jobs for one resource; returns (result, version, runtime).

    ``pick(host, app_ids, limit, config)`` lists the unsent results to consider, in order
    (``candidates``, or locality scheduling's results for one file). Each job is checked as
    sched_check.cpp wu_is_infeasible_fast does (``infeasible``); each one sent lowers the
    request and raises the estimated delay as add_result_to_reply does (``after_sending``).
    A job refused for memory, disk or bandwidth adds BOINC's message to ``notices`` (a list,
    when given), once; every reason a job was refused for goes to ``refusals`` (a set, when
    given).
    With ``host_class`` (sched_hr.HostClass) and ``request``, homogeneous redundancy and
    homogeneous app version apply (backend.daemons.sched_hr); with ``in_progress``
    (sched_limit.InProgress), the limits on jobs in progress (backend.daemons.sched_limit);
    with ``reliability`` (sched_reliable.Reliability), jobs that need a reliable host and
    their shortened deadlines (backend.daemons.sched_reliable); with ``work_needed``
    (sched_locality.WorkNeeded), locality scheduling's disk accounting and its end at the
    first job refused for memory, disk or its deadline; with ``hr_last``
    (sched_hr.LastCheck), each check of a job's homogeneous redundancy class is recorded.
    The limits on jobs in progress and the daily quota are checked before homogeneous
    redundancy, as sched_score.cpp send_work_score_type checks them before
    wu_is_infeasible_fast.
    """
    chosen: list[Chosen] = []
    refused = []
    apps = sched_hr.apps_of(versions)
    # BOINC's locality limits (config.boinc_locality_limits): get_app_version's memoized
    # choice is not held to the daily quota again, and its committed versions to neither the
    # quota nor the app's limit of jobs in progress
    leaky = work_needed is not None and config.boinc_locality_limits
    committed_versions: dict[int | str, Any] = {}  # sched_hr's cache: versions by id, and "capped"
    with transaction.atomic():
        looked_at = max(max_jobs * config.candidate_factor, config.shmem_work_items)
        version: Version | None  # job_version and sched_hr.version_for may find none
        jobs: Iterable[Result] = pick(host, list(versions), looked_at, config)
        dropped: set[int] = set()
        if (
            pick is candidates
            and hr_last is not None
            and host_class is not None
            and config.one_result_per_user_per_wu
            and sched_hr.uses_hr(list(versions), config)
        ):
            jobs, dropped = with_dropped_jobs(jobs, host, list(versions), looked_at, config)
        for result in jobs:
            if len(chosen) >= max_jobs or (resource.req_secs <= 0 and resource.req_instances <= 0):
                break
            if config.one_result_per_user_per_wu and result.workunit_id in taken_wus:
                continue  # sched_check.cpp wu_already_in_reply
            version = versions[result.app_id]
            committed = bool(
                host_class is not None
                and apps[result.app_id].homogeneous_app_version
                and result.workunit.app_version_id
            )
            if not committed:
                # get_app_version: a workunit committed to an app version (homogeneous app
                # version) goes with that one, whatever version number it is pinned to
                if version.committed_only:
                    # get_app_version finds no version for an uncommitted job
                    if work_needed is not None:
                        if version.chooser is not None:
                            ask_for_job(version.chooser, result.app_id, result.workunit)
                        if work_needed.stops(NO_VERSION):
                            break
                    continue
                version = job_version(version, result.workunit)
                if version is None:  # no version for this job (sched_version.job_version)
                    if work_needed is not None and work_needed.stops(NO_VERSION):
                        break
                    continue
            if host_class is not None:
                assert request is not None  # given with host_class (above)
                version = sched_hr.version_for(
                    result.workunit, apps[result.app_id], version, request, resource, committed_versions
                )
                if version is None:
                    if work_needed is not None and work_needed.stops(NO_VERSION):
                        break
                    continue
            if reliability is not None and reliability.refuses(result.priority, version, committed):
                continue  # JOB::get_score leaves the job out of the scan before any check
            unlimited = leaky and committed  # check_homogeneous_app_version checks no limit
            if in_progress is not None:
                if in_progress.project_exceeded(resource.name):
                    break
                if not unlimited and in_progress.app_exceeded(apps[result.app_id].name, resource.name):
                    # get_app_version: the app's versions are at their limit
                    if work_needed is not None and work_needed.stops(NO_VERSION):
                        break
                    continue
            if not unlimited and version.room is not None and version.room <= 0:
                if work_needed is not None:
                    # get_app_version: no version within the daily quota
                    if work_needed.stops(NO_VERSION):
                        break
                    continue
                # sched_score.cpp send_work_score_type: daily_quota_exceeded(job's version)
                # names the limit and ends the processor type's pass (a version reaches its
                # quota while sending, or a committed one was over it from the start)
                if notices is not None:
                    add_notice(notices, daily_limit_notice(version.limit))
                if version.chooser is not None and version.row is not None:
                    version.chooser.spent.add(version.row.pk)
                break
            if host_class is not None:
                # after the limits and the daily quota, as sched_score.cpp send_work_score_type
                # checks them before wu_is_infeasible_fast
                if hr_last is not None:
                    hr_last.check(result.workunit, apps[result.app_id], host_class, config)
                if sched_hr.infeasible(result.workunit, apps[result.app_id], version, host_class, config):
                    continue
            if result.pk in dropped:
                continue  # looked at for its class only (with_dropped_jobs)
            flops = None
            if host_class is not None:
                assert request is not None  # given with host_class (above)
                flops = sched_hr.committed_flops(
                    result.workunit, apps[result.app_id], version, request, committed_versions
                )
            runtime = result.workunit.rsc_fpops_est / (flops or job_flops(resource, version))
            priority = result.priority
            if work_needed is not None and config.boinc_locality_full_delay_bound:
                # sched_locality.cpp possibly_send_result passes the unsent result's report
                # deadline (0) for its priority (docs/server-fidelity.md, BOINC defect 2)
                priority = 0
            for bound in sched_reliable.delay_bounds(
                result.workunit, priority, runtime / resource.available_frac, config
            ):
                result.workunit.delay_bound = bound
                why = infeasible(result.workunit, resource, runtime, config)
                if why != DEADLINE:
                    break
                if refusals is not None:
                    # check_deadline flags speed.insufficient at each refusal, the reduced
                    # bound's too, though the full one then passes
                    refusals.add(DEADLINE)
            if why:
                refused.append((result, version, why))
                if refusals is not None:
                    refusals.add(why)
                if notices is not None:
                    add_notice(notices, notice(why, result.workunit, version, resource))
                if work_needed is not None and work_needed.stops(why):
                    break
                continue
            if getattr(result, "volunteer_has", False):
                continue  # locality's possibly_send_result: ERR_WU_USER_RULE, after the checks
            chosen.append((result, version, runtime))
            if work_needed is not None:
                work_needed.took(result.workunit, resource.disk)
            elif resource.disk is not None:
                resource.disk.take(result.workunit)
            taken_wus.add(result.workunit_id)
            if in_progress is not None:
                in_progress.register(apps[result.app_id].name, resource.name)
            if version.room is not None and not leaky:
                version.room -= 1
            resource = after_sending(resource, [(result, version, runtime)])
        if host_class is not None:
            chosen = sched_hr.commit(chosen, host_class, config, apps, now=now)
        sent = mark_sent(host, chosen, now=now, config=config)
        fallen = []
        if config.seed003_infeasible_queue:
            fallen = mark_infeasible(
                [r for r, _, why in refused if why == DEADLINE], now=now, timeout=config.infeasible_timeout
            )
        count_sent(
            host,
            Counter(v.row.pk for _, v, _ in sent if v.row is not None),
            now=now,
            quota=config.daily_result_quota,
            known=reliability.havs if reliability is not None else (),
        )
    if fallen:
        make_due(fallen, now=now)
    return sent


def add_notice(notices: list[str], text: str) -> None:
    """WORK_REQ::add_no_work_message: each text once."""
    if text and text not in notices:
        notices.append(text)


def lacking_notices(
    looked_at: Mapping[int, tuple[Version, Resource]],
    notices: list[str],
    limit: int = 100,
    *,
    config: SchedulerConfig,
    host_class: sched_hr.HostClass | None = None,
    reliability: sched_reliable.Reliability | None = None,
    request: SchedulerRequest | None = None,
    refusals: set[str] | None = None,
) -> None:
    """Add the memory, disk and bandwidth notices of unsent jobs the host lacks something
    for that the request did not look at (BOINC checks these before
    one_result_per_user_per_wu, which our candidates query applies first), as BOINC would
    for the jobs in its shared-memory cache (at most ``limit`` an app, its default size); with
    ``refusals`` (a set), DEADLINE joins it when such a job the host has all it needs for
    would not finish in time, as check_deadline, the last of those checks, sets the flag
    behind "Tasks won't finish in time" (sched_check.cpp wu_is_infeasible_fast). Jobs
    homogeneous redundancy keeps from the host are left out, and so are jobs that need a
    reliable host when their version is not one (sched_score.cpp JOB::get_score leaves them
    out of the scan), and jobs whose best version is over its daily quota (get_app_version
    finds none within it). Called when nothing was sent, so the disk left is still the
    request's whole allowance.

    The jobs of the apps of one processor type are taken in the scan's order (the feeder's,
    as ``candidate_sql`` gives it), and a job committed to a version over its daily quota
    ends them: sched_score.cpp send_work_score_type stops its pass at the first job whose
    version ``daily_quota_exceeded``, so the jobs after it are never checked.

    With ``host_class`` and ``request``, a workunit committed to an app version
    (homogeneous app version) is checked with that version, whichever the host's best is,
    and so is one of an app the host has no version of its own for (a ``committed_only``
    Version): sched_score.cpp send_work_score_type takes each job's version from
    get_app_version, which returns the committed one (check_homogeneous_app_version, which
    checks no daily quota), or none when the host cannot run it (the job is then never
    checked)."""
    apps = App.objects.in_bulk(list(looked_at))
    committed_versions: dict[int | str, Any] = {}  # sched_hr's cache, as in send_for_resource
    hr = sched_hr.uses_hr(list(looked_at), config)

    def checks_deadlines(resource: Resource) -> bool:
        """Whether a job the host has all it needs for is still checked for its deadline:
        only to flag DEADLINE, so not once it is flagged."""
        return (
            refusals is not None
            and DEADLINE not in refusals
            and not config.ignore_delay_bound
            and resource.estimated_delay != 0
        )

    # each processor type's jobs, in the scan's order: (order key, app, its version, its
    # resource, whether its workunits go with their committed versions, the job's columns)
    scans: dict[str, list[tuple[tuple[int, int, int, int], int, Version, Resource, bool, tuple[Any, ...]]]] = {}
    for app_id, (version, resource) in looked_at.items():
        by_commitment = host_class is not None and request is not None and apps[app_id].homogeneous_app_version
        short = Q(pk__in=[])
        if resource.usable_ram is not None:
            short |= Q(workunit__rsc_memory_bound__gt=resource.usable_ram)
        if resource.disk is not None:
            short |= Q(workunit__rsc_disk_bound__gt=resource.disk.available)
        if resource.n_bwdown:
            short |= Q(workunit__rsc_bandwidth_bound__gt=resource.n_bwdown)
        deadlines = checks_deadlines(resource)
        if resource.usable_ram is None and resource.disk is None and not resource.n_bwdown and not deadlines:
            continue
        if by_commitment:
            # a committed workunit whose version is over its quota ends the scan, lacking
            # something or not
            short |= Q(workunit__app_version__isnull=False)
        rows = (
            Result.objects.filter(server_state=ServerState.UNSENT, app_id=app_id, workunit__error_mask=0)
            .filter(Q() if deadlines else short)
            .filter(sched_hr.feasible(apps[app_id], version, host_class, config, any_version=by_commitment))
            # a committed job's reliability is its own version's (below)
            .filter(reliability.feasible(version) if reliability and not by_commitment else Q())
            .order_by("-priority", "workunit_id", "id")
            .values_list(
                "workunit__rsc_memory_bound",
                "workunit__rsc_disk_bound",
                "workunit__rsc_bandwidth_bound",
                "workunit__app_version_num",
                "workunit__app_version_id",
                "workunit__delay_bound",
                "workunit__rsc_fpops_est",
                "priority",
                "workunit_id",
                "id",
                "workunit__hr_class",
            )[:limit]
        )
        for row in rows:
            priority, wu_id, pk, hr_class = row[7:]
            score = priority + (1 if hr and hr_class > 0 else 0)
            key = (-score, -priority if hr else 0, wu_id, pk)
            scans.setdefault(resource.name, []).append((key, app_id, version, resource, by_commitment, row))
    for scan in scans.values():
        scan.sort(key=lambda job: job[0])
        found: list[str] = []  # this pass's notices, in the order of its jobs
        ended_by = None  # the quota notice of the committed job that ended the pass
        for _, app_id, version, resource, by_commitment, row in scan:
            memory, disk, bandwidth, number, committed, delay_bound, fpops, priority = row[:8]
            wu = Workunit(
                rsc_memory_bound=memory,
                rsc_disk_bound=disk,
                rsc_bandwidth_bound=bandwidth,
                app_version_num=number,
                app_version_id=committed,
                delay_bound=delay_bound,
                rsc_fpops_est=fpops,
            )
            job: Version | None
            if by_commitment and committed:
                # a workunit committed to an app version goes with that one, whatever its
                # pinned number and whichever version is the host's best
                assert request is not None  # by_commitment needs it
                job = sched_hr.version_for(wu, apps[app_id], version, request, resource, committed_versions)
            elif version.committed_only:
                job = None
            else:
                job = job_version(version, wu)
            if job is None:
                continue  # no version for this job: BOINC never checks it
            if reliability is not None and reliability.refuses(priority, job, bool(by_commitment and committed)):
                continue  # JOB::get_score: a job that needs a reliable host, a version that is not
            if job.room is not None and job.room <= 0:
                if by_commitment and committed:
                    # send_work_score_type: daily_quota_exceeded ends the pass
                    ended_by = daily_limit_notice(job.limit)
                    break
                continue  # get_app_version finds no version within the daily quota
            why = lacks(wu, resource)
            if not why:
                if not checks_deadlines(resource):
                    continue
                assert refusals is not None  # checks_deadlines needs it
                flops = None
                if by_commitment:
                    assert request is not None  # by_commitment needs it
                    flops = sched_hr.committed_flops(wu, apps[app_id], job, request, committed_versions)
                runtime = fpops / (flops or job_flops(resource, job))
                for bound in sched_reliable.delay_bounds(wu, priority, runtime / resource.available_frac, config):
                    wu.delay_bound = bound
                    why = infeasible(wu, resource, runtime, config)
                    if why != DEADLINE:
                        break
                    refusals.add(DEADLINE)  # each refusal flags it, as above
                continue
            add_notice(found, notice(why, wu, job, resource))
        # the jobs before the one that ended the pass were checked before its quota was
        found = [text for text in found if text not in notices]
        at = notices.index(ended_by) if ended_by in notices else len(notices)
        notices[at:at] = found


# Why a job is not sent to this host (sched_check.cpp's INFEASIBLE_MEM, INFEASIBLE_DISK,
# INFEASIBLE_BANDWIDTH, INFEASIBLE_CPU).
MEMORY, DISK, BANDWIDTH, DEADLINE = "memory", "disk", "bandwidth", "deadline"
# a job no app version of the host can run (get_app_version finds none): locality
# scheduling gives up the request (sched_locality.cpp ERR_NO_APP_VERSION)
NO_VERSION = "no version"


def lacks(wu: Workunit, resource: Resource) -> str:
    """MEMORY, DISK or BANDWIDTH when the host lacks what ``wu`` needs, else "": the checks
    of sched_check.cpp wu_is_infeasible_fast before the deadline, in its order
    (reference/server.md §3.4).

    check_memory: ``rsc_memory_bound`` above the usable RAM; check_disk: ``rsc_disk_bound``
    above the disk the request may still fill (``DiskSpace``); check_bandwidth: a
    ``rsc_bandwidth_bound`` (0: none) above the host's measured download speed, a check
    skipped while the host has measured none (``n_bwdown`` 0, "the host has never downloaded
    anything"). Each is strict: a bound equal to what the host has fits."""
    if resource.usable_ram is not None and wu.rsc_memory_bound > resource.usable_ram:
        return MEMORY
    if resource.disk is not None and wu.rsc_disk_bound > resource.disk.available:
        return DISK
    if wu.rsc_bandwidth_bound and resource.n_bwdown and wu.rsc_bandwidth_bound > resource.n_bwdown:
        return BANDWIDTH
    return ""


def infeasible(wu: Workunit, resource: Resource, runtime: float, config: SchedulerConfig) -> str:
    """Why ``wu`` cannot go to this host (MEMORY, DISK, BANDWIDTH or DEADLINE), or "" when
    it can.

    sched_check.cpp wu_is_infeasible_fast: first what the host lacks (``lacks``), then
    check_deadline (skipped with ``ignore_delay_bound``), which skips the check for a host
    with nothing queued on this resource ("everyone gets one result, no matter how slow they
    are"), and otherwise refuses when the queue ahead plus the job's runtime stretched by the
    host's availability (estimate_duration) exceeds ``delay_bound``, strictly. The runtime
    is the computing alone: BOINC's estimate_duration adds no time for downloading the
    job's input files.
    """
    why = lacks(wu, resource)
    if why:
        return why
    if config.ignore_delay_bound or resource.estimated_delay == 0:
        return ""
    if resource.estimated_delay + runtime / resource.available_frac > wu.delay_bound:
        return DEADLINE
    return ""


def notice(why: str, wu: Workunit, version: Version, resource: Resource) -> str:
    """reference/server.md §3.4: the notice sched_check.cpp gives the volunteer for a job
    refused for ``why`` (memory, disk or bandwidth; "" for the others, which give none),
    with the host's figures of the moment (the disk left shrinks as jobs are added). MB are
    2^20 bytes and KB 2^10 (lib/util.h); BOINC writes two spaces between the sentences."""
    assert version.reply is not None  # only committed_only stand-ins have none, and no job goes with one
    app = version.reply.app_name
    if why == MEMORY:
        assert resource.usable_ram is not None  # lacks finds no memory short without it
        return (
            f"{app} needs {wu.rsc_memory_bound / MEGA:.2f} MB RAM but only "
            f"{resource.usable_ram / MEGA:.2f} MB is available for use."
        )
    if why == DISK:
        assert resource.disk is not None  # lacks finds no disk short without it
        available = resource.disk.available
        return (
            f"{app} needs {(wu.rsc_disk_bound - available) / MEGA:.2f}MB more disk "
            f"space.  You currently have {available / MEGA:.2f} MB available and it needs "
            f"{wu.rsc_disk_bound / MEGA:.2f} MB."
        )
    if why == BANDWIDTH:
        return (
            f"{app} requires {wu.rsc_bandwidth_bound / KILO:.2f} KB/sec download "
            f"bandwidth.  Your computer has been measured at "
            f"{resource.n_bwdown / KILO:.2f} KB/sec."
        )
    return ""


def after_sending(resource: Resource, sent: Iterable[Chosen]) -> Resource:
    """``resource`` once ``sent`` ((result, version, runtime) tuples) are added to the reply
    (sched_send.cpp add_result_to_reply, update_estimated_delay): each job's duration
    stretched by the host's availability, times the instances it uses (avg_ncpus, or the
    GPU's usage), comes off the requested seconds; its instances off the requested
    instances; and the queue ahead grows by the duration × instances / the resource's count."""
    req_secs, req_instances, delay = (resource.req_secs, resource.req_instances, resource.estimated_delay)
    for _, version, runtime in sent:
        duration = runtime / resource.available_frac
        req_secs -= duration * version.instances
        req_instances -= version.instances
        delay += duration * version.instances / max(resource.count, 1)
    return replace(resource, req_secs=req_secs, req_instances=req_instances, estimated_delay=delay)


def mark_sent(host: Host, chosen: Iterable[Chosen], *, now: int, config: SchedulerConfig) -> list[Chosen]:
    """UNSENT -> IN_PROGRESS, compare-and-set, grouped by the values written."""
    groups: dict[tuple[int, int | None, float], list[Chosen]] = {}
    for result, version, runtime in chosen:
        deadline = now + result.workunit.delay_bound + config.report_grace_period
        app_version_id = version.row.pk if version.row else None
        flops = result.workunit.rsc_fpops_est / runtime if runtime else 0.0
        groups.setdefault((deadline, app_version_id, flops), []).append((result, version, runtime))
    sent, events = [], []
    q = connection.ops.quote_name
    for (deadline, app_version_id, flops), members in groups.items():
        ids = [result.pk for result, _, _ in members]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {q(Result._meta.db_table)} SET server_state = %s, host_id = %s, user_id = %s, sent_time = %s,"
                " report_deadline = %s, app_version_id = %s, flops_estimate = %s, infeasible_since = 0"
                f" WHERE id IN ({placeholders(len(ids))}) AND server_state = %s",
                [
                    ServerState.IN_PROGRESS,
                    host.pk,
                    host.owner_id,
                    now,
                    deadline,
                    app_version_id,
                    flops,
                    *ids,
                    ServerState.UNSENT,
                ],
            )
            changed = cursor.rowcount
        if changed != len(ids):
            ours = set(
                Result.objects.filter(
                    id__in=ids, host_id=host.pk, sent_time=now, server_state=ServerState.IN_PROGRESS
                ).values_list("id", flat=True)
            )
            members = [m for m in members if m[0].pk in ours]
        for result, version, runtime in members:
            result.report_deadline, result.sent_time = deadline, now
            sent.append((result, version, runtime))
            events.append(
                event(
                    time=now,
                    actor=ACTOR,
                    result_id=result.pk,
                    workunit_id=result.workunit_id,
                    field="server_state",
                    old=ServerState.UNSENT,
                    new=ServerState.IN_PROGRESS,
                    reason=f"sent to host {host.pk}",
                )
            )
    record(events, host.project_id)
    return sent


def mark_infeasible(results: Sequence[Result], *, now: int, timeout: int) -> list[Result]:
    """Stamp newly infeasible results; those infeasible too long -> OVER/COULDNT_SEND."""
    fresh = [r.pk for r in results if not r.infeasible_since]
    if fresh:
        Result.objects.filter(id__in=fresh, infeasible_since=0).update(infeasible_since=now)
    stale = [r for r in results if r.infeasible_since and now - r.infeasible_since >= timeout]
    if not stale:
        return []
    Result.objects.filter(id__in=[r.pk for r in stale], server_state=ServerState.UNSENT).update(
        server_state=ServerState.OVER, outcome=Outcome.COULDNT_SEND
    )
    events = []
    for r in stale:
        why = f"no host could meet the deadline for {now - r.infeasible_since} s"
        events.append(
            event(
                time=now,
                actor=ACTOR,
                result_id=r.pk,
                workunit_id=r.workunit_id,
                field="server_state",
                old=ServerState.UNSENT,
                new=ServerState.OVER,
                reason=why,
            )
        )
        events.append(
            event(
                time=now,
                actor=ACTOR,
                result_id=r.pk,
                workunit_id=r.workunit_id,
                field="outcome",
                old=Outcome.INIT,
                new=Outcome.COULDNT_SEND,
                reason=why,
            )
        )
    record(events, stale[0].project_id)
    return stale


def lower_transition_times(sent: Iterable[Chosen]) -> None:
    """``transition_time = min(transition_time, report_deadline)`` for the sent jobs' workunits."""
    by_deadline: dict[int, int] = {}
    for result, _, _ in sent:
        wu_deadline = by_deadline.get(result.workunit_id)
        if wu_deadline is None or result.report_deadline < wu_deadline:
            by_deadline[result.workunit_id] = result.report_deadline
    with transaction.atomic():
        locked_in_id_order(by_deadline)
        groups: dict[int, list[int]] = {}
        for wu_id, deadline in by_deadline.items():
            groups.setdefault(deadline, []).append(wu_id)
        for deadline, wu_ids in groups.items():
            lower_transition_time(wu_ids, deadline)


def make_due(results: Iterable[Result], *, now: int) -> None:
    with transaction.atomic():
        wu_ids = sorted({r.workunit_id for r in results})
        locked_in_id_order(wu_ids)
        if wu_ids:
            lower_transition_time(wu_ids, now)


def reply_results(sent: Sequence[Chosen], *, now: int, config: SchedulerConfig) -> list[ReplyResult]:
    """The reply's jobs: each result with its workunit, input files and output templates."""
    wu_ids = {result.workunit_id for result, _, _ in sent}
    if not wu_ids:
        return []
    q = connection.ops.quote_name
    inputs: dict[int, list[ReplyFile]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.workunit_id, f.name, f.nbytes, f.md5_cksum, f.sticky, f.report_on_rpc"
            f" FROM {q(Workunit.input_files.through._meta.db_table)} i JOIN {q(File._meta.db_table)} f"
            f" ON f.id = i.file_id WHERE i.workunit_id IN ({placeholders(len(wu_ids))})",
            list(wu_ids),
        )
        for wu_id, name, nbytes, md5, sticky, report_on_rpc in cursor.fetchall():
            inputs.setdefault(wu_id, []).append(ReplyFile(name, nbytes, md5, 0, bool(sticky), bool(report_on_rpc)))
    apps = sched_shmem.apps()
    jobs = []
    for result, version, runtime in sent:
        assert version.reply is not None  # only committed_only stand-ins have none, and no job goes with one
        wu = result.workunit
        workunit = ReplyWorkunit(
            wu.name,
            version.reply.app_name,
            wu.rsc_fpops_est,
            wu.rsc_fpops_bound,
            wu.rsc_memory_bound,
            wu.rsc_disk_bound,
            wu.delay_bound,
            sorted(inputs.get(wu.pk, []), key=lambda f: f.name),
        )
        jobs.append(
            ReplyResult(
                name=result.name,
                wu_name=wu.name,
                report_deadline=result.report_deadline - config.report_grace_period,
                workunit=workunit,
                app_version=version.reply,
                output_files=[ReplyFile(result.output_file_name(0), max_nbytes=apps[result.app_id].max_output_nbytes)],
                resource=version.reply.gpu_type or CPU,
                estimated_runtime=runtime,
            )
        )
    return jobs


def result_aborts(host: Host, names: Sequence[str], *, reply: SchedulerReply) -> None:
    """The client's in-progress jobs it should abort (send_result_abort, §3.6)."""
    if not names:
        return
    reported = set(reply.result_acks)
    rows = {r.name: r for r in Result.objects.filter(name__in=names).select_related("workunit")}
    for name in names:
        if name in reported:
            continue
        result = rows.get(name)
        if result is None or result.host_id != host.pk:  # not ours
            reply.result_aborts.append(name)
            continue
        timed_out = result.server_state == ServerState.OVER and result.outcome == Outcome.NO_REPLY
        if not (result.server_state == ServerState.IN_PROGRESS or timed_out):
            reply.result_aborts.append(name)
        elif result.workunit.error_mask & ErrorMask.CANCELLED:
            reply.result_aborts.append(name)
        elif result.workunit.assimilate_state == AssimilateState.DONE or timed_out:
            reply.result_abort_if_not_started.append(name)
