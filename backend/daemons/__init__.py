"""The registry of back-end daemons.

Each daemon module exposes ``run_once(*, project, now, batch_size, mod=1, index=0) -> int``:
one pass over at most ``batch_size`` items of one project, returning the work done (0 when it
found nothing); it touches no row of another project. ``now``
is Unix seconds, passed by the caller (a world's simulated clock or the wall clock); daemons
never read the clock. ``mod``/``index`` restrict a pass to ids with ``id % mod == index``, as
BOINC's ``--mod n i`` does (reference/server.md §3), so several instances can split the work;
every pass is also safe to run twice at once without a split.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import F
from django.utils import timezone

if TYPE_CHECKING:
    from backend.daemons.sched_types import SchedulerConfig
    from backend.models import Project

# name -> module; the order is the order of one full round of passes.
DAEMONS = {
    "transitioner": "backend.daemons.transitioner",
    "validator": "backend.daemons.validator",
    "assimilator": "backend.daemons.assimilator",
    "file_deleter": "backend.daemons.file_deleter",
    "work_generator": "backend.daemons.work_generator",
    "update_stats": "backend.daemons.update_stats",
}
# The project options (SchedulerConfig fields) each daemon's run_once takes: the host app
# versions' daily quota (reference/server.md §3.11), as the scheduler endpoint has it, and
# the transitioner's choice of outputs to delete.
DAEMON_OPTIONS = {
    "transitioner": (
        "daily_result_quota",
        "delete_abandoned_outputs",
        "hr_class_static",
        "reliable_priority_on_over",
        "reliable_priority_on_over_except_error",
    ),
    "validator": (
        "daily_result_quota",
        "keep_due_workunits",
        "credit_from_wu",
        "credit_from_runtime",
        "no_credit",
        "max_granted_credit",
        "credit_by_app",
        "hav_last_copy_wins",
    ),
    "assimilator": ("keep_due_workunits",),
}


class UnknownDaemon(ValueError):
    pass


def daemon_names() -> list[str]:
    return list(DAEMONS)


def get_daemon(name: str) -> Callable[..., int]:
    """The ``run_once`` function of the daemon called ``name``."""
    try:
        module_path = DAEMONS[name]
    except KeyError:
        raise UnknownDaemon(f"unknown daemon {name!r}; choose one of: {', '.join(DAEMONS)}") from None
    return importlib.import_module(module_path).run_once


def run_pass(
    name: str,
    *,
    project: Project,
    now: int | None = None,
    batch_size: int | None = None,
    mod: int = 1,
    index: int = 0,
    config: SchedulerConfig | None = None,
) -> int:
    """Run one pass of daemon ``name`` over ``project`` and record it in the project's
    DaemonStatus; return the work done.

    ``now`` defaults to the project's clock (``Project.now``: the wall clock of a live
    project, this is where it is read on behalf of callers that run the daemons in real time).
    ``config`` (a SchedulerConfig) defaults to the project's (``Project.scheduler_config``).
    """
    from backend.models import DaemonStatus

    run_once = get_daemon(name)
    if now is None:
        now = project.now()
    if batch_size is None:
        batch_size = settings.DAEMON_BATCH_SIZE
    status, _ = DaemonStatus.objects.get_or_create(project=project, name=name)
    if not status.enabled:
        return 0
    if config is None and name in DAEMON_OPTIONS:
        config = project.scheduler_config()
    options = {option: getattr(config, option) for option in DAEMON_OPTIONS.get(name, ())}
    done = run_once(project=project, now=now, batch_size=batch_size, mod=mod, index=index, **options)
    DaemonStatus.objects.filter(pk=status.pk).update(
        last_pass_time=timezone.now(),
        last_work_done=done,
        total_work_done=F("total_work_done") + done,
        passes=F("passes") + 1,
    )
    return done
