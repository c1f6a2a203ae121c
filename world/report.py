"""A world's figures and invariant checks, read from the database (the `world --json` contract
of DESIGN.md: ``workunits``, ``results``, ``bytes_downloaded``, ``invariants``,
``simulated_seconds``, plus credit, turnaround, throughput and outcome percentages).

The invariants are the ones DESIGN.md's testing section names for the daemons
(reference/server.md §3.2–§3.9), checked over the world's app, and locality scheduling's
ordering rule (§3.10).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from django.db.models import Count, F, IntegerChoices, QuerySet, Sum

from backend.daemons.sched_locality import file_name_of
from backend.models import (
    AssimilateState,
    ErrorMask,
    File,
    FileDeleteState,
    Host,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from world.engine_host import engine_figures

if TYPE_CHECKING:
    from world.simulation import Simulation


def counts(queryset: QuerySet[Any], field: str, enum: type[IntegerChoices]) -> dict[str, int]:
    rows = queryset.values_list(field).annotate(n=Count("id")).order_by(field)
    return {enum(value).name: n for value, n in rows}


def world_work(sim: Simulation) -> tuple[QuerySet[Workunit], QuerySet[Result]]:
    """The world's workunits and results: its project's, of its app (a live world's project is
    its app's, which holds the project's other work too)."""
    rows = {"project_id": sim.project_id, "app_id": sim.app_id}
    return Workunit.objects.filter(**rows), Result.objects.filter(**rows)


def summary(sim: Simulation) -> dict[str, Any]:
    """The world's figures as one JSON-ready dict, from its project's rows."""
    wus, results = world_work(sim)
    n_wus = wus.count()
    errored = wus.exclude(error_mask=0).count()
    error_bits: Counter[str] = Counter()
    for mask in wus.exclude(error_mask=0).values_list("error_mask", flat=True):
        error_bits.update(ErrorMask.names(mask))
    over = results.filter(server_state=ServerState.OVER)
    outcome = counts(over, "outcome", Outcome)
    n_over = sum(outcome.values())
    turnarounds = sorted(
        received - sent
        for sent, received in results.filter(outcome=Outcome.SUCCESS, received_time__gt=0).values_list(
            "sent_time", "received_time"
        )
    )
    credit = results.aggregate(total=Sum("granted_credit"))["total"] or 0.0
    simulated = sim.finished_at if sim.finished_at is not None else sim.t
    work_days = min(simulated, sim.work_end) / 86400 or 1.0
    per_file_host = results_per_file_per_host(results)
    c = sim.counters
    return {
        "seed": sim.settings.seed,
        "hosts": sim.settings.hosts,
        "days": sim.settings.days,
        "locality": sim.settings.locality,
        "workunits": {
            "total": n_wus,
            "assimilated": wus.filter(assimilate_state=AssimilateState.DONE).count(),
            "with_canonical_result": wus.filter(canonical_result__isnull=False).count(),
            "errored": errored,
            "error_mask": dict(sorted(error_bits.items())),
            "assimilate_state": counts(wus, "assimilate_state", AssimilateState),
            "file_delete_state": counts(wus, "file_delete_state", FileDeleteState),
        },
        "results": {
            "total": results.count(),
            "server_state": counts(results, "server_state", ServerState),
            "outcome": outcome,
            "validate_state": counts(results, "validate_state", ValidateState),
        },
        "outcome_percent": {name: round(100.0 * n / n_over, 2) for name, n in outcome.items()} if n_over else {},
        "credit_granted": round(credit, 6),
        "bytes_downloaded": c.bytes_downloaded,
        "downloads": c.downloads,
        "bytes_downloaded_per_result": round(c.bytes_downloaded / c.jobs_received, 1) if c.jobs_received else 0.0,
        "results_per_file_per_host": per_file_host,
        "turnaround": {
            "mean": round(statistics.fmean(turnarounds), 1) if turnarounds else 0.0,
            "median": float(statistics.median(turnarounds)) if turnarounds else 0.0,
            "p95": float(turnarounds[int(0.95 * (len(turnarounds) - 1))]) if turnarounds else 0.0,
        },
        "results_per_day": round(outcome.get("SUCCESS", 0) / work_days, 1),
        "rpcs": c.rpcs,
        "jobs_received": c.jobs_received,
        "jobs_reported": c.jobs_reported,
        "jobs_lost": c.jobs_lost,
        "hosts_joined": c.hosts_joined,
        "hosts_left": c.hosts_left,
        "daemon_rounds": c.daemon_rounds,
        "scheduler_waits": c.sched_waits,
        "disk_deletions": c.disk_deletions,
        "simulated_seconds": round(simulated, 1),
        "work_seconds": round(sim.work_end, 1),
        "invariants": invariants(sim),
        "engine": engine_figures(sim.engine_hosts),
    }


def results_per_file_per_host(results: QuerySet[Result]) -> float:
    """Mean number of results of one data file a host computed (locality's payoff)."""
    pairs: Counter[tuple[int, str | None]] = Counter()
    for host_id, wu_name in results.filter(host__isnull=False).values_list("host_id", "workunit__name"):
        pairs[(host_id, file_name_of(wu_name))] += 1
    return round(sum(pairs.values()) / len(pairs), 3) if pairs else 0.0


def invariants(sim: Simulation) -> dict[str, bool]:
    """name -> bool for every check; all True for a healthy run."""
    wus, results = world_work(sim)
    now = sim.now(sim.finished_at if sim.finished_at is not None else sim.t)
    checks: dict[str, bool] = {}
    checks["every_workunit_assimilated_or_errored"] = (
        not wus.exclude(assimilate_state=AssimilateState.DONE).exists()
        and not wus.filter(canonical_result__isnull=True, error_mask=0).exists()
    )
    checks["files_deleted_after_assimilation"] = not wus.exclude(file_delete_state=FileDeleteState.DONE).exists()
    checks["never_more_results_than_max_total"] = (
        not wus.annotate(n=Count("results")).filter(n__gt=F("max_total_results")).exists()
    )
    checks["canonical_results_valid"] = (
        not wus.filter(canonical_result__isnull=False)
        .exclude(canonical_result__validate_state=ValidateState.VALID)
        .exists()
    )
    checks["credit_granted_once_to_valid_results"] = not results.filter(granted_credit__gt=0).exclude(
        validate_state=ValidateState.VALID
    ).exists() and credit_matches_hosts(sim)
    checks["no_result_in_progress_past_deadline"] = not results.filter(
        server_state=ServerState.IN_PROGRESS, report_deadline__lt=now
    ).exists()
    checks["one_result_per_user_per_workunit"] = (
        not results.filter(user__isnull=False)
        .values("workunit_id", "user_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .exists()
    )
    checks["wrong_outputs_never_canonical"] = wrong_never_canonical(sim)
    checks["client_errors_invalid"] = (
        not results.filter(outcome=Outcome.CLIENT_ERROR).exclude(validate_state=ValidateState.INVALID).exists()
    )
    if sim.settings.locality:
        checks["results_sent_in_increasing_id_per_user_and_file"] = increasing_per_user_file(results)
    return checks


def credit_matches_hosts(sim: Simulation) -> bool:
    """Each world host's total_credit is the credit granted to its results."""
    granted: defaultdict[int, float] = defaultdict(float)
    _, results = world_work(sim)
    for host_id, credit in results.filter(granted_credit__gt=0).values_list("host_id", "granted_credit"):
        granted[host_id] += credit
    ids = [h.host_id for h in sim.hosts] + [h.host_id for h in sim.engine_hosts]
    for host_id, total in Host.objects.filter(project_id=sim.project_id, id__in=ids).values_list("id", "total_credit"):
        if abs(total - granted.get(host_id, 0.0)) > 1e-6 * max(1.0, total):
            return False
    return True


def wrong_never_canonical(sim: Simulation) -> bool:
    """With a quorum of 2 or more, no canonical output came from a wrong-output job."""
    canonical = world_work(sim)[0].filter(min_quorum__gte=2, canonical_result__isnull=False)
    ids = list(canonical.values_list("canonical_result_id", flat=True))
    wrong = (
        set(
            File.objects.filter(project_id=sim.project_id, result_id__in=ids, kind=File.Kind.OUTPUT).values_list(
                "md5_cksum", flat=True
            )
        )
        & sim.wrong_checksums
    )
    return not wrong


def increasing_per_user_file(results: QuerySet[Result]) -> bool:
    """For each volunteer and data file, results were sent in increasing id (§3.10)."""
    last: dict[tuple[int, str | None], int] = {}
    rows = (
        results.filter(sent_time__gt=0, user__isnull=False)
        .order_by("sent_time", "id")
        .values_list("user_id", "workunit__name", "id")
    )
    for user_id, wu_name, result_id in rows:
        key = (user_id, file_name_of(wu_name))
        if result_id < last.get(key, 0):
            return False
        last[key] = result_id
    return True
