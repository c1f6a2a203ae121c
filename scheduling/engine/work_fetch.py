"""BOINC 7's work fetch (reference/client.md §6.5, seed 002): which project to ask, for which
processor types, how much, and the per-(project, resource) back-off."""

from __future__ import annotations

import math
from operator import attrgetter

from boincweb.human import number

from .rec import priority_init
from .records import NamedTuple
from .stdsort import std_sort

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

INF = math.inf

WF_MIN_BACKOFF_INTERVAL = 600.0
WF_MAX_BACKOFF_INTERVAL = 86400.0
WF_MAX_RUNNABLE_JOBS = 1000

REASON_BACKED_OFF = "backed off"


class FetchPlan(NamedTuple):
    """A work request: `requests` maps a resource index to (req_secs, req_instances)."""

    project: object
    requests: dict
    reason: str
    text: str


def project_reason(p, now: float) -> str | None:
    """compute_project_reason (§6.5): why a project cannot be asked for work now."""
    if p.master_fetch_pending:
        return "master fetch pending"
    if len(p.jobs) > WF_MAX_RUNNABLE_JOBS:
        return "too many runnable jobs"
    if p.min_rpc_time > now:
        return "RPC back-off"
    return None


def rsc_reason(em, p, r: int, now: float, rr) -> str | None:
    """compute_rsc_project_reason (§6.5) for one resource."""
    sat = rr.rsc[r].saturated_time
    return _rsc_reason(p, r, now, sat, min(em.work_buf_min, 180.0), rr.mc_shortfall, rr, em.work_buf_total)


def _rsc_reason(p, r: int, now: float, sat: float, zero: float, mc_shortfall, rr, total: float) -> str | None:
    """rsc_reason with the resource's saturated time `sat`, the level `zero` below which a
    zero-share project may be asked, and work_buf_total read once by the caller, which
    asks for every project and resource, as it reads the simulation's MC shortfalls
    (`mc_shortfall`). A project is held back by max_concurrent only if it has an MC
    shortfall, so an empty table is not searched."""
    if not p.fetch_ok[r]:
        return "no app version"
    if p.share == 0 and sat > zero:
        return "zero share"
    if mc_shortfall:
        key = (p.index, r)
        if key in mc_shortfall and rr.last_mc_limit.get(key, 0.0) > total:
            return "max concurrent"  # its limit holds jobs back through the whole buffer
    if p.backoff_time[r] > now:
        return REASON_BACKED_OFF
    return None


def _shares(em, now: float, rr) -> list[dict]:
    """fetchable_share per resource: RS / sum of RS over projects with no reason (§6.5 step 3)."""
    out = []
    for r in range(len(em.resources)):
        ok = [p for p in em.projects if project_reason(p, now) is None and rsc_reason(em, p, r, now, rr) is None]
        total = sum(p.share for p in ok)
        out.append({p: (p.share / total if total > 0 else 0.0) for p in ok})
    return out


def fetch_priorities(em, now: float) -> list:
    """project_priority_init(true) and the queued-work decrement (§6.2); projects sorted
    by decreasing priority, ties in the emulator's project order."""
    projects = em.projects
    bce = em.bce
    priority_init(projects, lambda p: project_reason(p, now) is None, bce)
    _charge_queued_work(projects, bce, em.work_buf_total * em.total_peak_flops, em.exact_estimates)
    order = em.project_order
    if bce:
        # std::sort with higher_priority: equal priorities in introsort's order (stdsort.py)
        return std_sort(order, _higher_priority)
    return sorted(order, key=lambda p: -p.priority)


def _charge_queued_work(projects, bce, denom, exact) -> None:
    """fetch_priorities' queued-work decrement: each project's priority less its queued
    jobs' FLOPs left over `denom`. work_fetch.pxd types the jobs as JobStates (state.pxd)."""
    # each project's priority is read once and written once, with the same subtractions
    for p in projects:
        priority = p.priority
        ready = p.ready
        if bce and ready:
            # BOINC counts every result the client holds, in the client's order: a finished
            # one not yet reported with its FLOPs left below zero (JobState.left_at_end)
            for j in sorted(p.jobs + ready, key=_job_index):
                if j.completed_time is not None:
                    left = j.left_at_end
                else:
                    left = _flops_remaining(j, exact)
                priority -= left / denom
        else:
            for j in p.jobs:
                left = _flops_remaining(j, exact)
                priority -= left / denom
        p.priority = priority


def _flops_remaining(j, exact) -> float:
    """JobState.est_flops_remaining, which work_fetch.pxd computes in C doubles."""
    if exact:
        left = j.flops_left
    else:
        fpops_est = j.fpops_est
        done = j.done
        left = fpops_est - done
    return 0.0 if 0.0 > left else left  # max(left, 0.0)


# the client's result order (arrival)
_job_index = attrgetter("index")


def _higher_priority(p1, p2) -> bool:
    return p1.priority > p2.priority


def set_request(em, p, r: int, rr, share: float) -> tuple[float, float]:
    """RSC_WORK_FETCH::set_request (§6.5): the resource's whole shortfall and the idle
    instances; for a project with max_concurrent (rr_sim.project_min_mc), on every
    resource, its MC shortfall and no instances. A wacky duration correction factor turns
    a shortfall into 1 s, and none into none."""
    rs = rr.rsc[r]
    ninst = em.resources[r].ninstances if r else em.n_usable_cpus
    if p.share == 0:
        return (1.0, 1.0) if rs.nidle_now > 0 else (0.0, 0.0)
    if em.prefs.fetch_minimal_work:
        return 1.0, float(ninst)
    secs = rs.shortfall
    mc = rr.mc_shortfall.get((p.index, r))
    if mc is not None:
        secs = mc  # what its max_concurrent apps can fill
    if secs and not 0.02 <= p.dcf <= 80:
        secs = 1.0  # wacky duration correction factor
    if mc is not None:
        inst = 0.0
    else:
        inst = max(rs.nidle_now, min(ninst * share, ninst) - rr.nused_total.get((p.index, r), 0.0))
        inst = max(inst, 0.0)
    if inst > 0 and secs == 0:
        secs = 1.0
    return secs, inst


def choose_project(em, now: float, rr) -> FetchPlan | None:
    """WORK_FETCH::choose_project (§6.5, docs/engine-fidelity.md "Work fetch scans processor
    types in index order"): projects in decreasing priority; for each, the processor types
    in index order (CPU first) up to the first one it may be asked for whose buffer is
    below the minimum (the trigger), each type it may be asked for claimed for it unless a
    project before it claimed it. The trigger type is requested; so is every other type
    whose buffer is below the maximum, that no project before it claimed and that is at
    most backed off for it. A project that ends up asking for no seconds gives the turn to
    the next one."""
    shares = None
    # the first project (by priority) that may be asked for each resource, None before it
    nres = len(em.resources)
    found: list = [None] * nres
    sat = [rs.saturated_time for rs in rr.rsc]
    buf_min = em.work_buf_min
    total = em.work_buf_total
    zero = min(buf_min, 180.0)
    mc_shortfall = rr.mc_shortfall
    for p in fetch_priorities(em, now):
        if project_reason(p, now) is not None:
            continue
        trigger = -1
        for r in range(nres):
            if _rsc_reason(p, r, now, sat[r], zero, mc_shortfall, rr, total) is not None:
                continue
            if found[r] is None:
                found[r] = p
            if sat[r] < buf_min and (not mc_shortfall or mc_shortfall.get((p.index, r), 1.0) > 0):
                trigger = r
                break
        if trigger < 0:
            continue
        if shares is None:
            shares = _shares(em, now, rr)
        requests = {}
        for r in range(nres):
            if r != trigger:
                if (found[r] is not None and found[r] is not p) or sat[r] >= total:
                    continue
                if _rsc_reason(p, r, now, sat[r], zero, mc_shortfall, rr, total) not in (None, REASON_BACKED_OFF):
                    continue
            secs, inst = set_request(em, p, r, rr, shares[r].get(p, 0.0))
            if secs > 0 or inst > 0:
                requests[r] = (secs, inst)
        if requests:
            return _plan(em, p, trigger, requests, rr)
    return None


def _plan(em, chosen, trigger: int, requests: dict, rr) -> FetchPlan:
    res = em.resources[trigger]
    text = (
        f"Asked {chosen.name} for work: {res.name} saturated for "
        f"{rr.rsc[trigger].saturated_time:.0f} s, below the minimum buffer of "
        f"{em.work_buf_min:.0f} s; it is the fetchable project with the highest priority "
        f"({number(chosen.priority)}); request "
        + ", ".join(f"{em.resources[r].name} {s:.0f} s / {number(i)} inst" for r, (s, i) in sorted(requests.items()))
        + "."
    )
    return FetchPlan(chosen, requests, "need_work", text)


def no_fetch_reason(em, now: float, rr) -> tuple[tuple, object]:
    """Why choose_project found nothing (§6.5), as (key, sentence): the key names the
    qualitative reason only, so the decision log can say it once per change, and the
    sentence is a function that writes it then."""
    key: list[tuple[str, Any]] = []  # (resource, "full" or its (project, reason) pairs)
    for r in range(len(em.resources) - 1, -1, -1):
        res = em.resources[r]
        if rr.rsc[r].saturated_time >= em.work_buf_min:
            key.append((res.name, "full"))
            continue
        why = []
        for p in em.projects:
            if not p.fetch_ok[r]:
                continue
            reason = project_reason(p, now) or rsc_reason(em, p, r, now, rr)
            why.append((p.name, reason or "nothing to request"))
        key.append((res.name, tuple(why)))
    sat = [rs.saturated_time for rs in rr.rsc]

    def sentence() -> str:
        parts = []
        for (name, why), r in zip(key, range(len(em.resources) - 1, -1, -1)):
            if why == "full":
                parts.append(
                    f"{name} is saturated for {sat[r]:.0f} s, at least the minimum buffer of {em.work_buf_min:.0f} s"
                )
            elif why:
                parts.append(
                    f"{name} needs work but no project can be asked ("
                    + "; ".join(f"{p}: {reason}" for p, reason in why)
                    + ")"
                )
            else:
                parts.append(f"{name} needs work but no project has an app version for it")
        return "No work fetch: " + "; ".join(parts) + "."

    return tuple(key), sentence


def piggyback(em, p, now: float, rr) -> dict:
    """piggyback_work_request (§6.5) for an RPC made to report results: each resource whose
    compute_rsc_project_reason is none or RSC_REASON_BACKED_OFF, whose saturated time is
    below work_buf_total, and that no project of strictly higher priority could fetch."""
    reason = project_reason(p, now)
    if reason not in (None, "RPC back-off"):
        return {}
    shares = _shares(em, now, rr)
    order = fetch_priorities(em, now)
    requests = {}
    for r in range(len(em.resources)):
        # a resource merely backed off for this project is still asked for: the back-off
        # keeps the project from being chosen for a work-fetch RPC, not from topping up
        # the buffer on an RPC it makes anyway
        if rsc_reason(em, p, r, now, rr) not in (None, REASON_BACKED_OFF):
            continue
        if rr.rsc[r].saturated_time >= em.work_buf_total:
            continue
        better = any(
            q is not p
            and q.priority > p.priority
            and project_reason(q, now) is None
            and rsc_reason(em, q, r, now, rr) is None
            for q in order
        )
        if better:
            continue
        secs, inst = set_request(em, p, r, rr, shares[r].get(p, 0.0))
        if secs > 0 or inst > 0:
            requests[r] = (secs, inst)
    return requests


def handle_reply(em, p, requests: dict, received: dict, now: float, rng) -> list[str]:
    """handle_reply + resource_backoff (§6.5): back off a resource asked for and not given;
    any job of a resource clears its back-off. Returns sentences for the decision log."""
    notes = []
    for r in range(len(em.resources)):
        if received.get(r, 0) > 0:
            p.backoff_interval[r] = 0.0
            p.backoff_time[r] = 0.0
            continue
        if r not in requests or p.backoff_time[r] > now:
            continue
        if p.backoff_interval[r] <= 0:
            interval = WF_MIN_BACKOFF_INTERVAL
        else:
            interval = min(2 * p.backoff_interval[r], WF_MAX_BACKOFF_INTERVAL)
        p.backoff_interval[r] = interval
        p.backoff_time[r] = now + (0.5 + rng.random()) * interval
        notes.append(
            f"{p.name} sent no {em.resources[r].name} work: backed off {em.resources[r].name} "
            f"fetch for {p.backoff_time[r] - now:.0f} s (interval {interval:.0f} s)."
        )
    return notes


def job_slice_left(j, fracs: list, exact: bool) -> float:
    """A job's part of slice_bound: its time left at its resource's speed (its FLOPs left,
    JobState.est_flops_remaining, over its FLOPS x the resource's overall_frac), or 0.0 when
    that is not a finite time."""
    inf = INF
    frac = fracs[j.rsc]
    flops = j.flops
    if flops > 0 and frac > 0:
        left = _flops_remaining(j, exact) / (flops * frac)
        if left < inf:
            return left
    return 0.0


def slice_bound(em) -> float:
    """The longest time-slice step of a BOINC round-robin simulation of the jobs queued now."""
    return _slice_bound(em.projects, em.resources, em.exact_estimates)


def _slice_bound(projects, resources, exact) -> float:
    """slice_bound of the projects' jobs, with the emulator's attributes read by the caller."""
    longest = 0.0
    fracs = [res.overall_frac for res in resources]
    for p in projects:
        for j in p.jobs:
            left = job_slice_left(j, fracs, exact)
            if left > longest:  # max(longest, left)
                longest = left
    longest = longest / 10.0
    return longest if longest > 3600.0 else 3600.0  # max(3600.0, longest / 10.0)


def next_check(em, now: float, rr, jump: float | None = None) -> float:
    """When the buffer may next fall below the minimum, or to the level at which a
    zero-share project may be asked, or a project held back by its max_concurrent limit may
    be asked again (compute_rsc_project_reason, §6.5): saturated time, and the simulated time
    of a limit, shrink by about 1/overall_frac seconds per second of computing. `jump`, if
    given, is slice_bound's value for the jobs queued now (Boinc7.next_fetch_check).

    Every planning step asks, so the emulator's attributes are read once, and each min()
    and max() of two times is written out as the comparison it makes (work_fetch.pxd types
    the times in C doubles)."""
    t = now + 6 * 3600.0
    bce = em.bce
    buf_min = em.work_buf_min
    resources = em.resources
    projects = em.projects
    rsc = rr.rsc
    # under bce the simulation takes time-slice steps of an hour, or a tenth of a job's time
    # left past ten hours (RoundRobin.run_repick), and the saturated time ends at a step's
    # end: it can fall by a whole step at once, so the check comes that much early
    if not bce:
        step = 0.0
    elif jump is None:
        step = _slice_bound(projects, resources, em.exact_estimates)
    else:
        step = jump
    # under bce the simulation can chain jobs on one instance that in fact run side by side:
    # each second then takes 1/overall_frac seconds off every one of them, and the saturated
    # time can fall as many times faster as there are running jobs
    chained = 1
    if bce:
        running = len(em.running)
        if running > 1:
            chained = running
    zero = 180.0 if 180.0 < buf_min else buf_min  # min(work_buf_min, 180.0)
    for r in range(len(resources)):
        frac = resources[r].overall_frac
        sat = rsc[r].saturated_time
        if sat >= buf_min:
            ahead = sat - buf_min - step
            if not ahead > 0.0:
                ahead = 0.0  # max(0.0, ahead)
            at = now + ahead * frac / chained
            if at < t:
                t = at
        if sat > zero:
            for p in projects:
                if p.share == 0 and p.fetch_ok[r]:
                    at = now + (sat - zero) * frac
                    if at < t:
                        t = at
                    break
    # a project held back by its max_concurrent limit (rsc_reason) may be asked again once the
    # last simulated time at which the limit held its jobs back is within the whole buffer.
    # That time is the end of a simulated job (or of a time-slice step) of any processor type,
    # so it comes closer by at most 1/overall_frac seconds a second of the slowest one
    mc_shortfall = rr.mc_shortfall
    if mc_shortfall:
        total = em.work_buf_total
        held = False
        least = 0.0
        for key, last in rr.last_mc_limit.items():
            if last > total and key in mc_shortfall and (not held or last < least):  # min(held)
                least = last
                held = True
        if held:
            slowest = resources[0].overall_frac
            for r in range(1, len(resources)):
                frac = resources[r].overall_frac
                if frac < slowest:
                    slowest = frac
            ahead = least - total - step
            if not ahead > 0.0:
                ahead = 0.0
            at = now + ahead * slowest
            if at < t:
                t = at
    if bce and mc_shortfall:
        # a processor type below the minimum buffer triggers a project with max_concurrent only
        # once its MC shortfall is above 0 (choose_project). That shortfall is the tail of the
        # simulation up to the buffer's end, which moves with every step; BOINC's emulator
        # looks at work fetch every step, so the engine looks at the next one while such a
        # project is held back by it alone (docs/engine-fidelity.md, "A project whose MC
        # shortfall is 0 is looked at again at the next step")
        for (pi, r), mc in mc_shortfall.items():
            if mc <= 0 and rsc[r].saturated_time < buf_min and projects[pi].fetch_ok[r]:
                at = now + em.delta
                if at < t:
                    t = at
                break
    return t
