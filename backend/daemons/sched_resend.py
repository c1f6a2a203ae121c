"""Resending lost results (reference/server.md §3.6: sched/sched_resend.cpp resend_lost_work).

With ``SchedulerConfig.resend_lost_results`` on, a request that asks for work and carries the
client's list of in-progress jobs (``<other_results>``, ``request.other_results`` not None)
has the IN_PROGRESS results of its host that the client neither lists nor reports in this
request looked at, in id order, while the request still wants work (sched_resend.cpp
resend_lost_work stops once ``work_needed`` is false: every resource's seconds and instances
met, or max_wus_to_send reached; the results not looked at stay in progress for a later
request):

- it is **expired** if its workunit has an error or a canonical result, if the host has no
  usable app version for it any more (app or version deprecated, GPU gone), if the host lacks
  the memory, disk or download bandwidth it needs (``sched_send.lacks``, with the notice BOINC
  gives), or if it cannot finish in time: the client's queue ahead (``estimated_delay``, plus
  the jobs resent before it) and its runtime on this host, stretched by the host's
  availability, must fit before its deadline (``new_deadline``). The runtime is estimated as
  a new send's is, a workunit committed to a CPU version without plan class (homogeneous app
  version) running at the capped host speed (``sched_hr.committed_flops``, BOINC's
  check_homogeneous_app_version). An expired result gets ``report_deadline = now - 1 +
  report_grace_period`` and its workunit ``transition_time`` lowered to that
  (update_wu_on_send), so a transitioner pass times it out (OVER/NO_REPLY) and makes a
  replacement;
- otherwise it is **resent**: the same result goes back in the reply with the version a new
  send would take (``VersionChooser``), ``sent_time = now``, and the deadline below; it
  counts against the request as a new job does (``sched_send.after_sending``), its disk
  bound included. It is not counted in the host app version's ``n_jobs_today`` (BOINC counts
  only new jobs), though a version whose daily quota is used up is not resent with.

Each change writes a lifecycle event and a reply message ("Resent lost task ..." or
"Didn't resend lost task ... (expired)"). If anything was resent, the scheduler sends no new
work in that RPC.

The deadline (``new_deadline``), as BOINC computes it: ``possibly_give_result_new_deadline``
computes a new one, but the feasibility check has by then set the workunit's delay bound to
the time left before the stored deadline, so the resent copy mostly keeps the stored deadline
(grace included) as the one the client is told, and writing it adds the grace period a second
time (mark_as_sent), as does the expiry's ``now - 1``.

The results are read and written under their workunits' row locks, taken in id order, which
the transitioner and validator also hold while they decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, cast

from django.db import transaction
from django.db.models import Case, Value, When

from backend.daemons import sched_hr
from backend.daemons.claim import locked_in_id_order, lower_transition_time, read_rows
from backend.daemons.sched_send import (
    CPU,
    DEADLINE,
    add_notice,
    after_sending,
    apply_daily_quota,
    committed_only_versions,
    job_flops,
    lacks,
    max_jobs_per_rpc,
    notice,
    reply_results,
    usable_versions,
)
from backend.daemons.sched_types import Message, SchedulerConfig, SchedulerReply, SchedulerRequest
from backend.daemons.sched_version import job_version
from backend.events import event, record
from backend.models import Host, HostAppVersion, Result, ServerState

if TYPE_CHECKING:
    from backend.daemons.sched_send import Resource, Version

ACTOR = "scheduler"


def resend_lost_results(
    host: Host,
    request: SchedulerRequest,
    resources: Sequence[Resource],
    *,
    now: int,
    config: SchedulerConfig,
    reply: SchedulerReply,
    notices: list[str] | None = None,
) -> int:
    """Resend or expire ``host``'s lost results (see the module docstring); ``resources`` are
    the host's processor types (``sched_send.host_resources``). Returns how many were resent.
    Why a result the host lacks memory, disk or bandwidth for was not resent goes to
    ``notices`` (a list, when given), as BOINC's check_memory, check_disk and
    check_bandwidth add it to the request's no-work messages."""
    kept = set(request.other_results or ()) | {report.name for report in request.results}
    lost = [
        (pk, wu_id)
        for pk, name, wu_id in Result.objects.filter(host=host, server_state=ServerState.IN_PROGRESS).values_list(
            "id", "name", "workunit_id"
        )
        if name not in kept
    ]
    if not lost:
        return 0
    chooser = VersionChooser(host, request, resources, config=config, now=now)
    max_jobs = max_jobs_per_rpc(host, request, config)
    resent: list[Any] = []
    expired = []
    homogeneous = sched_hr.Resends(host, request, config)
    with transaction.atomic():
        locked_in_id_order({wu_id for _, wu_id in lost})
        results = (
            Result.objects.filter(id__in=[pk for pk, _ in lost], host=host, server_state=ServerState.IN_PROGRESS)
            .select_related("workunit", "app_version")
            .order_by("id")
        )
        wanted = {r.name: r for r in resources}
        for result in results:
            if len(resent) >= max_jobs or not any(r.req_secs > 0 or r.req_instances > 0 for r in wanted.values()):
                break  # the request is filled (work_needed); the rest wait for later RPCs
            resource, version = chooser.choose(result, homogeneous.committed(result))
            version = homogeneous.version_for(result, resource, version)
            # casts: without a version not_resendable says why, and a version comes with its resource
            why = not_resendable(result, version) or homogeneous.infeasible(result, cast("Version", version))
            if not why:
                resource = cast("Resource", resource)
                version = cast("Version", version)
                lacking = lacks(result.workunit, wanted[resource.name])
                if lacking:
                    why = f"the host lacks the {lacking} it needs"
                    reply.insufficient.add(lacking)
                    if notices is not None:
                        add_notice(notices, notice(lacking, result.workunit, version, wanted[resource.name]))
            if not why:
                resource = cast("Resource", resource)
                version = cast("Version", version)
                flops = homogeneous.committed_flops(result, version)
                runtime = result.workunit.rsc_fpops_est / (flops or job_flops(resource, version))
                deadline = new_deadline(result, wanted[resource.name], runtime, now=now, reply=reply)
                if deadline is None:
                    why = "it cannot finish before its deadline"
                else:
                    wanted[resource.name] = after_sending(wanted[resource.name], [(result, version, runtime)])
                    if resource.disk is not None:
                        resource.disk.take(result.workunit)
                    # stored with the grace period, as mark_as_sent writes it
                    result.report_deadline = deadline + config.report_grace_period
                    resent.append((result, version, runtime))
                    continue
            expired.append((result, why))
            homogeneous.expire(result, version)
        reply.hr_other_class = homogeneous.last.other_class
        resent, unmarked = homogeneous.commit(resent, now=now)
        mark_resent(host, resent, now=now)
        mark_expired(host, expired, now=now, grace=config.report_grace_period, unmarked=unmarked)
    for result, _, _ in resent:
        reply.messages.append(Message(f"Resent lost task {result.name}", "low"))
    for result, _ in expired:
        if result.pk in unmarked:
            continue
        reply.messages.append(Message(f"Didn't resend lost task {result.name} (expired)", "low"))
    reply.results.extend(reply_results(resent, now=now, config=config))
    return len(resent)


class VersionChooser:
    """The version a lost result would be resent with, chosen as for a new send
    (reference/server.md §3.6; sched_resend.cpp calls get_app_version): the host's best
    version of the app on the processor type the result was sent for (any type, GPUs first,
    when that is not known), the pinned number's or a 64-bit one when the job needs it
    (``sched_version.job_version``), the committed one under homogeneous app version
    (``sched_hr.Resends.version_for``); none when the version's daily quota on this host is
    used up, as get_app_version skips such versions (the resent job is still not counted in
    the quota)."""

    def __init__(
        self,
        host: Host,
        request: SchedulerRequest,
        resources: Sequence[Resource],
        *,
        config: SchedulerConfig,
        now: int,
    ) -> None:
        self.host, self.request, self.resources = host, request, resources
        self.config, self.now = config, now
        self.havs = {hav.app_version_id: hav for hav in read_rows(HostAppVersion, "t.host_id = %s", [host.pk])}
        self.cache: dict[str, dict[int, Version]] = {}

    def versions(self, resource: Resource) -> dict[int, Version]:
        if resource.name not in self.cache:
            config = self.config
            versions = usable_versions(self.request, resource, self.host, config=config, havs=self.havs, now=self.now)
            apply_daily_quota(
                versions,
                self.havs,
                resource,
                now=self.now,
                quota=config.daily_result_quota,
                gpu_multiplier=config.gpu_multiplier,
            )
            versions.update(
                committed_only_versions(
                    self.host, self.request, resource, versions, config=config, havs=self.havs, now=self.now
                )
            )
            self.cache[resource.name] = versions
        return self.cache[resource.name]

    def choose(self, result: Result, committed: bool) -> tuple[Resource, Version] | tuple[None, None]:
        """``(resource, version)``; version None when there is none. ``committed``: the
        result's workunit is committed to a version, which ``Resends.version_for`` takes."""
        if result.app_version is not None:
            wanted: Sequence[Resource] = [r for r in self.resources if r.name == (result.app_version.gpu_type or CPU)]
        else:
            wanted = self.resources
        for resource in wanted:
            version = self.versions(resource).get(result.app_id)
            if version is None:
                continue
            if not committed:
                if version.committed_only:
                    continue
                version = job_version(version, result.workunit)
                if version is None or (version.room is not None and version.room <= 0):
                    continue
            return resource, version
        return None, None


def new_deadline(
    result: Result, resource: Resource, runtime: float, *, now: int, reply: SchedulerReply | None = None
) -> int | None:
    """The deadline the client is told for a resent ``result``, or None when it cannot
    finish in time (sched_check.cpp wu_is_infeasible_fast, then sched_resend.cpp
    possibly_give_result_new_deadline).

    The deadline check is check_deadline's (skipped with nothing queued), first against the
    time left before the stored deadline, then against the delay bound; the bound that
    passes becomes the workunit's delay bound (0 once the stored deadline has passed). The
    new deadline is now + half the time the result was given, never before the stored
    deadline nor after now + that bound, and must leave room for the job's duration
    stretched by the host's availability. Each refusal of check_deadline (not the last
    test's) adds DEADLINE to ``reply.insufficient``, as it sets BOINC's speed.insufficient.
    """
    stored, delay_bound = result.report_deadline, result.workunit.delay_bound
    duration = runtime / resource.available_frac
    delay = resource.estimated_delay
    # BOINC measures the time left with dtime(), a fraction of a second past the request's
    # whole second, and truncates it: one second less, and nothing left at the deadline itself
    bound = 0
    if stored > now:
        bound = int(stored - now) - 1
        if delay and delay + duration > bound:
            if reply is not None:
                reply.insufficient.add(DEADLINE)
            if bound == delay_bound or delay + duration > delay_bound:
                return None
            bound = delay_bound
    deadline = max(stored, now + int(0.5 * (stored - result.sent_time)))
    deadline = min(deadline, now + bound)
    return None if duration > deadline - now else deadline


def not_resendable(result: Result, version: Version | None) -> str:
    """Why ``result`` is expired instead of resent, before the deadline check; "" if it may be."""
    if result.workunit.error_mask:
        return "its workunit has an error"
    if result.workunit.canonical_result_id:
        return "its workunit already has a canonical result"
    if version is None:
        return "no app version of this host can run it now"
    return ""


def mark_resent(host: Host, resent: Iterable[tuple[Result, Version, float]], *, now: int) -> None:
    """sent_time = now and the version it goes with, compare-and-set on IN_PROGRESS."""
    groups: dict[tuple[int | None, float], list[Result]] = {}
    for result, version, runtime in resent:
        app_version_id = version.row.pk if version.row else None
        flops = result.workunit.rsc_fpops_est / runtime if runtime else 0.0
        groups.setdefault((app_version_id, flops), []).append(result)
    events = []
    for (app_version_id, flops), results in groups.items():
        Result.objects.filter(id__in=[r.pk for r in results], host=host, server_state=ServerState.IN_PROGRESS).update(
            sent_time=now,
            app_version_id=app_version_id,
            flops_estimate=flops,
            report_deadline=Case(*[When(pk=r.pk, then=Value(r.report_deadline)) for r in results]),
        )
        for r in results:
            events.append(
                event(
                    time=now,
                    actor=ACTOR,
                    result_id=r.pk,
                    workunit_id=r.workunit_id,
                    field="sent_time",
                    old=r.sent_time,
                    new=now,
                    reason=f"resent: host {host.pk} lost it",
                )
            )
            r.sent_time = now
    record(events, host.project_id)


def mark_expired(
    host: Host,
    expired: Sequence[tuple[Result, str]],
    *,
    now: int,
    grace: int = 0,
    unmarked: AbstractSet[int] = frozenset(),
) -> None:
    """report_deadline = now - 1 + the grace period (mark_as_sent adds it) and the workunit
    due by then, as sched_resend.cpp does through mark_as_sent and update_wu_on_send, so
    the transitioner times it out once the grace period is over. The workunits of the
    results in ``unmarked`` (ids) are left as they are (sched_hr.Resends.commit)."""
    if not expired:
        return
    deadline = now - 1 + grace
    Result.objects.filter(id__in=[r.pk for r, _ in expired], host=host, server_state=ServerState.IN_PROGRESS).update(
        report_deadline=deadline
    )
    record(
        [
            event(
                time=now,
                actor=ACTOR,
                result_id=r.pk,
                workunit_id=r.workunit_id,
                field="report_deadline",
                old=r.report_deadline,
                new=deadline,
                reason=f"host {host.pk} lost it; not resent: {why}",
            )
            for r, why in expired
            if r.report_deadline != deadline
        ],
        host.project_id,
    )
    lowered = sorted({r.workunit_id for r, _ in expired if r.pk not in unmarked})
    if lowered:
        lower_transition_time(lowered, deadline)
