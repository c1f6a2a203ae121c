"""REC (recent estimated credit) and project scheduling priority (reference/client.md §6.1, §6.2)."""

from __future__ import annotations

import math

LN2 = math.log(2.0)


def update_average(
    now: float, start: float, work: float, half_life: float, avg: float, avg_time: float
) -> tuple[float, float]:
    """lib/util.cpp update_average as reference/client.md §6.1 states it.

    `work` (credits) was done between `start` and `now`; the average is in credits per day.
    Returns the new (average, average time).
    """
    # BOINC measures from the last update, or from the interval start the first time
    diff = now - (avg_time if avg_time else start)
    if diff <= 0:
        return avg, avg_time
    w = math.exp(-diff * LN2 / half_life)
    if 1.0 - w > 1e-6:
        avg = avg * w + (1.0 - w) * (work / (diff / 86400.0))
    else:
        avg += LN2 * work * 86400.0 / half_life
    return avg, now


def priority_init(projects, selected, bce: bool = False) -> float:
    """project_priority_init (§6.2) over the projects for which `selected(p)` is true.

    Sets rec_temp, share_frac and priority on every project; returns rec_sum (which is at
    least 1 when all RECs are 0, as BOINC does).

    With `bce`, as BOINC's code has it: only the selected projects' rec_temp is reset to
    their REC, and every project gets its share of the selected projects' shares and a
    priority from its rec_temp, so a project left out (in RPC back-off, say) is ranked by
    the rec_temp the last scheduling left it, charges included (docs/engine-fidelity.md).

    The projects are ProjectStates; rec.pxd types the walk, and the sums are the floats'
    sums in the projects' order, as sum() adds them.
    """
    return _priority_init_chosen(projects, [p for p in projects if selected(p)], bce)


def priority_init_with_jobs(projects, bce: bool = False) -> float:
    """priority_init(projects, lambda p: bool(p.jobs), bce): make_run_list's selection, the
    projects with jobs, without a call per project."""
    return _priority_init_chosen(projects, [p for p in projects if p.jobs], bce)


def _priority_init_chosen(projects, chosen: list, bce: bool) -> float:
    """priority_init's work once the selected projects (`chosen`, in the projects' order)
    are known."""
    rs_sum = 0.0
    rec_sum = 0.0
    for p in chosen:
        rs_sum += p.share
    for p in chosen:
        rec_sum += p.rec
    if rec_sum == 0:
        rec_sum = 1.0
    # the same membership as `p in chosen` (projects compare by identity), without a scan;
    # when every project is chosen (as is usual) every one is counted, without the set
    every = len(chosen) == len(projects)
    chosen_set = set() if every else set(chosen)
    for p in projects:
        counted = every or p in chosen_set
        if counted or not bce:
            p.rec_temp = p.rec
        if rs_sum > 0 and (counted or bce):
            p.share_frac = p.share / rs_sum
            compute_priority(p, rec_sum)
        else:
            p.share_frac = 0.0
            p.priority = 0.0
    return rec_sum


def compute_priority(p, rec_sum: float) -> None:
    """PROJECT::compute_sched_priority (§6.2): higher is better."""
    rec_frac = p.rec_temp / rec_sum
    if p.share == 0:
        p.priority = -1e3 - rec_frac
    elif p.share_frac > 0:
        p.priority = -rec_frac / p.share_frac
    else:
        p.priority = -rec_frac


def adjust_rec_sched(p, job_peak_flops: float, total_peak_flops: float, rec_sum: float) -> None:
    """Charge a project about one hour's worth of credit for a job put on the run list (§6.2)."""
    p.rec_temp += job_peak_flops / total_peak_flops * rec_sum / 24.0
    compute_priority(p, rec_sum)
