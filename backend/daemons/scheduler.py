"""The scheduler: the server side of one scheduler RPC (reference/server.md §3.4–§3.6).

Entry point, a function from a request object to a reply object::

    handle_request(request: SchedulerRequest, *, now: int,
                   config: SchedulerConfig = SchedulerConfig()) -> SchedulerReply

It raises ``SchedulerRequestError`` (a ValueError whose ``reason`` says what is wrong) for a
malformed request, an unknown host or a host that belongs to another account, and then has
changed nothing. Otherwise, in BOINC's order (sched/handle_request.cpp):

1. the host row is updated from ``host_info``/``time_stats`` and its sticky file list replaced
   (a request with ``hostid == 0`` and a ``userid`` creates the host; ``reply.hostid`` says which);
   a request with ``hostid == 0`` that looks like an existing host of the account (same domain
   name, OS name and CPU count, ``reattached_host``) gets that host: the client detached and
   re-attached, and unless it lists jobs in progress, the host's IN_PROGRESS results become
   OVER/CLIENT_DETACHED (§3.6 ``mark_results_over``);
2. reported results are handled (§3.5, ``backend.daemons.sched_result``): each is acked; one that
   is unknown, was sent to another volunteer's host, or carries output files that are not its own
   is listed in ``reply.rejected`` with the reason and changes nothing;
3. in-progress results the client lists in ``other_results`` are checked (§3.6
   send_result_abort) and may be put in ``result_aborts`` / ``result_abort_if_not_started``;
   with ``SchedulerConfig.resend_lost_results``, a request that asks for work and lists its
   in-progress jobs has the host's other IN_PROGRESS results resent or expired (§3.6,
   ``backend.daemons.sched_resend``); if any was resent, no new work is sent;
4. work is sent (§3.4, ``backend.daemons.sched_send``) for each resource with a request, GPUs
   first: unsent results by priority, one per user per workunit, only if the deadline is
   feasible on this host and the app version's daily quota on this host allows (§3.11,
   ``SchedulerConfig.daily_result_quota``), each claimed compare-and-set so that two
   schedulers never send the same result.

The request carries what a real client sends (reference/protocol.md §4.2); the reply what a
client reads (§4.3). URLs are not the scheduler's business: the web layer builds download and
upload URLs from file names. A caller that simulates hosts may put an output file's contents in
``ReportedFile.data``; the scheduler then writes it to the upload directory, as the
file_upload_handler would have.
"""

import sys
from typing import Any, NoReturn, TypeGuard, cast

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field, Model

from backend.daemons import sched_limit, sched_shmem
from backend.daemons.claim import locked_in_id_order, lower_transition_time, read_rows, update_rows
from backend.daemons.host_app_version import start_of_request
from backend.daemons.sched_resend import resend_lost_results
from backend.daemons.sched_result import handle_results
from backend.daemons.sched_send import (
    host_resources,
    requested_resources,
    result_aborts,
    send_work,
)
from backend.daemons.sched_types import (  # noqa: F401  (re-exported)
    ClientAppVersion,
    GpuRequest,
    HostInfo,
    Message,
    RejectedReport,
    ReplyAppVersion,
    ReplyFile,
    ReplyResult,
    ReplyWorkunit,
    ReportedFile,
    ReportedResult,
    SchedulerConfig,
    SchedulerReply,
    SchedulerRequest,
    SchedulerRequestError,
    StickyFile,
    TimeStats,
)
from backend.events import event, record
from backend.models import (
    AppVersion,
    ClientState,
    File,
    FileDeleteState,
    GpuType,
    Host,
    HostFile,
    Outcome,
    Project,
    Result,
    ServerState,
)

ACTOR = "scheduler"


GPU_TYPES = {choice for choice in GpuType.values if choice}


def column_range(model: type[Model], name: str) -> tuple[int, int]:
    """(lowest, highest) value integer column ``name`` of ``model`` holds on every database we
    support: PostgreSQL's sizes (Django's portable ranges; SQLite's integers are wider)."""
    field = cast("Field[Any, Any]", model._meta.get_field(name))  # a column, not a relation's other side
    return BaseDatabaseOperations.integer_field_ranges[field.get_internal_type()]


def is_real(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a finite number a float column can hold."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return -sys.float_info.max <= value <= sys.float_info.max


def check_request(request: object) -> None:
    """Raise SchedulerRequestError naming the first thing wrong with ``request``.

    Besides the rules of the protocol, every value that reaches a column must fit it on
    every database (a PostgreSQL integer, a string's max_length, no NUL character), so that a
    request is refused whole, with the element named, before anything is written.
    """

    def fail(reason: str) -> NoReturn:
        raise SchedulerRequestError(reason)

    def whole(value: object, where: str, model: type[Model], column: str, *, minimum: int | None = None) -> None:
        low, high = column_range(model, column)
        low = low if minimum is None else max(low, minimum)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            fail(f"{where} must be a whole number from {low} to {high}, not {value!r}")

    def real(value: object, where: str, *, minimum: float | None = None, positive: bool = False) -> None:
        if not is_real(value):
            fail(f"{where} must be a finite number, not {value!r}")
        if positive and not value > 0:
            fail(f"{where} must be positive, not {value!r}")
        if minimum is not None and value < minimum:
            fail(f"{where} must not be negative, not {value!r}")

    def string(value: object, where: str, model: type[Model] | None = None, column: str | None = None) -> None:
        if not isinstance(value, str):
            fail(f"{where} must be text, not {value!r}")
        if "\x00" in value:
            fail(f"{where} contains a NUL character")
        # a model comes with its column, a text column
        limit = cast("Field[Any, Any]", model._meta.get_field(cast(str, column))).max_length if model else None
        if limit is not None and len(value) > limit:
            fail(f"{where} is {len(value)} characters long; at most {limit} are allowed")

    if not isinstance(request, SchedulerRequest):
        fail("not a scheduler request")
    if isinstance(request.hostid, int) and request.hostid < 0:
        fail(f"hostid {request.hostid} is negative")
    whole(request.hostid, "hostid", Host, "id", minimum=0)
    if request.hostid == 0 and request.userid is None:
        fail("a new host (hostid 0) needs the account it belongs to")
    whole(request.rpc_seqno, "rpc_seqno", Host, "rpc_seqno")
    string(request.platform_name, "platform_name", Host, "platform")
    info, stats = request.host_info, request.time_stats
    string(info.domain_name, "host_info.domain_name", Host, "domain_name")
    string(info.os_name, "host_info.os_name", Host, "os_name")
    whole(info.p_ncpus, "host_info.p_ncpus", Host, "p_ncpus", minimum=1)
    real(info.p_fpops, "host_info.p_fpops", positive=True)
    for name in ("m_nbytes", "d_total", "d_free"):
        if getattr(info, name) is not None:
            real(getattr(info, name), f"host_info.{name}")
    for name in ("d_boinc_used_total", "d_boinc_used_project", "n_bwdown"):
        real(getattr(info, name), f"host_info.{name}", minimum=0)
    for name in (
        "disk_max_used_gb",
        "disk_max_used_pct",
        "disk_min_free_gb",
        "ram_max_used_busy_frac",
        "ram_max_used_idle_frac",
    ):
        real(getattr(request.global_prefs, name), f"global_prefs.{name}", minimum=0)
    for name in ("on_frac", "connected_frac", "cpu_and_network_available_frac", "active_frac", "gpu_active_frac"):
        value = getattr(stats, name)
        if not is_real(value) or not 0 <= value <= 1:
            fail(f"time_stats.{name} must be between 0 and 1, not {value!r}")
    for name in ("work_req_seconds", "cpu_req_secs", "cpu_req_instances", "estimated_delay"):
        real(getattr(request, name), name, minimum=0)
    seen_types = set()
    for gpu in request.gpu_requests:
        if gpu.type not in GPU_TYPES:
            fail(f"unknown GPU type {gpu.type!r}; expected one of {', '.join(sorted(GPU_TYPES))}")
        if gpu.type in seen_types:
            fail(f"GPU type {gpu.type} is requested twice")
        seen_types.add(gpu.type)
        if (
            isinstance(gpu.count, int)
            and gpu.count < 0
            or not all(
                is_real(v) and v >= 0 for v in (gpu.req_secs, gpu.req_instances, gpu.estimated_delay, gpu.peak_flops)
            )
        ):
            fail(f"the {gpu.type} request has a negative value")
        whole(gpu.count, f"the {gpu.type} count", Host, "gpu_count")
    names = set()
    for report in request.results:
        if not report.name:
            fail("a reported result has no name")
        string(report.name, "a reported result's name")
        if report.name in names:
            fail(f"result {report.name} is reported twice")
        names.add(report.name)
        if report.client_state not in ClientState.values:
            fail(f"result {report.name} has unknown state {report.client_state!r}")
        where = f"result {report.name}: "
        whole(report.exit_status, where + "exit_status", Result, "exit_status")
        real(report.final_elapsed_time, where + "final_elapsed_time")
        real(report.final_cpu_time, where + "final_cpu_time")
        string(report.stderr_out, where + "stderr_out")
        for out in report.output_files:
            string(out.name, where + "file_info.name", File, "name")
            if not out.name or "/" in out.name or out.name.startswith("."):
                fail(f"result {report.name} names an output file {out.name!r} that is not a plain file name")
            if isinstance(out.nbytes, int) and out.nbytes < 0:
                fail(f"output file {out.name} has a negative size")
            where_file = f"{where}file_info {out.name}: "
            whole(out.nbytes, where_file + "nbytes", File, "nbytes", minimum=0)
            whole(out.max_nbytes, where_file + "max_nbytes", File, "max_nbytes", minimum=0)
            string(out.md5_cksum, where_file + "md5_cksum", File, "md5_cksum")
            string(out.error_msg, where_file + "error_msg")
    for sticky in request.file_infos:
        if not sticky.name:
            fail("a sticky file_info has no name")
        string(sticky.name, "a sticky file_info's name", HostFile, "name")
    for version in request.app_versions:
        where = f"app_version {version.app_name} {version.version_num}: "
        string(version.app_name, "app_version.app_name")
        whole(version.version_num, where + "version_num", AppVersion, "version_num")
        real(version.avg_ncpus, where + "avg_ncpus", minimum=0)
        real(version.flops, where + "flops", minimum=0)
        real(version.gpu_usage, where + "gpu_usage", minimum=0)
    if (
        request.platform_name == "anonymous"
        and not request.app_versions
        and (request.cpu_req_secs or request.gpu_requests)
    ):
        fail("an anonymous-platform request must list its app_versions")


def find_host(request: SchedulerRequest, *, project_id: int, now: int) -> tuple[Host, bool]:
    """``(host, reattached)``: the requesting host, and whether a request without a host id
    was matched to an existing host of its account (``reattached_host``); a new, unsaved host
    for hostid 0 otherwise. Raises SchedulerRequestError."""
    if request.hostid:
        host = next(iter(read_rows(Host, "t.id = %s AND t.project_id = %s", [request.hostid, project_id])), None)
        if host is None:
            raise SchedulerRequestError(f"no host with id {request.hostid}")
        if request.userid is not None and host.owner_id != request.userid:
            raise SchedulerRequestError(f"host {request.hostid} belongs to another account than {request.userid}")
        return host, False
    # None (no account given) matches no account, and the error names it
    if not get_user_model().objects.filter(pk=request.userid).exists():  # type: ignore[misc]
        raise SchedulerRequestError(f"no account with id {request.userid}")
    assert request.userid is not None  # an account has it
    host = reattached_host(request, project_id)
    if host is not None:
        return host, True
    return Host(project_id=project_id, owner_id=request.userid, create_time=now), False


def reattached_host(request: SchedulerRequest, project_id: int) -> Host | None:
    """The account's most recent host that looks like the requesting computer, or None.

    BOINC's ``find_host_by_other`` (sched/handle_request.cpp) matches a request without a
    host id to the account's newest host with the same domain name, IP address, OS name, CPU
    model and memory size, all of them given. Our hosts keep no IP address, CPU model or
    memory size: we match the domain name and OS name (both must be given) and the CPU count,
    which stands in for the hardware. The benchmark speed (p_fpops) is not compared, since a
    re-attached client runs its benchmarks again.
    """
    info = request.host_info
    if not info.domain_name or not info.os_name:
        return None
    return (
        Host.objects.filter(
            project_id=project_id,
            owner_id=request.userid,
            domain_name=info.domain_name,
            os_name=info.os_name,
            p_ncpus=info.p_ncpus,
        )
        .order_by("-id")
        .first()
    )


def mark_results_over(host: Host, request: SchedulerRequest, *, now: int) -> int:
    """A detached and re-attached host's in-progress results -> OVER/CLIENT_DETACHED (§3.6).

    BOINC's ``mark_results_over``: every IN_PROGRESS result of the host, except any it reports
    in this very request, gets received_time = now and its workunit transition_time = now
    (``min(transition_time, now)``, as for a report, so a workunit already due stays due). The
    transitioner counts them as no reply, never as errors, and they are never resent. Results
    are written under their workunits' row locks, taken in id order. Returns how many.
    """
    reported = {report.name for report in request.results}
    wu_ids = {
        wu_id
        for name, wu_id in Result.objects.filter(host=host, server_state=ServerState.IN_PROGRESS).values_list(
            "name", "workunit_id"
        )
        if name not in reported
    }
    if not wu_ids:
        return 0
    with transaction.atomic():
        locked_in_id_order(wu_ids)
        results = [
            (pk, wu_id)
            for pk, name, wu_id in Result.objects.filter(
                host=host, server_state=ServerState.IN_PROGRESS, workunit_id__in=wu_ids
            ).values_list("id", "name", "workunit_id")
            if name not in reported
        ]
        Result.objects.filter(id__in=[pk for pk, _ in results]).update(
            server_state=ServerState.OVER, outcome=Outcome.CLIENT_DETACHED, received_time=now
        )
        if results:
            lower_transition_time(sorted({wu_id for _, wu_id in results}), now)
        why = f"host {host.pk} detached and re-attached"
        record(
            [
                e
                for pk, wu_id in results
                for e in (
                    event(
                        time=now,
                        actor=ACTOR,
                        result_id=pk,
                        workunit_id=wu_id,
                        field="server_state",
                        old=ServerState.IN_PROGRESS,
                        new=ServerState.OVER,
                        reason=why,
                    ),
                    event(
                        time=now,
                        actor=ACTOR,
                        result_id=pk,
                        workunit_id=wu_id,
                        field="outcome",
                        old=Outcome.INIT,
                        new=Outcome.CLIENT_DETACHED,
                        reason=why,
                    ),
                )
            ],
            host.project_id,
        )
    return len(results)


def update_host(host: Host, request: SchedulerRequest, *, now: int) -> None:
    """Copy what the client says about itself onto the host row (saved by the caller)."""
    info, stats = request.host_info, request.time_stats
    host.domain_name = info.domain_name or host.domain_name or f"host-{request.userid}"
    host.p_ncpus = info.p_ncpus
    host.p_fpops = info.p_fpops
    if info.m_nbytes is not None:
        host.m_nbytes = info.m_nbytes
    host.os_name = info.os_name or host.os_name
    host.platform = request.platform_name
    host.on_frac = stats.on_frac
    host.connected_frac = stats.connected_frac
    host.active_frac = stats.active_frac
    host.gpu_active_frac = stats.gpu_active_frac
    gpus = [gpu for gpu in request.gpu_requests if gpu.count > 0]
    if gpus:
        host.gpu_type, host.gpu_count, host.gpu_peak_flops = (gpus[0].type, gpus[0].count, gpus[0].peak_flops)
    else:
        host.gpu_type, host.gpu_count, host.gpu_peak_flops = GpuType.NONE, 0, 0.0
    host.rpc_seqno = request.rpc_seqno
    host.rpc_time = now


HOST_REQUEST_FIELDS = [
    "domain_name",
    "p_ncpus",
    "p_fpops",
    "m_nbytes",
    "os_name",
    "platform",
    "on_frac",
    "connected_frac",
    "active_frac",
    "gpu_active_frac",
    "gpu_type",
    "gpu_count",
    "gpu_peak_flops",
    "rpc_seqno",
    "rpc_time",
]


def sync_sticky_files(host: Host, request: SchedulerRequest, *, now: int) -> set[str]:
    """The host's HostFile rows become exactly the sticky files it says it holds."""
    held = {f.name for f in request.file_infos if f.status == 1}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT name FROM {connection.ops.quote_name(HostFile._meta.db_table)} WHERE host_id = %s", [host.pk]
        )
        known = {name for (name,) in cursor.fetchall()}
    if known - held:
        HostFile.objects.filter(host=host, name__in=known - held).delete()
    if held - known:
        HostFile.objects.bulk_create(
            [
                HostFile(project_id=host.project_id, host=host, name=name, reported_time=now)
                for name in sorted(held - known)
            ],
            ignore_conflicts=True,
        )
    return held


def handle_request(
    request: SchedulerRequest, *, project: Project, now: int, config: SchedulerConfig = SchedulerConfig()
) -> SchedulerReply:
    """Handle one scheduler RPC to ``project`` at its clock's ``now`` and return the reply (see
    the module docstring). The request sees the project's apps, versions, hosts and results
    only, as BOINC's scheduler sees its own project's database."""
    with sched_shmem.for_request(project.pk):
        return handle_in_request(request, project=project, now=now, config=config)


def handle_in_request(
    request: SchedulerRequest, *, project: Project, now: int, config: SchedulerConfig
) -> SchedulerReply:
    check_request(request)
    project_id = project.pk
    request, truncated = sched_limit.truncate_reports(request, config)
    host, reattached = find_host(request, project_id=project_id, now=now)
    host.project = project  # no query for it where outputs are stored in its directories
    last_rpc_time = host.rpc_time
    reply = SchedulerReply(request_delay=max(config.request_delay, sched_limit.min_request_delay(config)))
    if reattached and not request.other_results:
        mark_results_over(host, request, now=now)
    if host.pk is not None:
        # its own statement, outside the request's transaction: host app version locks are
        # taken last (workunits, results, host app versions, hosts)
        start_of_request(host, quota=config.daily_result_quota)
    with transaction.atomic():
        update_host(host, request, now=now)
        new_host = host.pk is None
        if new_host:
            host.save()
        held = sync_sticky_files(host, request, now=now)
        handled = handle_results(
            host,
            request.results,
            now=now,
            reply=reply,
            quota=config.daily_result_quota,
            keep_due=config.keep_due_workunits,
        )
        if not new_host:
            # Only the fields the request sets, and after the results: a full save would
            # overwrite the credit a validator just granted, and locking the host before the
            # workunits would invert the daemons' lock order (workunits, results, hosts).
            update_rows(Host, [host], HOST_REQUEST_FIELDS)
    reply.hostid = host.pk
    if config.send_result_abort and request.other_results is not None:
        result_aborts(host, request.other_results, reply=reply)
    reply.delete_file_infos = deleted_sticky_files(held, project_id)
    if request.dont_send_work:
        reply.messages.append(Message("not sending work: the client asked for none"))
        return reply
    resent = 0
    notices: list[str] = []
    if (
        (config.resend_lost_results or handled.resend_lost_results)
        and not truncated
        and request.other_results is not None
        and requested_resources(host, request, config)
    ):
        resent = resend_lost_results(
            host, request, host_resources(host, request, config), now=now, config=config, reply=reply, notices=notices
        )
    wait = sched_limit.too_soon(last_rpc_time, now, config)
    if wait is not None and not resent and requested_resources(host, request, config):
        reply.messages.append(Message(f"Not sending work. Last request too recent. Please wait {wait} seconds.", "low"))
    elif not resent:
        send_work(host, request, now=now, config=config, reply=reply, notices=notices)
    return reply


def deleted_sticky_files(held: set[str], project_id: int) -> list[str]:
    """Sticky files the host holds that project ``project_id`` no longer has
    (reference/server.md §3.10)."""
    if not held:
        return []
    live = set(
        File.objects.filter(project_id=project_id, name__in=held)
        .exclude(file_delete_state=FileDeleteState.DONE)
        .values_list("name", flat=True)
    )
    return sorted(held - live)
