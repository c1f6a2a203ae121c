"""The five figures of merit with BOINC's formulas (reference/client.md §5)."""

from __future__ import annotations

import math

from .records import Figures


def share_violation(used: list[float], shares: list[float]) -> float:
    """sv = sum_p |U_p - U x RS_p / sum RS| / U, on CPU + GPU peak FLOPs together (§5)."""
    total = sum(used)
    rs_sum = sum(shares)
    if total <= 0 or rs_sum <= 0:
        return 0.0
    return sum(abs(u - total * s / rs_sum) for u, s in zip(used, shares)) / total


def monotony(idle_sumsq: list[float], active_time: float, sched_period: float) -> float:
    """S_p = sqrt(idle_time_sumsq_p / active_time); x = sum S_p / (n x period x n);
    monotony = 1 - 1/(x + 1) (§5)."""
    n = len(idle_sumsq)
    if n == 0 or active_time <= 0:
        return 0.0
    x = sum(math.sqrt(s / active_time) for s in idle_sumsq) / (n * sched_period * n)
    return 1.0 - 1.0 / (x + 1.0)


def figures_of_merit(em) -> tuple[Figures, float]:
    """wf, if, sv, m, r from the run's accumulators; returns them and flops_total."""
    cpu_peak = em.resources[0].peak_flops
    # under --compat bce relative_speed already holds the extra GPU count (§9.5)
    gpu_peak = sum(r.peak_flops for r in em.resources[1:])
    flops_total = cpu_peak * em.active_time + gpu_peak * em.gpu_active_time
    wasted = sum(p.flops_wasted for p in em.projects)
    wf = wasted / flops_total if flops_total > 0 else 0.0
    idle = max(0.0, flops_total - em.flops_used) / flops_total if flops_total > 0 else 0.0
    sv = share_violation([p.flops_used for p in em.projects], [p.share for p in em.projects])
    m = monotony([p.idle_time_sumsq for p in em.projects], em.active_time, em.period)
    r = em.nrpcs / (2.0 * em.jobs_sent) if em.jobs_sent else 0.0
    return Figures(wf, idle, sv, m, r), flops_total
