"""Job limits: how many jobs a host may have in progress, and the other caps of a request
(reference/server.md §3.4 "Limits", §3.5; BOINC's sched/sched_limit.cpp, sched_config.cpp,
sched_send.cpp work_needed, handle_request.cpp).

- ``<max_wus_in_progress>`` N: at most N jobs in progress per CPU; ``<max_wus_in_progress_gpu>``
  N: at most N per GPU of each type (sched_config.cpp: both are project-wide limits scaled by
  the host's processors).
- ``<max_jobs_in_progress>`` in BOINC's config_aux.xml (the job limits file,
  ``read_job_limits``): for the project and for each app by name, a ``<total_limit>``, a
  ``<cpu_limit>`` and a ``<gpu_limit>``, each ``<jobs>`` N, scaled by the host's CPUs (or GPUs)
  with ``<per_proc/>``. A project limit given there replaces the one config.xml gives.
- The jobs a host has in progress are those it lists in ``<other_results>`` (send_work_setup);
  as in BOINC, a job in progress counts against the project's limits by its processor type,
  and against an app's limits only once it is sent in this request (BOINC knows a listed job's
  app only from an anonymous-platform client's app versions, which our request does not
  relate to its jobs).
- When a project limit is reached for a processor type before anything is sent, that type
  asks for nothing more (work_needed); when it is reached for every type, the reply says
  "This computer has reached a limit on tasks in progress". During sending, a job whose app
  is at its limit is skipped (send_work_score_type); once the project's limit for the type is
  reached, the type stops.
- ``<min_sendwork_interval>`` S: a host that asked less than S seconds ago is sent no work,
  told how long to wait, and asked to wait 1.01 × S (handle_request.cpp).
- ``<report_max>`` N: only the first N reported results are handled or acked
  (sched_result.cpp), and lost results are not resent in that request.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from backend.models import Host, Result

if TYPE_CHECKING:
    from pathlib import Path
    from xml.etree.ElementTree import Element

    from backend.daemons.sched_types import SchedulerConfig, SchedulerRequest

CPU = "cpu"
TOTAL = "total"


@dataclass(frozen=True)
class RscLimit:
    """RSC_JOB_LIMIT: at most ``jobs`` (0: no limit), times the processors with ``per_proc``."""

    jobs: int = 0
    per_proc: bool = False

    def scaled(self, nprocs: int) -> int:
        return self.jobs * nprocs if self.per_proc else self.jobs


@dataclass(frozen=True)
class JobLimit:
    """JOB_LIMIT: the limits of the project or of one app."""

    total: RscLimit = RscLimit()
    cpu: RscLimit = RscLimit()
    gpu: RscLimit = RscLimit()

    def of(self, kind: str) -> RscLimit:
        return {TOTAL: self.total, CPU: self.cpu}.get(kind, self.gpu)

    def any_limit(self) -> bool:
        return any(limit.jobs for limit in (self.total, self.cpu, self.gpu))


@dataclass(frozen=True)
class JobLimits:
    """JOB_LIMITS: the project's limits and each app's (``apps``: (app name, JobLimit)
    pairs, so the object stays hashable inside the frozen SchedulerConfig)."""

    project: JobLimit = JobLimit()
    apps: tuple[tuple[str, JobLimit], ...] = ()

    def app(self, name: str) -> JobLimit | None:
        return dict(self.apps).get(name)


class JobLimitsError(ValueError):
    """A job limits file that cannot be read; the message names the element."""


def parse_rsc_limit(element: Element) -> RscLimit:
    jobs, per_proc = 0, False
    for child in element:
        text = (child.text or "").strip()
        if child.tag == "jobs":
            try:
                jobs = int(text)
            except ValueError:
                raise JobLimitsError(f"<{element.tag}><jobs> must be a whole number, not {text!r}") from None
            if jobs < 0:
                raise JobLimitsError(f"<{element.tag}><jobs> must not be negative")
        elif child.tag == "per_proc":
            per_proc = text != "0"
    return RscLimit(jobs, per_proc)


def parse_job_limit(element: Element) -> JobLimit:
    limits: dict[str, RscLimit] = {}
    for child in element:
        if child.tag in ("total_limit", "cpu_limit", "gpu_limit"):
            limits[child.tag.removesuffix("_limit")] = parse_rsc_limit(child)
    return JobLimit(**limits)


def read_job_limits(source: Path | str) -> JobLimits:
    """JobLimits from BOINC's config_aux.xml (a path or its text): the
    ``<max_jobs_in_progress>`` element, with ``<project>`` and ``<app>`` (``<app_name>``)
    children (sched_limit.cpp JOB_LIMITS::parse). An ``<app>`` without a name is ignored, as
    BOINC does; a file without the element has no limits. Raises JobLimitsError."""
    from backend.server_config import xml_root

    root = xml_root(source, "the job limits file", JobLimitsError)
    element = root if root.tag == "max_jobs_in_progress" else root.find(".//max_jobs_in_progress")
    if element is None:
        return JobLimits()
    project, apps = JobLimit(), []
    for child in element:
        if child.tag == "project":
            project = parse_job_limit(child)
        elif child.tag == "app":
            name = (child.findtext("app_name") or "").strip()
            if name:
                apps.append((name, parse_job_limit(child)))
    return JobLimits(project, tuple(apps))


def project_job_limits(config: SchedulerConfig) -> JobLimits:
    """The JobLimits in force: ``config.job_limits`` over the project limits that
    ``max_wus_in_progress`` (per CPU) and ``max_wus_in_progress_gpu`` (per GPU) set
    (sched_config.cpp; config_aux.xml is read after config.xml)."""
    limits = config.job_limits or JobLimits()
    aux = limits.project
    per_cpu, per_gpu = config.max_wus_in_progress, config.max_wus_in_progress_gpu
    project = JobLimit(
        total=aux.total,
        cpu=aux.cpu if aux.cpu.jobs else RscLimit(per_cpu, True) if per_cpu else RscLimit(),
        gpu=aux.gpu if aux.gpu.jobs else RscLimit(per_gpu, True) if per_gpu else RscLimit(),
    )
    return replace(limits, project=project)


class InProgress:
    """One request's count of the host's jobs in progress against the job limits
    (JOB_LIMITS::reset, register_job, exceeded), per processor type (``cpu`` or a GPU type)
    and app name."""

    def __init__(self, limits: JobLimits, instances: dict[str, int]) -> None:
        self.limits, self.instances = limits, instances
        self.project: dict[str, int] = {}
        self.apps: dict[str, dict[str, int]] = {}

    def active(self) -> bool:
        return self.limits.project.any_limit() or any(limit.any_limit() for _, limit in self.limits.apps)

    def _exceeded(self, limit: JobLimit | None, counts: dict[str, int], kind: str) -> bool:
        if limit is None:
            return False
        checks = (
            (limit.total, counts.get(TOTAL, 0), 1),
            (limit.of(kind), counts.get(kind, 0), self.instances.get(kind, 0)),
        )
        # RSC_JOB_LIMIT::exceeded: a limit that scales to 0 (no such processor) is none
        return any(rsc.scaled(n) and count >= rsc.scaled(n) for rsc, count, n in checks)

    def project_exceeded(self, kind: str) -> bool:
        return self._exceeded(self.limits.project, self.project, kind)

    def app_exceeded(self, app_name: str, kind: str) -> bool:
        return self._exceeded(self.limits.app(app_name), self.apps.get(app_name, {}), kind)

    def register(self, app_name: str | None, kind: str) -> None:
        for counts in (self.project, self.apps.setdefault(app_name, {}) if app_name else {}):
            counts[TOTAL] = counts.get(TOTAL, 0) + 1
            counts[kind] = counts.get(kind, 0) + 1


def jobs_in_progress(host: Host, request: SchedulerRequest, config: SchedulerConfig) -> InProgress:
    """An InProgress for this request: the limits in force, the host's processors (CPUs as
    get_job_limits counts them, GPUs per type), and the jobs it lists as on board, each by the
    processor type of the app version it was sent with (CPU when unknown)."""
    from backend.daemons.sched_send import MAX_NCPUS

    instances = {CPU: min(max(host.p_ncpus, 1), MAX_NCPUS)}
    for gpu in request.gpu_requests:
        if gpu.count > 0:
            instances[gpu.type] = gpu.count
    counter = InProgress(project_job_limits(config), instances)
    if counter.active() and request.other_results:
        kinds = dict(Result.objects.filter(name__in=request.other_results).values_list("name", "app_version__gpu_type"))
        for name in request.other_results:
            counter.register(None, kinds.get(name) or CPU)
    return counter


def truncate_reports(request: SchedulerRequest, config: SchedulerConfig) -> tuple[SchedulerRequest, bool]:
    """``(request, truncated)``: the request with the reported results the scheduler handles,
    and whether lost results must wait for another request (reference/server.md §3.5, §3.6).

    ``max_results_accepted`` drops the results past it as the request is read
    (sched_types.cpp SCHEDULER_REQUEST::parse) and sets BOINC's ``results_truncated``, which
    stops the resend of lost results; ``report_max`` then keeps the first results of those
    (sched_result.cpp handle_results) and stops nothing."""
    results = request.results
    truncated = bool(config.max_results_accepted) and len(results) > config.max_results_accepted
    if truncated:
        results = results[: config.max_results_accepted]
    if config.report_max and len(results) > config.report_max:
        results = results[: config.report_max]
    if len(results) == len(request.results):
        return request, False
    return replace(request, results=results), truncated


def too_soon(last_rpc_time: float, now: float, config: SchedulerConfig) -> int | None:
    """The seconds the host is told to wait when its previous request was less than
    ``min_sendwork_interval`` ago (handle_request.cpp), else None.

    BOINC measures the time since with dtime(), a fraction of a second past the request's
    whole second, and truncates what is left: a second less than the whole seconds left,
    and 0 in the last second."""
    if not config.min_sendwork_interval:
        return None
    diff = now - last_rpc_time
    if diff < config.min_sendwork_interval:
        return max(int(config.min_sendwork_interval - diff) - 1, 0)
    return None


def min_request_delay(config: SchedulerConfig) -> float:
    """The least request_delay of every reply when ``min_sendwork_interval`` is set: 1 %
    more than the interval, and at least a second more (sched_types.cpp
    SCHEDULER_REPLY::write), for clocks that run a little fast."""
    interval = config.min_sendwork_interval
    return max(1.01 * interval, interval + 1) if interval else 0.0
