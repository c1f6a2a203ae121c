"""The app version a job is sent with, and the speed its runtime is estimated from
(reference/server.md §3.4; sched/sched_version.cpp get_app_version, estimate_flops).

For each resource the scheduler sends work for, and each app, the version is the one with the
highest projected FLOPS over the client's platforms (its own first, then its alternatives),
the versions the feeder keeps (the newest of each plan class per app and platform, none
deprecated) and their plan classes (``backend.daemons.plan_class``): a version is feasible
when the host can run its plan class (a version without one is a sequential CPU app), it
runs on this resource, it is not beta (unless the volunteer allows beta work), the client's
version is within its ``min_core_version`` and ``max_core_version``, and its daily quota on
this host is not used up. A workunit pinned to an ``app_version_num`` takes only versions of
that number; a job whose memory bound exceeds what a 32-bit process addresses takes only
64-bit platforms' versions. With ``prefer_primary_platform``, the first platform with a
feasible version ends the search.

Projected FLOPS (get_app_version): the plan class's projection (the host's p_fpops for a
sequential app); once the host has run the version, it moves towards estimate_flops's
figure with the host's PFC samples ``n`` (``(estimate × (n - 1) + projection) / n``), is cut to
1 % for a version that seems not to work on the host (no PFC sample, a daily limit of 1 and no
consecutive valid result: 99 times in 100), and is multiplied by ``max(0.1, 1 +
version_select_random_factor × N(0, 1) / n)``. The best version's runtime estimate then comes
from estimate_flops: ``1 / et_avg`` once the host has more than 10 elapsed-time samples (at
most 250 × the projection); else, once the version has more than 100 PFC samples over all
hosts (the validator's CreditNew pass keeps them, backend.daemons.credit), the host's peak
FLOPS for the version over the version's PFC average, so a new host starts from what the
version's hosts reach; else the host's p_fpops × (CPUs + 10 × GPUs). A project without
plan_class_spec.xml describes its versions by their columns (``gpu_type``, ``gpu_usage``,
``avg_ncpus``; the simulated world's), a GPU version's speed then being the GPU's peak
FLOPS × usage until there are statistics; with the file, a version whose plan class it does
not name is never sent, as in BOINC.

The host app version averages: each successful report adds the job's elapsed time per
estimated FLOP to ``et`` (backend.daemons.host_app_version ``learn``); the validator's credit
pass adds its claimed PFC per estimated FLOP to ``pfc`` (backend.daemons.credit get_pfc), both
with BOINC's host app version averaging (sched/credit.cpp get_pfc).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from django.db import connection
from django.db.models import Model, Q

from backend.daemons import sched_shmem
from backend.daemons.claim import placeholders, read_rows
from backend.daemons.host_app_version import jobs_today, scaled_max_jobs_per_day
from backend.daemons.plan_class import CPU, GpuRequirements, HostUsage, HostView, PlanClassSpec, read_plan_class_spec
from backend.models import App, AppVersion, Host, HostAppVersion, Project, Workunit

if TYPE_CHECKING:
    from backend.daemons.sched_send import Resource, Version
    from backend.daemons.sched_types import SchedulerConfig, SchedulerRequest

# (app id, needs 64 bits, pinned version number): a choice get_app_version memoizes
ChoiceKey = tuple[int, bool, int]

# sched_version.cpp and credit.h
ET_RATIO_LIMIT = 250.0
GPU_CPU_RATIO = 10.0
MIN_HOST_SAMPLES = 10
MIN_VERSION_SAMPLES = 100
GIGA = 1024.0**3  # lib/util.h GIGA
# sched_util.cpp PERF_INFO::get_from_db: the defaults while a project has under 10 hosts.
DEFAULT_FPOPS_50 = 3.3e9
DEFAULT_FPOPS_95 = 3.3e9
# The scheduler's own random numbers (BOINC's drand, rand_normal), apart from the callers'.
RNG = random.Random()


@dataclass
class Candidate:
    """A feasible version: its row, how the host runs it and its projected FLOPS."""

    row: AppVersion
    usage: HostUsage


def core_client_version(text: str) -> int:
    """ "8.0.2" -> 80002 (major × 10000 + minor × 100 + release); 0 when not given."""
    parts = [int(p) for p in text.split(".")[:3] if p.strip().isdigit()] if text else []
    parts += [0] * (3 - len(parts))
    return parts[0] * 10000 + parts[1] * 100 + parts[2]


def is_64b_platform(name: str) -> bool:
    return "64" in name


def max_32b_address_space(platform: str) -> float:
    """sched_version.cpp max_32b_address_space: the memory a 32-bit process addresses."""
    for word, limit in (("windows", 2), ("linux", 3), ("darwin", 4), ("solaris", 4)):
        if word in platform:
            return limit * GIGA
    return 2 * GIGA


@lru_cache(maxsize=8)
def plan_classes_at(path: str, mtime: float) -> dict[str, PlanClassSpec]:
    return read_plan_class_spec(Path(path))


def plan_classes(config: SchedulerConfig) -> dict[str, PlanClassSpec]:
    """The project's plan classes (read once per change of the file)."""
    if not config.plan_class_spec:
        return {}
    path = Path(config.plan_class_spec)
    return plan_classes_at(str(path), path.stat().st_mtime)


def perf_percentiles() -> tuple[float, float]:
    """(50th, 95th) percentile of the hosts' p_fpops (PERF_INFO::get_from_db): BOINC's
    defaults under 10 hosts, else over the hosts with expavg_credit above 10; the hosts of
    the current request's project (``sched_shmem.project_id``)."""
    hosts = Host.objects.all()
    project_id = sched_shmem.project_id()
    if project_id is not None:
        hosts = hosts.filter(project_id=project_id)
    if hosts.count() < 10:
        return DEFAULT_FPOPS_50, DEFAULT_FPOPS_95
    values = hosts.filter(expavg_credit__gt=10).order_by("p_fpops")
    n = values.count()
    if not n:
        return DEFAULT_FPOPS_50, DEFAULT_FPOPS_95
    pick = values.values_list("p_fpops", flat=True)
    return pick[int(n * 0.5)], pick[int(n * 0.95)]


def capped_host_fpops(p_fpops: float) -> float:
    """sched_types.cpp capped_host_fpops: the median for an unknown speed, at most 1.1 × the
    95th percentile."""
    median, top = perf_percentiles()
    if p_fpops <= 0:
        return median
    return min(p_fpops, top * 1.1)


def host_view(host: Host, request: SchedulerRequest, resource_ram: float | None) -> HostView:
    """The HostView plan classes are checked against (get_job_limits' effective_ncpus)."""
    from backend.daemons.sched_send import MAX_NCPUS

    return HostView(
        p_fpops=host.p_fpops,
        capped_fpops=capped_host_fpops(host.p_fpops),
        effective_ncpus=min(max(host.p_ncpus, 1), MAX_NCPUS),
        usable_ram=resource_ram,
        p_features=request.host_info.p_features,
        p_model=request.host_info.p_model,
        core_client_version=core_client_version(request.core_client_version),
        user_id=host.owner_id,
        coprocs={g.type: g for g in request.gpu_requests},
    )


class BestVersions:
    """get_app_version for one request and resource, memoized per app and job kind."""

    # set by best_versions: the Version type it makes, and the Version of each
    # (app id, needs 64 bit, version number) asked for
    make: Callable[..., Version]
    variants: dict[ChoiceKey, Version | None]

    def __init__(
        self,
        host: Host,
        request: SchedulerRequest,
        resource: Resource,
        *,
        config: SchedulerConfig,
        havs: Mapping[int, HostAppVersion],
        now: int,
        rows: Mapping[int, Mapping[str, Sequence[AppVersion]]],
        rng: random.Random | None = None,
    ) -> None:
        self.host, self.request, self.resource = host, request, resource
        self.config, self.havs, self.now, self.rng = config, havs, now, rng or RNG
        self.rows = rows  # app id -> platform -> the feeder's versions, in id order
        self.platforms = [request.platform_name, *request.alt_platforms]
        self.specs = plan_classes(config)
        self.view: HostView | None = None
        self.memo: dict[ChoiceKey, tuple[AppVersion, HostUsage] | None] = {}
        self.notices: list[str] | None = None  # the request's no-work messages (a list), when given
        self.pending: list[str] = []  # the messages of the choice being made
        self.key_notices: dict[ChoiceKey, list[str]] = {}
        # the app versions found over their daily quota, by the choice being made and by
        # each choice; ``spent`` (a set shared by the request's choosers) gathers those of
        # the choices a job asked for (host_app_version's daily_quota_exceeded flag)
        self.pending_spent: list[int] = []
        self.key_spent: dict[ChoiceKey, list[int]] = {}
        self.spent: set[int] = set()
        # the GPU plan classes each choice checked on a GPU of their type (GpuRequirements)
        self.pending_gpu: list[PlanClassSpec] = []
        self.key_gpu: dict[ChoiceKey, list[PlanClassSpec]] = {}
        # the request's GpuRequirements (best_versions), which a locality app's choices
        # note when a job asks for them (``used``)
        self.gpu_requirements: dict[str, GpuRequirements] | None = None

    def host_usage(self, row: AppVersion) -> HostUsage | None:
        """How the host runs ``row`` (app_plan), or None when it cannot."""
        if row.plan_class and self.config.plan_class_spec:
            spec = self.specs.get(row.plan_class)
            if spec is None:
                return None  # "Unknown plan class"
            if self.view is None:
                self.view = host_view(self.host, self.request, self.resource.usable_ram)
            return spec.check(self.view, self.rng, self.pending, self.pending_gpu)
        if row.gpu_type:
            # a version described by its columns alone (the simulated world's GPU versions)
            flops = self.resource.flops * row.gpu_usage if self.resource.flops > 0 else row.flops
            return HostUsage(row.gpu_type, row.avg_ncpus, row.gpu_usage, flops, flops)
        usage = HostUsage.sequential_app(self.host.p_fpops)
        if row.avg_ncpus != 1.0:
            usage.avg_ncpus = row.avg_ncpus
            usage.peak_flops = usage.projected_flops = self.host.p_fpops * row.avg_ncpus
        return usage

    def described(self, row: AppVersion) -> bool:
        """Whether ``row``'s plan class comes from plan_class_spec.xml; without the file, a
        version is described by its columns (gpu_type, gpu_usage, avg_ncpus) alone."""
        return bool(row.plan_class and self.config.plan_class_spec)

    def quota_exceeded(self, row: AppVersion, usage: HostUsage) -> bool:
        """sched_version.cpp daily_quota_exceeded: whether the host has had its daily quota
        of ``row`` (scaled by the CPUs or by the GPUs of the version's type, whichever
        resource is being filled); if so, "Daily job limit (n) has been reached" joins the
        choice's messages and the version is marked spent."""
        hav = self.havs.get(row.pk)
        if hav is None or not self.config.daily_result_quota:
            return False
        if usage.proc_type == CPU:
            count, multiplier = self.host.p_ncpus, 0
        else:
            count = next((gpu.count for gpu in self.request.gpu_requests if gpu.type == usage.proc_type), 0)
            multiplier = self.config.gpu_multiplier
        limit = scaled_max_jobs_per_day(hav, count, gpu_multiplier=multiplier)
        if jobs_today(hav, self.now) < limit:
            return False
        text = daily_limit_notice(limit)
        if text not in self.pending:
            self.pending.append(text)
        self.pending_spent.append(row.pk)
        return True

    def choose(
        self, app_id: int, *, needs_64b: bool = False, version_num: int = 0
    ) -> tuple[AppVersion, HostUsage] | None:
        """(row, HostUsage with the runtime estimate's FLOPS) or None; a version whose daily
        quota is used up is returned only when no other is feasible."""
        key = (app_id, needs_64b, version_num)
        if key not in self.memo:
            self.pending, self.pending_spent, self.pending_gpu = [], [], []
            self.memo[key] = self.best(app_id, needs_64b, version_num)
            self.key_notices[key], self.key_spent[key] = self.pending, self.pending_spent
            self.key_gpu[key] = self.pending_gpu
        return self.memo[key]

    def used(self, key: ChoiceKey) -> None:
        """A job asked for choice ``key``: its messages go to the request's, and its
        versions over their daily quota to ``spent``, as BOINC's get_app_version looks at
        versions only for the jobs it is asked about; a locality app's GPU plan classes
        checked go to the request's GpuRequirements."""
        self.spent.update(self.key_spent.get(key, ()))
        if self.gpu_requirements is not None and sched_shmem.apps()[key[0]].locality_scheduling:
            # locality scheduling checks plan classes only for the jobs it looks at
            for spec in self.key_gpu.get(key, ()):
                self.gpu_requirements.setdefault(spec.proc_type, GpuRequirements()).note(spec)
        if self.notices is None:
            return
        for text in self.key_notices.get(key, ()):
            if text not in self.notices:
                self.notices.append(text)

    def best(self, app_id: int, needs_64b: bool, version_num: int) -> tuple[AppVersion, HostUsage] | None:
        best, best_flops, spent = None, 0.0, None
        client = core_client_version(self.request.core_client_version)
        for platform in self.platforms:
            if needs_64b and not is_64b_platform(platform):
                continue
            feasible = False
            for row in self.rows.get(app_id, {}).get(platform, []):
                if version_num and row.version_num != version_num:
                    continue
                if row.beta and not self.request.allow_beta_work:
                    continue
                usage = self.host_usage(row)
                if usage is None:
                    continue
                # get_app_version checks the quota before whether the resource is wanted
                if self.quota_exceeded(row, usage):
                    if usage.proc_type == self.resource.name:
                        spent = spent or (row, usage)
                    continue
                if usage.proc_type != self.resource.name:
                    continue
                if row.min_core_version and client < row.min_core_version:
                    continue
                if row.max_core_version and client > row.max_core_version:
                    continue
                feasible = True
                flops = self.projected(row, usage)
                if flops > best_flops:
                    usage.projected_flops = flops
                    best, best_flops = Candidate(row, usage), flops
            if self.config.prefer_primary_platform and feasible:
                break
        if best is None:
            return spent
        best.usage.projected_flops = self.estimate_flops(best.row, best.usage)
        return best.row, best.usage

    def projected(self, row: AppVersion, usage: HostUsage) -> float:
        """The version's projected FLOPS for the choice, with the random factor."""
        hav = self.havs.get(row.pk)
        n = 1
        if hav is not None:
            n = max(int(hav.pfc_n), 1)
            estimate = self.estimate_flops(row, usage)
            usage.projected_flops = (estimate * (n - 1) + usage.projected_flops) / n
            if hav.pfc_n == 0 and hav.max_jobs_per_day == 1 and hav.consecutive_valid == 0 and self.rng.random() > 0.01:
                usage.projected_flops *= 0.01
        r = 1.0
        if self.config.version_select_random_factor:
            r = max(1.0 + self.config.version_select_random_factor * self.rng.gauss(0, 1) / n, 0.1)
        return r * usage.projected_flops

    def estimate_flops(self, row: AppVersion, usage: HostUsage) -> float:
        """sched_version.cpp estimate_flops: the speed a job's runtime is estimated from."""
        if self.config.rte_no_stats:
            return self.no_stats_flops(row, usage)
        hav = self.havs.get(row.pk)
        if hav is not None and hav.et_n > MIN_HOST_SAMPLES and hav.et_avg > 0:
            if self.config.estimate_flops_from_hav_pfc:
                flops = usage.peak_flops / (hav.pfc_avg + 1e-18)
            else:
                flops = 1.0 / hav.et_avg
            return min(flops, ET_RATIO_LIMIT * usage.projected_flops)
        if row.pfc_n > MIN_VERSION_SAMPLES and row.pfc_avg > 0:
            # the version's PFC average over all hosts: peak FLOPS / (elapsed × peak FLOPS /
            # estimated FLOPs) is the speed the version's hosts reach for their peak
            return usage.peak_flops / row.pfc_avg
        return self.no_stats_flops(row, usage)

    def no_stats_flops(self, row: AppVersion, usage: HostUsage) -> float:
        """estimate_flops without statistics: the conservative p_fpops × (CPUs + 10 × GPUs)."""
        if not self.described(row) and row.gpu_type:
            return usage.peak_flops
        return self.host.p_fpops * (usage.avg_ncpus + GPU_CPU_RATIO * usage.gpu_usage)


def feeder_versions(
    app_ids: Iterable[int] | None, platforms: Sequence[str], *, real_client: bool
) -> dict[int, dict[str, list[AppVersion]]]:
    """app id -> platform -> the versions BOINC's feeder puts in shared memory: not
    deprecated, the newest of each plan class (sched_shmem.cpp), in id order. Read once per
    request (backend.daemons.sched_shmem)."""
    ids = None if app_ids is None else tuple(app_ids)
    key = ("feeder_versions", ids, tuple(platforms), real_client)
    return sched_shmem.kept(key, lambda: read_feeder_versions(ids, platforms, real_client=real_client))


def read_feeder_versions(
    app_ids: Iterable[int] | None, platforms: Sequence[str], *, real_client: bool
) -> dict[int, dict[str, list[AppVersion]]]:
    q = connection.ops.quote_name
    where = [
        "t.deprecated = %s",
        f"t.app_id IN (SELECT a.id FROM {q(App._meta.db_table)} a WHERE a.deprecated = %s)",
        f"t.platform IN ({placeholders(len(platforms))})" if platforms else "1 = 0",
    ]
    params: list[Any] = [False, False, *platforms]
    if sched_shmem.project_id() is not None:
        where.append("t.project_id = %s")
        params.append(sched_shmem.project_id())
    if app_ids is not None:
        app_ids = list(app_ids)
        where.append(f"t.app_id IN ({placeholders(len(app_ids))})" if app_ids else "1 = 0")
        params += app_ids
    if real_client:
        # a real client runs what it downloads: only versions with a main program
        # protocol.AppVersionFile, which this module cannot import (protocol's models import these)
        files = q(cast("type[Model]", AppVersion._meta.get_field("files").related_model)._meta.db_table)
        where.append(f"EXISTS (SELECT 1 FROM {files} f WHERE f.app_version_id = t.id AND f.main_program = %s)")
        params.append(True)
    versions = read_rows(AppVersion, " AND ".join(where), params)
    apps = sched_shmem.apps()
    app = AppVersion._meta.get_field("app")
    for row in versions:
        app.set_cached_value(row, apps[row.app_id])
    newest: dict[tuple[int, str, str], int] = {}
    for row in versions:
        key = (row.app_id, row.platform, row.plan_class)
        newest[key] = max(newest.get(key, 0), row.version_num)
    found: dict[int, dict[str, list[AppVersion]]] = {}
    for row in versions:
        if row.version_num == newest[(row.app_id, row.platform, row.plan_class)]:
            found.setdefault(row.app_id, {}).setdefault(row.platform, []).append(row)
    return found


def job_needs_64b(wu: Workunit, platform: str) -> bool:
    return wu.rsc_memory_bound > max_32b_address_space(platform)


# --- the hooks sched_send calls -------------------------------------------------------------


def best_versions(
    host: Host,
    request: SchedulerRequest,
    resource: Resource,
    *,
    config: SchedulerConfig,
    havs: Mapping[int, HostAppVersion] | None,
    now: int,
    make: Callable[..., Version],
    notices: list[str] | None = None,
    spent: set[int] | None = None,
    gpu_requirements: dict[str, GpuRequirements] | None = None,
) -> dict[int, Version]:
    """app id -> the Version (``make``: sched_send.Version) of each app the host runs best on
    ``resource``; each carries its chooser, for jobs that need another (``job_version``).
    Why a version was not feasible, when BOINC tells the volunteer, goes to ``notices``, and
    the ids of the versions a job found over their daily quota to ``spent``. With
    ``gpu_requirements`` (GPU type -> GpuRequirements, the request's), the GPU plan classes
    checked for the kinds of job each app has unsent are noted there, as BOINC's scan checks
    them for each job of its cache (sched_score.cpp send_work_score_type, get_app_version)."""
    rows = feeder_versions(
        None, [request.platform_name, *request.alt_platforms], real_client=bool(request.core_client_version)
    )
    chooser = BestVersions(host, request, resource, config=config, havs=havs or {}, now=now, rows=rows)
    chooser.make, chooser.variants, chooser.notices = make, {}, notices
    chooser.gpu_requirements = gpu_requirements
    if spent is not None:
        chooser.spent = spent
    found = {}
    for app_id in rows:
        chosen = chooser.choose(app_id)
        if gpu_requirements is not None and not sched_shmem.apps()[app_id].locality_scheduling:
            for needs_64b, number in unsent_job_kinds(app_id, request.platform_name):
                key = (app_id, needs_64b, number)
                chooser.choose(app_id, needs_64b=needs_64b, version_num=number)
                for spec in chooser.key_gpu.get(key, ()):
                    gpu_requirements.setdefault(spec.proc_type, GpuRequirements()).note(spec)
        if chosen is None:
            # its jobs find no version: say why, for the kinds of job it has (a job pinned to
            # a version number never looks at the others' plan classes)
            if sched_shmem.apps()[app_id].locality_scheduling:
                continue  # locality scheduling asks only for the jobs its pass looks at
            ask_for_each_job_kind(chooser, app_id)
        else:
            found[app_id] = version_of(chooser, *chosen)
            chooser.variants[(app_id, False, 0)] = found[app_id]
    return found


def version_of(chooser: BestVersions, row: AppVersion, usage: HostUsage) -> Version:
    from backend.daemons.sched_types import ReplyAppVersion

    gpu = usage.proc_type != CPU
    reply = ReplyAppVersion(
        row.app.name,
        row.version_num,
        row.platform,
        row.plan_class,
        usage.avg_ncpus,
        usage.projected_flops,
        usage.proc_type if gpu else "",
        usage.gpu_usage if gpu else 0.0,
    )
    return chooser.make(
        row, reply, usage.gpu_usage if gpu else usage.avg_ncpus, projected_flops=usage.projected_flops, chooser=chooser
    )


def has_jobs_for(version: Version) -> bool:
    """Whether an unsent job could be sent with ``version``: one not pinned to another version
    number, nor of a workunit committed to an app version under homogeneous app version.
    BOINC's daily limit and plan class messages come from get_app_version looking at the
    versions for a job; a job pinned elsewhere never looks at this one, and a committed one
    looks only at its own (check_homogeneous_app_version)."""
    from backend.models import Result, ServerState

    if version.row is None:
        return True
    return (
        Result.objects.filter(server_state=ServerState.UNSENT, app_id=version.row.app_id)
        .filter(Q(workunit__app_version_num=0) | Q(workunit__app_version_num=version.row.version_num))
        .exclude(app__homogeneous_app_version=True, workunit__app_version__isnull=False)
        .exists()
    )


def unsent_job_kinds(app_id: int, platform: str) -> list[tuple[bool, int]]:
    """The (needs 64 bits, pinned version number) kinds of the app's unsent jobs, as
    get_app_version tells them apart; a workunit committed to an app version (homogeneous
    app version) is left out, as its version is never chosen."""
    from backend.models import Result, ServerState

    unsent = Result.objects.filter(server_state=ServerState.UNSENT, app_id=app_id, workunit__app_version__isnull=True)
    limit = max_32b_address_space(platform)
    return sorted(
        {
            (needs_64b, number)
            for needs_64b, size in (
                (False, Q(workunit__rsc_memory_bound__lte=limit)),
                (True, Q(workunit__rsc_memory_bound__gt=limit)),
            )
            for number in unsent.filter(size).order_by().values_list("workunit__app_version_num", flat=True).distinct()
        }
    )


def daily_limit_notice(limit: int | None) -> str:
    """sched_version.cpp daily_quota_exceeded's no-work message for a scaled limit."""
    return f"Daily job limit ({limit}) has been reached"


def ask_for_job(chooser: BestVersions, app_id: int, wu: Workunit) -> None:
    """The choice of a version for a job of ``wu``, ``used``: what get_app_version looked at
    for it is told of (``BestVersions.used``)."""
    key = (app_id, job_needs_64b(wu, chooser.request.platform_name), getattr(wu, "app_version_num", 0) or 0)
    chooser.choose(app_id, needs_64b=key[1], version_num=key[2])
    chooser.used(key)


def ask_for_each_job_kind(chooser: BestVersions, app_id: int) -> None:
    """The choice of a version for each kind of unsent job the app has (``unsent_job_kinds``),
    each ``used``: BOINC's scan calls get_app_version for every job of its cache, and each
    call tells the volunteer of what it looked at (a version over its daily quota, a plan
    class the host lacks) for that job's kind alone; a job pinned to a version number never
    looks at the versions of another number."""
    for needs_64b, number in unsent_job_kinds(app_id, chooser.request.platform_name):
        chooser.choose(app_id, needs_64b=needs_64b, version_num=number)
        chooser.used((app_id, needs_64b, number))


def job_version(version: Version, wu: Workunit) -> Version | None:
    """The Version a job of ``wu`` is sent with: ``version`` (the app's best), or for a
    workunit pinned to an ``app_version_num`` or needing a 64-bit address space, the best
    version for it (get_app_version memoizes per app and 64-bit need); None when none."""
    chooser = version.chooser
    if chooser is None:
        return version
    needs_64b = job_needs_64b(wu, chooser.request.platform_name)
    number = getattr(wu, "app_version_num", 0) or 0
    # a version with a chooser has a row here: callers pass no committed-only one (no row)
    app_id = cast(AppVersion, version.row).app_id
    key = (app_id, needs_64b, number)
    chooser.used(key)
    if not needs_64b and not number:
        return version
    if key not in chooser.variants:
        chosen = chooser.choose(app_id, needs_64b=needs_64b, version_num=number)
        chooser.used(key)
        default = chooser.variants.get((app_id, False, 0))
        if chosen is None:
            chooser.variants[key] = None
        elif default is not None and chosen[0].pk == cast(AppVersion, default.row).pk:
            chooser.variants[key] = default
        else:
            from backend.daemons.sched_send import apply_daily_quota

            variant = version_of(chooser, *chosen)
            apply_daily_quota(
                {app_id: variant},
                chooser.havs,
                chooser.resource,
                now=chooser.now,
                quota=chooser.config.daily_result_quota,
                gpu_multiplier=chooser.config.gpu_multiplier,
            )
            chooser.variants[key] = variant
    return chooser.variants[key]


# --- what the project pages show ------------------------------------------------------------


def runtime_estimates(
    host: Host, limit: int = 200, havs: Iterable[HostAppVersion] = ()
) -> list[tuple[str, list[tuple[int, float, float]], tuple[int, float] | None]]:
    """[(app version label, [(sent_time, estimated runtime, reported runtime)], now)] of
    ``host``'s last ``limit`` successful jobs, oldest first: the estimate is the job's
    estimated FLOPs over the FLOPS it was sent with (``flops_estimate``). ``now`` is, once the
    host's record of the version (one of ``havs``) has more than 10 runtimes, the estimate
    estimate_flops makes of the version's next job of the last one's size from their average
    (``(rpc_time, seconds)``), else None: a version the scheduler stopped sending shows its
    learnt estimate too."""
    from backend.models import Outcome, Result

    rows = list(
        Result.objects.filter(host=host, outcome=Outcome.SUCCESS, flops_estimate__gt=0, app_version__isnull=False)
        .select_related("app_version__app")
        .only(
            "sent_time",
            "elapsed_time",
            "flops_estimate",
            "workunit__rsc_fpops_est",
            "app_version__version_num",
            "app_version__platform",
            "app_version__plan_class",
            "app_version__app__name",
        )
        .select_related("workunit")
        .order_by("-sent_time", "-id")[:limit]
    )
    series: dict[str, list[tuple[int, float, float]]] = {}
    last_fpops: dict[str, float] = {}
    for r in reversed(rows):
        label = str(r.app_version)
        series.setdefault(label, []).append((r.sent_time, r.workunit.rsc_fpops_est / r.flops_estimate, r.elapsed_time))
        last_fpops[label] = r.workunit.rsc_fpops_est
    learnt: dict[str, tuple[int, float]] = {}
    for hav in havs:
        label = str(hav.app_version)
        if label in last_fpops and hav.et_n > MIN_HOST_SAMPLES and hav.et_avg > 0:
            learnt[label] = (host.rpc_time or series[label][-1][0], last_fpops[label] * hav.et_avg)
    return [(label, points, learnt.get(label)) for label, points in sorted(series.items())]


def app_version_table(config: SchedulerConfig, project: Project) -> dict[str, Any]:
    """``project``'s app versions as the scheduler sees them, each with its plan class's
    settings from plan_class_spec.xml (or why it has none), for the status page."""
    try:
        specs = plan_classes(config)
        problem = ""
    except (OSError, ValueError) as error:
        specs, problem = {}, str(error)
    rows = []
    versions = AppVersion.objects.filter(project=project).select_related("app")
    for av in versions.order_by("app__name", "platform", "plan_class", "-version_num"):
        if not av.plan_class:
            plan = "sequential CPU app"
        elif not config.plan_class_spec:
            plan = "described by the version's columns (no plan_class_spec.xml)"
        elif av.plan_class in specs:
            settings = specs[av.plan_class].describe()
            plan = ", ".join(f"{k} {v}" for k, v in settings.items()) or "BOINC's defaults"
        else:
            plan = "not in plan_class_spec.xml: never sent"
        rows.append({"version": av, "plan": plan})
    return {"rows": rows, "spec": config.plan_class_spec, "problem": problem}
