"""Reliable hosts (reference/server.md §3.11 "Reliable hosts", §3.2 step 6, §3.4).

A project that needs some jobs back fast gives them a priority of at least
``<reliable_on_priority>`` (the feeder marks them ``need_reliable``); such a job goes only with
an app version this host is *reliable* for, and, with ``<reliable_reduced_delay_bound>`` F
(above 0.01), with a deadline of F × its delay bound, raised to twice its estimated duration on
the host when that is longer yet still under both the delay bound and 2F × it; if the job
cannot meet the shortened deadline, the full delay bound is tried (sched_check.cpp
get_delay_bound_range and wu_is_infeasible_fast).

A host app version is reliable (sched_send.cpp get_reliability_version) when its average
turnaround, once it has more than 10 samples, is within ``<reliable_max_avg_turnaround>``
seconds (× 1.8 on an OS other than Windows, Linux or an Intel Darwin), its
``consecutive_valid`` is at least 10, and, with a daily quota, its ``max_jobs_per_day`` has
reached ``daily_result_quota``. A version the host has no record of is not reliable.

The transitioner raises the priority of the results it makes for a workunit that already has
results over (transitioner.cpp): by ``<reliable_priority_on_over>``, or, when none of them is
an error, by ``<reliable_priority_on_over_except_error>``; so retries of late or failed jobs
can be routed to reliable hosts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from django.db.models import Q

from backend.daemons.hr import DARWIN, LINUX, WINDOWS, os_code

if TYPE_CHECKING:
    from backend.daemons.sched_send import Version
    from backend.daemons.sched_types import SchedulerConfig, SchedulerRequest
    from backend.daemons.transitioner import Changes
    from backend.models import Host, HostAppVersion, Workunit

# sched_send.cpp: samples before the turnaround counts, and valid results in a row.
MIN_HOST_SAMPLES = 10
CONS_VALID_RELIABLE = 10


def need_reliable(priority: int, config: SchedulerConfig) -> bool:
    """The feeder's need_reliable: a job of priority at least ``reliable_on_priority``."""
    return bool(config.reliable_on_priority) and priority >= config.reliable_on_priority


def turnaround_multiplier(os_name: str, vendor: str) -> float:
    """1 on Windows, Linux and Darwin on anything but a Power Macintosh; 1.8 elsewhere
    ("platforms other than Windows, Linux and Intel Macs need a larger set of computers")."""
    system = os_code(os_name)
    if system in (WINDOWS, LINUX) or (system == DARWIN and "Power Macintosh" not in vendor):
        return 1.0
    return 1.8


def is_reliable(hav: HostAppVersion | None, config: SchedulerConfig, multiplier: float) -> bool:
    """sched_send.cpp get_reliability_version for one host app version (None: no record)."""
    if hav is None:
        return False
    if (
        hav.turnaround_n > MIN_HOST_SAMPLES
        and config.reliable_max_avg_turnaround
        and hav.turnaround_avg > config.reliable_max_avg_turnaround * multiplier
    ):
        return False
    if hav.consecutive_valid < CONS_VALID_RELIABLE:
        return False
    if config.daily_result_quota and hav.max_jobs_per_day < config.daily_result_quota:
        return False
    return True


def delay_bounds(wu: Workunit, priority: int, duration: float, config: SchedulerConfig) -> tuple[int, ...]:
    """The delay bounds to try for a job, first the one it is given if it passes the
    deadline check (sched_check.cpp get_delay_bound_range: (opt, pess)); ``duration`` is its
    estimated wall time on this host."""
    full = wu.delay_bound
    if not (need_reliable(priority, config) and config.reliable_reduced_delay_bound > 0.01):
        return (full,)
    reduced = full * config.reliable_reduced_delay_bound
    if 2 * duration > reduced and 2 * duration < full and 2 * duration < 2 * reduced:
        reduced = 2 * duration
    reduced = int(reduced)
    return (reduced, full) if reduced != full else (full,)


def retry_priority_boost(nover: int, nerrors: int, config: SchedulerConfig | Changes) -> int:
    """transitioner.cpp: what a new result's priority gains over its workunit's."""
    if nover and config.reliable_priority_on_over:
        return config.reliable_priority_on_over
    if nover and not nerrors and config.reliable_priority_on_over_except_error:
        return config.reliable_priority_on_over_except_error
    return 0


class Reliability:
    """One request's view of which of the host's app versions are reliable."""

    def __init__(
        self, host: Host, request: SchedulerRequest, havs: Mapping[int, HostAppVersion], config: SchedulerConfig
    ) -> None:
        self.config, self.havs = config, havs
        info = request.host_info
        self.multiplier = turnaround_multiplier(info.os_name or host.os_name, info.p_vendor)

    def reliable(self, version: Version) -> bool:
        hav = self.havs.get(version.row.pk) if version.row is not None else None
        return is_reliable(hav, self.config, self.multiplier)

    def feasible(self, version: Version) -> Q:
        """A Q on results: those ``refuses`` lets go with ``version``."""
        if not self.config.reliable_on_priority or self.reliable(version):
            return Q()
        return Q(priority__lt=self.config.reliable_on_priority)

    def refuses(self, priority: int, version: Version, committed: bool = False) -> bool:
        """Whether a job of ``priority`` that needs a reliable host must not go with
        ``version`` (sched_score.cpp JOB::get_score); ``committed``: its workunit is committed
        to ``version`` (homogeneous app version), which BOINC's code never counts reliable
        (SchedulerConfig.boinc_committed_never_reliable, BOINC defect 4)."""
        if not need_reliable(priority, self.config):
            return False
        if committed and self.config.boinc_committed_never_reliable:
            return True
        return not self.reliable(version)
