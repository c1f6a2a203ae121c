"""Homogeneous redundancy and homogeneous app version (reference/server.md §3.11).

A project whose results differ from one kind of computer to another sends all the replicas
of a workunit to hosts of one *HR class*: the first replica sent commits the workunit's
``hr_class`` to the class of its host, and later replicas go only to hosts of that class.
With homogeneous app version, the first send commits the workunit's ``app_version`` and every
later replica runs that version. The transitioner un-commits both when only errors remain
(backend.daemons.transitioner step 4), so a retry may go to another class.

The HR type of an app is ``App.homogeneous_redundancy``, or the project's
``<homogeneous_redundancy>`` when the app's is 0 (sched_hr.h app_hr_type). Type 1 (fine)
classes hosts by OS and CPU model family, type 2 (coarse) by OS and CPU vendor, with AMD
taken as Intel (``backend.daemons.hr``, BOINC's hr.cpp: an OS code plus a CPU code, so that
classes keep BOINC's numbers). A host whose class is unknown (``hr_unknown_class``) gets no
HR work, and no work at all when every app uses HR (sched_send.cpp send_work,
``hr_unknown_platform``: "Your computer type is not supported by this project").

The checks follow sched_check.cpp ``wu_is_infeasible_fast`` (``infeasible``) and the commit
sched_send.cpp ``update_wu_on_send`` (``commit``): a conditional update ``WHERE hr_class IN
(0, mine)`` / ``app_version IN (NULL, mine)``; a workunit another scheduler committed
elsewhere meanwhile is not sent. A committed workunit comes before uncommitted ones of the
same priority, as the feeder's ``infeasible_count = 1`` for a committed workunit raises its
score by one (sched_score.cpp; the candidate query, sched_send.candidate_sql, orders by it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.db.models import Q

from backend.daemons import sched_shmem
from backend.daemons.hr import (  # noqa: F401  (the classes, re-exported)
    ANDROID,
    COARSE,
    DARWIN,
    FINE,
    FREEBSD,
    LINUX,
    NO_OS,
    WINDOWS,
    class_name,
    hr_class,
    hr_unknown_class,
    os_code,
)
from backend.daemons.sched_version import capped_host_fpops
from backend.events import event, record
from backend.models import App, AppVersion, Host, Result, Workunit

if TYPE_CHECKING:
    from backend.daemons.sched_send import Resource, Version
    from backend.daemons.sched_types import SchedulerConfig, SchedulerRequest
    from backend.daemons.sched_version import BestVersions

# A job chosen for sending: (result, version, runtime); the version None for an expired one.
Chosen = TypeVar("Chosen", bound="tuple[Result, Version | None, float]")


def app_hr_type(app: App, config: SchedulerConfig) -> int:
    """sched_hr.h app_hr_type: the app's own HR type, else the project's."""
    return app.homogeneous_redundancy or config.homogeneous_redundancy


class HostClass:
    """What the scheduler needs of one requesting host: its OS, CPU vendor and model."""

    def __init__(self, host: Host, request: SchedulerRequest) -> None:
        info = request.host_info
        self.host_id = host.pk
        self.os_name = info.os_name or host.os_name
        self.vendor, self.model = info.p_vendor, info.p_model

    def hr_class(self, hr_type: int) -> int:
        return hr_class(self.os_name, self.vendor, self.model, hr_type)

    def unknown(self, hr_type: int) -> bool:
        return hr_unknown_class(self.os_name, self.vendor, self.model, hr_type)


def unknown_platform(host_class: HostClass, config: SchedulerConfig) -> bool:
    """sched_send.cpp send_work: True when every app uses HR and the host has no known class
    in any of them (hr_unknown_platform); such a host is sent nothing."""
    apps = [app for app in sched_shmem.apps().values() if not app.deprecated]
    if not apps or not all(app_hr_type(app, config) for app in apps):
        return False
    return all(host_class.unknown(app_hr_type(app, config)) for app in apps)


# Why a job is not sent (sched_check.cpp's INFEASIBLE_HR, INFEASIBLE_HAV).
HR, HAV = "hr", "homogeneous app version"


def infeasible(wu: Workunit, app: App, version: Version, host_class: HostClass, config: SchedulerConfig) -> str:
    """HR or HAV when ``wu`` cannot go to this host with ``version``, else "".

    sched_check.cpp wu_is_infeasible_fast: an HR app's job never goes to a host of unknown
    class, nor to one of another class than the workunit is committed to; a homogeneous app
    version app's job committed to a version goes only with that version."""
    hr_type = app_hr_type(app, config)
    if hr_type:
        if host_class.unknown(hr_type):
            return HR
        if wu.hr_class and wu.hr_class != host_class.hr_class(hr_type):
            return HR
    if app.homogeneous_app_version and wu.app_version_id:
        if version.row is None or version.row.pk != wu.app_version_id:
            return HAV
    return ""


class LastCheck:
    """BOINC's ``hr_reject_temp`` for one request: whether the last job checked against its
    workunit's class (sched_hr.cpp already_sent_to_different_hr_class, which resets the flag
    on each call) was committed to another class. When nothing is sent and it is set, BOINC
    adds "Tasks are committed to other platforms" (sched_send.cpp send_user_messages)."""

    def __init__(self) -> None:
        self.other_class = False

    def check(self, wu: Workunit, app: App, host_class: HostClass, config: SchedulerConfig) -> None:
        """Record the check of ``wu``'s class, which BOINC makes for an HR app's job when the
        host's class is known (wu_is_infeasible_fast)."""
        hr_type = app_hr_type(app, config)
        if hr_type and not host_class.unknown(hr_type):
            self.other_class = bool(wu.hr_class and wu.hr_class != host_class.hr_class(hr_type))


def apps_of(versions: Mapping[int, Version]) -> dict[int, App]:
    """app id -> App, for the apps of ``versions`` (app id -> sched_send.Version)."""
    apps = sched_shmem.apps()
    return {app_id: apps[app_id] for app_id in versions if app_id in apps}


def version_for(
    wu: Workunit,
    app: App,
    version: Version,
    request: SchedulerRequest,
    resource: Resource,
    cache: dict[Any, Any],
) -> Version | None:
    """The version to send ``wu`` with: ``version`` (the host's best for the app), unless the
    app uses homogeneous app version and the workunit is committed to another, which is then
    the one, or None when the host cannot run it.

    sched_version.cpp get_app_version / check_homogeneous_app_version: an anonymous-platform
    client gets no homogeneous-app-version work; the committed version, deprecated or not,
    must be for one of the client's platforms and use the resource being filled. ``cache``
    (a dict) keeps the versions looked up during one request."""
    if not app.homogeneous_app_version:
        return version
    if request.platform_name == "anonymous":
        return None
    if not wu.app_version_id or (version.row is not None and version.row.pk == wu.app_version_id):
        return version
    if wu.app_version_id not in cache:
        cache[wu.app_version_id] = committed_version(wu.app_version_id, request, resource, version.chooser)
    return cache[wu.app_version_id]


def committed_flops(
    wu: Workunit, app: App, version: Version, request: SchedulerRequest, cache: dict[Any, Any]
) -> float | None:
    """The FLOPS a job of a workunit committed to a CPU app version without a plan class
    runs at, or None for any other job: BOINC sends such a job with that version as a
    sequential app at ``capped_host_fpops`` (sched_version.cpp check_homogeneous_app_version),
    even when the version is the one it would have chosen anyway."""
    if not (app.homogeneous_app_version and wu.app_version_id and version.row is not None):
        return None
    if version.row.plan_class or version.row.gpu_type:
        return None
    if "capped" not in cache:
        cache["capped"] = capped_host_fpops(request.host_info.p_fpops)
    return cache["capped"]


def committed_version(
    app_version_id: int, request: SchedulerRequest, resource: Resource, chooser: BestVersions | None = None
) -> Version | None:
    """The sched_send.Version of app version ``app_version_id`` for this host, or None.

    check_homogeneous_app_version: the version must be for one of the client's platforms; a
    version with a plan class must be feasible on the host (app_plan, through ``chooser``,
    the request's sched_version.BestVersions), which also says which processor it uses; and
    that processor must be the resource being filled."""
    from backend.daemons.sched_send import CPU, Version, apply_daily_quota
    from backend.daemons.sched_types import ReplyAppVersion
    from backend.daemons.sched_version import version_of

    row = AppVersion.objects.filter(pk=app_version_id).select_related("app").first()
    platforms = {request.platform_name, *request.alt_platforms}
    if row is None or row.platform not in platforms:
        return None
    if chooser is not None and chooser.described(row):
        usage = chooser.host_usage(row)
        if usage is None or usage.proc_type != resource.name:
            return None
        version = version_of(chooser, row, usage)
    else:
        gpu_type = "" if resource.name == CPU else resource.name
        if row.gpu_type != gpu_type:
            return None
        reply = ReplyAppVersion.of_row(row)
        version = Version(row, reply, row.gpu_usage if gpu_type else row.avg_ncpus, chooser=chooser)
    if chooser is not None:
        # its daily quota on this host, which the send checks job by job (sched_score.cpp
        # send_work_score_type: check_homogeneous_app_version looks at no quota itself)
        apply_daily_quota(
            {row.app_id: version},
            chooser.havs,
            resource,
            now=chooser.now,
            quota=chooser.config.daily_result_quota,
            gpu_multiplier=chooser.config.gpu_multiplier,
        )
    return version


def commit(
    chosen: Iterable[Chosen],
    host_class: HostClass,
    config: SchedulerConfig,
    apps: Mapping[int, App],
    *,
    now: int,
) -> list[Chosen]:
    """Commit the workunits of ``chosen`` ((result, version, runtime) tuples) to the host's
    class and app version where their apps ask for it; return the tuples whose commit held.

    sched_send.cpp update_wu_on_send: one conditional update per workunit, ``hr_class =
    mine WHERE hr_class IN (0, mine)`` and ``app_version = mine WHERE app_version IN (NULL,
    mine)``; no row changed means another scheduler committed it elsewhere meanwhile, and the
    job is not sent. The first commit of a workunit is a lifecycle event."""
    kept, events = [], []
    for item in chosen:
        result, version, _ = item
        wu, app = result.workunit, apps[result.app_id]
        hr_type = app_hr_type(app, config)
        values, where = {}, Q(pk=result.workunit_id)
        if app.homogeneous_app_version and version is not None and version.row is not None:
            values["app_version_id"] = version.row.pk
            where &= Q(app_version__isnull=True) | Q(app_version_id=version.row.pk)
        if hr_type:
            values["hr_class"] = host_class.hr_class(hr_type)
            where &= Q(hr_class__in=(0, values["hr_class"]))
        if not values:
            kept.append(item)
            continue
        if not Workunit.objects.filter(where).update(**values):
            continue  # "WU already sent to other HR class or app version"
        for name, value in values.items():
            if not getattr(wu, name):
                events.append(
                    event(
                        time=now,
                        actor="scheduler",
                        workunit_id=wu.pk,
                        field=name.removesuffix("_id"),
                        old=None,
                        new=value,
                        reason=f"committed by the send to host {host_class.host_id}",
                    )
                )
            setattr(wu, name, value)
        kept.append(item)
    if events:
        record(events, app.project_id)
    return kept


def uses_hr(app_ids: Iterable[int], config: SchedulerConfig) -> bool:
    """Whether any of the apps ``app_ids`` uses homogeneous redundancy."""
    if config.homogeneous_redundancy:
        return True
    apps = sched_shmem.apps()
    return any(apps[app_id].homogeneous_redundancy > 0 for app_id in app_ids if app_id in apps)


def uncommit(wu: Workunit, wu_event: Callable[[Workunit, str, int | None, int | None, str], object]) -> None:
    """transitioner.cpp: a workunit whose results so far are all errors is committed to no
    HR class and no app version any more (``hr_class = 0``, ``app_version`` none), so its
    retry may go to any host; ``wu_event(wu, field, old, new, reason)`` records each change.
    The caller writes the row."""
    why = "only errors remain: the retry may go to another platform"
    if wu.hr_class:
        wu_event(wu, "hr_class", wu.hr_class, 0, why)
        wu.hr_class = 0
    if wu.app_version_id:
        wu_event(wu, "app_version", wu.app_version_id, None, why)
        wu.app_version_id = None


class Resends:
    """Homogeneous redundancy and app version for one request's lost results
    (sched_resend.cpp resend_lost_work): a lost result is resent only with the version its
    workunit is committed to and to a host of its class, as a new send; resending commits the
    workunit, and so does expiring one the host has a version for (both call
    update_wu_on_send)."""

    def __init__(self, host: Host, request: SchedulerRequest, config: SchedulerConfig) -> None:
        self.host_class, self.request, self.config = HostClass(host, request), request, config
        self.apps: dict[int, App] = {}
        self.cache: dict[Any, Any] = {}
        self.expired: list[tuple[Result, Version | None, float]] = []
        # the class checks of the resend's wu_is_infeasible_fast set BOINC's hr_reject_temp
        # too, which the send that follows starts from (SchedulerReply.hr_other_class)
        self.last = LastCheck()

    def app(self, result: Result) -> App:
        if result.app_id not in self.apps:
            self.apps[result.app_id] = App.objects.get(pk=result.app_id)
        return self.apps[result.app_id]

    def committed(self, result: Result) -> bool:
        """Whether ``result``'s workunit goes with the version it is committed to (its app
        uses homogeneous app version and the client is not on the anonymous platform)."""
        return bool(
            self.app(result).homogeneous_app_version
            and result.workunit.app_version_id
            and self.request.platform_name != "anonymous"
        )

    def version_for(self, result: Result, resource: Resource | None, version: Version | None) -> Version | None:
        if version is None:
            return None
        # cast: a version comes with its resource (sched_resend.VersionChooser.choose)
        return version_for(
            result.workunit, self.app(result), version, self.request, cast("Resource", resource), self.cache
        )

    def infeasible(self, result: Result, version: Version) -> str:
        self.last.check(result.workunit, self.app(result), self.host_class, self.config)
        why = infeasible(result.workunit, self.app(result), version, self.host_class, self.config)
        return f"{why}: its workunit is committed elsewhere" if why else ""

    def committed_flops(self, result: Result, version: Version | None) -> float | None:
        """The capped host speed a job of a workunit committed to a CPU version without plan
        class runs at, as for a new send (``committed_flops``); None for any other."""
        if version is None:
            return None
        return committed_flops(result.workunit, self.app(result), version, self.request, self.cache)

    def expire(self, result: Result, version: Version | None) -> None:
        self.app(result)
        self.expired.append((result, version, 0.0))

    def commit(self, resent: Iterable[Chosen], *, now: int) -> tuple[list[Chosen], set[int]]:
        """Commit the workunits of the expired results and of ``resent``; return the
        resent ones whose commit held, and the ids of the expired ones whose commit failed
        (their workunit is committed elsewhere: BOINC then leaves the workunit's
        transition_time and the reply's message out, sched_resend.cpp)."""
        kept = commit(self.expired, self.host_class, self.config, self.apps, now=now)
        failed = {r.pk for r, _, _ in self.expired} - {r.pk for r, _, _ in kept}
        return commit(resent, self.host_class, self.config, self.apps, now=now), failed


def feasible(
    app: App, version: Version, host_class: HostClass | None, config: SchedulerConfig, *, any_version: bool = False
) -> Q:
    """A Q on results: those whose workunit ``infeasible`` lets go to this host with
    ``version`` (everything when ``host_class`` is None); with ``any_version``, whatever
    app version their workunit is committed to (the caller finds each one's version, as
    get_app_version does: ``version_for``)."""
    if host_class is None:
        return Q()
    q = Q()
    hr_type = app_hr_type(app, config)
    if hr_type:
        if host_class.unknown(hr_type):
            return Q(pk__in=[])
        q &= Q(workunit__hr_class__in=(0, host_class.hr_class(hr_type)))
    if app.homogeneous_app_version and not any_version:
        if version.row is None:
            return Q(pk__in=[])
        q &= Q(workunit__app_version__isnull=True) | Q(workunit__app_version_id=version.row.pk)
    return q
