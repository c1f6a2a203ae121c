"""The work generator (reference/server.md §3.1: create_work and sample_work_generator).

``create_work`` makes workunits with BOINC's parameters (min_quorum, target_nresults,
max_error_results, max_total_results, max_success_results, delay_bound, priority,
rsc_fpops_est, ...), checked as create_work2 checks them, each with its input file written to the
download directory, and ``transition_time = now``.

It follows BOINC's code rather than the seed's pseudo-code (§4): create_work makes **no
results**; the transitioner creates the first ``target_nresults`` instances on its next pass
(§3.2 step 6), named ``<workunit>_<n>``.

``run_once`` is sample_work_generator's loop body: for each app with ``unsent_target > 0`` it
counts unsent results (``server_state <= UNSENT``) and, below the target, makes enough
workunits to fill it. Like BOINC's generator it does nothing for an app while any of its
workunits still waits for its first results, so it never over-generates. Passes for one app are
serialised by a lock on the app's row; ``--mod n i`` splits the apps between instances.

``create_work_for_file`` makes workunits on demand for one existing input file (locality
scheduling, §3.10), named ``<file name>__<rest>`` as locality scheduling expects.
"""

import hashlib
import random
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext

from django.db import transaction
from django.db.models import QuerySet

from backend.daemons.claim import insert_new, shard
from backend.daemons.hierarchy import new_files_written, project_dir
from backend.events import event
from backend.models import App, File, FileDeleteState, LifecycleEvent, Project, ServerState, Workunit

ACTOR = "work_generator"

PARAMETERS = (
    "min_quorum",
    "target_nresults",
    "max_error_results",
    "max_total_results",
    "max_success_results",
    "delay_bound",
    "rsc_fpops_est",
    "rsc_fpops_bound",
)
INPUT_NBYTES = 1024
LOCALITY_SEPARATOR = "__"  # workunit names are FILENAME__<rest> (seed 004)


class CreateWorkError(ValueError):
    """Parameters create_work refuses (reference/server.md §1.7)."""


def work_parameters(app: App, overrides: Mapping[str, float]) -> dict[str, float]:
    """The app's defaults with ``overrides``, checked as create_work2 checks them."""
    unknown = (
        set(overrides)
        - set(PARAMETERS)
        - {"priority", "rsc_memory_bound", "rsc_disk_bound", "rsc_bandwidth_bound", "batch", "transitioner_flags"}
    )
    if unknown:
        raise CreateWorkError(f"unknown workunit parameter(s): {', '.join(sorted(unknown))}")
    params = {name: getattr(app, name) for name in PARAMETERS}
    params.update(overrides)
    for name in (
        "rsc_fpops_est",
        "rsc_fpops_bound",
        "target_nresults",
        "max_error_results",
        "max_total_results",
        "max_success_results",
        "min_quorum",
        "delay_bound",
    ):
        if not params[name] or params[name] < 0:
            raise CreateWorkError(f"{name} must be positive, not {params[name]!r}")
    if params.get("rsc_disk_bound", 1) <= 0:
        raise CreateWorkError("rsc_disk_bound must be positive")
    if params.get("rsc_bandwidth_bound", 0) < 0:
        raise CreateWorkError("rsc_bandwidth_bound must not be negative")
    if params["max_success_results"] > params["max_total_results"]:
        raise CreateWorkError("max_success_results must not exceed max_total_results")
    if params["max_error_results"] > params["max_total_results"]:
        raise CreateWorkError("max_error_results must not exceed max_total_results")
    if params["target_nresults"] > params["max_success_results"]:
        raise CreateWorkError("target_nresults must not exceed max_success_results")
    if params["min_quorum"] > params["target_nresults"]:
        raise CreateWorkError("min_quorum must not exceed target_nresults")
    return params


def input_data(wu_name: str, nbytes: int = INPUT_NBYTES) -> bytes:
    """The default input: ``nbytes`` of numbers that depend only on the workunit's name."""
    rng = random.Random(wu_name)
    text = "".join(f"{rng.random():.12f}\n" for _ in range(nbytes // 15 + 1))
    return text.encode()[:nbytes]


def create_work(
    app: App,
    names: Iterable[str],
    *,
    now: int,
    inputs: Callable[[str], bytes] | None = None,
    shared_input: File | None = None,
    **overrides: float,
) -> QuerySet[Workunit]:
    """Create one workunit per name, with its input file; return them (a QuerySet, in the
    order of ``names``, read when used).

    ``inputs(name) -> bytes`` gives each workunit's own input (default ``input_data``);
    ``shared_input`` is an existing File every workunit reads instead (locality scheduling).
    """
    params = work_parameters(app, overrides)
    names = list(names)
    # the inputs are written while the rows are inserted; the transaction commits after both
    inputs_written: AbstractContextManager[None] = nullcontext()
    if shared_input is None:
        make = inputs or input_data
        contents = [make(name) for name in names]
        inputs_written = new_files_written(
            project_dir(app.project, "download"), [(f"{name}.in", data) for name, data in zip(names, contents)]
        )
    with transaction.atomic(), inputs_written:
        wu_ids = insert_new(
            Workunit,
            dict(project_id=app.project_id, app_id=app.pk, create_time=now, transition_time=now, **params),
            dict(name=names),
        )
        if shared_input is not None:
            file_ids = [shared_input.pk] * len(wu_ids)
        else:
            file_ids = insert_new(
                File,
                dict(project_id=app.project_id, kind=File.Kind.INPUT),
                dict(
                    name=[f"{name}.in" for name in names],
                    nbytes=[len(data) for data in contents],
                    md5_cksum=[hashlib.md5(data).hexdigest() for data in contents],
                ),
            )
        insert_new(Workunit.input_files.through, {}, dict(workunit_id=wu_ids, file_id=file_ids), ids=False)
        # a "workunit created" event each: events.event's row, its workunit the one column that varies
        created = event(time=now, actor=ACTOR, field="transition_time", old=None, new=now, reason="workunit created")
        shared = {name: value for name, value in created._asdict().items() if name != "workunit_id"}
        insert_new(LifecycleEvent, dict(project_id=app.project_id, **shared), dict(workunit_id=wu_ids), ids=False)
    return Workunit.objects.filter(id__in=wu_ids).order_by("id")


def next_names(prefix: str, count: int, now: int) -> list[str]:
    """``count`` fresh names ``<prefix>_<now>_<k>``; call with the app's row locked."""
    stem = f"{prefix}_{now}_"
    start = Workunit.objects.filter(name__startswith=stem).count()
    return [f"{stem}{start + k}" for k in range(count)]


def create_work_for_file(
    app: App, input_file: File, *, now: int, count: int = 1, **overrides: float
) -> QuerySet[Workunit]:
    """Workunits for one existing input file, on demand (locality scheduling, §3.10).

    The file's name may not contain ``__`` (seed 004): the workunits are named
    ``<file name>__<rest>`` and the scheduler reads the file's name up to the first ``__``.
    """
    if LOCALITY_SEPARATOR in input_file.name:
        raise CreateWorkError(
            f"input file name {input_file.name!r} contains "
            f"{LOCALITY_SEPARATOR!r}, which locality scheduling reserves "
            "to end the file's name in its workunits' names"
        )
    if input_file.kind != File.Kind.INPUT or input_file.file_delete_state != FileDeleteState.INIT:
        raise CreateWorkError(f"{input_file.name} is not a live input file")
    with transaction.atomic():
        App.objects.select_for_update().filter(pk=app.pk).exists()
        names = next_names(f"{input_file.name}{LOCALITY_SEPARATOR}{app.name}", count, now)
        # overrides are workunit parameters, never inputs, though mypy matches them to every keyword
        return create_work(app, names, now=now, shared_input=input_file, **overrides)  # type: ignore[arg-type]


def waiting_for_first_results(app: App) -> bool:
    """Whether some workunit of ``app`` without an error has no results yet (the transitioner
    hasn't run). Only the workunits still ``awaiting_results`` can have none, so the query
    reads those few (wu_awaiting_results), not every workunit the app ever had."""
    return Workunit.objects.filter(app=app, awaiting_results=True, error_mask=0, results__isnull=True).exists()


def generate(app: App, *, now: int, batch_size: int) -> int:
    """Top up ``app``'s unsent results to its ``unsent_target``; returns workunits made."""
    with transaction.atomic():
        App.objects.select_for_update().filter(pk=app.pk).exists()
        if waiting_for_first_results(app):
            return 0
        unsent = app.results.filter(server_state__lte=ServerState.UNSENT).count()
        missing = app.unsent_target - unsent
        if missing <= 0:
            return 0
        count = min(-(-missing // app.target_nresults), batch_size)
        create_work(app, next_names(app.name, count, now), now=now)
        return count


def run_once(*, project: Project, now: int, batch_size: int, mod: int = 1, index: int = 0) -> int:
    """Top up each of ``project``'s apps (``generate``); returns workunits made."""
    apps = shard(project.apps.filter(deprecated=False, unsent_target__gt=0), mod, index)
    return sum(generate(app, now=now, batch_size=batch_size) for app in apps)
