"""Scheduler RPC policy (seed 000; reference/client.md §6.6, §6.7): RPC back-off with
BOINC's constants and jitter, master-file fetch, and when results must be reported."""

from __future__ import annotations

# client/scheduler_op.h, client/cs_scheduler.cpp (reference/client.md §6.8)
SCHED_RETRY_DELAY_MIN = 60.0
SCHED_RETRY_DELAY_MAX = 14400.0
RETRY_CAP = 10
MASTER_FETCH_PERIOD = 10
MASTER_FETCH_RETRY_CAP = 3
MASTER_FETCH_INTERVAL = 86400.0
REPORT_DEADLINE_CUSHION = 86400.0
MAX_REPORT_DELAY = 3600.0
RESULT_REPORT_IF_AT_LEAST_N = 64


def exponential_backoff(n: int, rng) -> float:
    """calculate_exponential_backoff: min(2^n x 60 s, 4 h) x (0.5 + 0.5 x drand())."""
    return min(2.0**n * SCHED_RETRY_DELAY_MIN, SCHED_RETRY_DELAY_MAX) * (0.5 + 0.5 * rng.random())


def project_rpc_backoff(p, now: float, rng, *, bce: bool) -> tuple[float, str]:
    """project_rpc_backoff (§6.6) after a failed RPC. Returns (back-off seconds, sentence).

    The 10th consecutive failure sets a master-file fetch pending and restarts the count;
    after MASTER_FETCH_RETRY_CAP master fetches the project waits a day. BOINC's emulator
    clears the pending master fetch at once (§6.6), which `bce` reproduces, and `bce` takes
    the steps in scheduler_op.cpp's order (`_project_rpc_backoff_bce`).
    """
    if bce:
        return _project_rpc_backoff_bce(p, now, rng)
    p.nrpc_failures += 1
    note = ""
    if p.nrpc_failures == MASTER_FETCH_PERIOD:
        p.nrpc_failures = 0
        p.master_fetch_failures += 1
        p.master_fetch_pending = not bce
        note = f" {MASTER_FETCH_PERIOD} failures in a row: master file fetch #{p.master_fetch_failures}."
    if p.master_fetch_failures >= MASTER_FETCH_RETRY_CAP:
        backoff = MASTER_FETCH_INTERVAL
        p.min_rpc_time = now + backoff
        note += f" {MASTER_FETCH_RETRY_CAP} master fetches failed: waiting a day."
        if not bce:
            # a day's wait ends this round of master fetches (BOINC's emulator never resets it)
            p.master_fetch_failures = 0
    else:
        backoff = exponential_backoff(min(p.nrpc_failures, RETRY_CAP), rng)
        p.min_rpc_time = max(p.min_rpc_time, now + backoff)
    return backoff, note


def _project_rpc_backoff_bce(p, now: float, rng) -> tuple[float, str]:
    """SCHEDULER_OP::project_rpc_backoff in its order (docs/engine-fidelity.md): a project
    that has had MASTER_FETCH_RETRY_CAP master fetches waits a day from the next failure on;
    the count of failures is compared with MASTER_FETCH_PERIOD before it is raised, so the
    10th failure is backed off as the 10th and the 11th starts the count again at 1; each
    new time is kept only if later than the one set (PROJECT::set_min_rpc_time)."""
    if p.master_fetch_failures >= MASTER_FETCH_RETRY_CAP:
        p.min_rpc_time = max(p.min_rpc_time, now + MASTER_FETCH_INTERVAL)
        return MASTER_FETCH_INTERVAL, f" {MASTER_FETCH_RETRY_CAP} master fetches failed: waiting a day."
    note = ""
    if p.nrpc_failures == MASTER_FETCH_PERIOD:
        p.min_rpc_time = 0.0
        p.nrpc_failures = 0
        p.master_fetch_failures += 1
        note = f" {MASTER_FETCH_PERIOD} failures in a row: master file fetch #{p.master_fetch_failures}."
    p.nrpc_failures += 1
    backoff = exponential_backoff(min(p.nrpc_failures, RETRY_CAP), rng)
    p.min_rpc_time = max(p.min_rpc_time, now + backoff)
    return backoff, note


def rpc_succeeded(p, now: float) -> None:
    """A successful RPC: failures cleared, no server-requested delay (§6.9)."""
    p.nrpc_failures = 0
    p.min_rpc_time = now


def master_fetch_succeeded(p, now: float) -> None:
    """Seed 000: a master file with scheduler URLs clears the failures and min_rpc_time."""
    p.master_fetch_pending = False
    p.nrpc_failures = 0
    p.min_rpc_time = now


def report_due_time(em, j) -> float:
    """The time after which a ready result makes its project report (§6.7)."""
    return _due_time(j, report_cushion(em))


def report_cushion(em) -> float:
    """How long before its deadline a ready result falls due (§6.7)."""
    return max(REPORT_DEADLINE_CUSHION, em.work_buf_min)


def _due_time(j, cushion: float) -> float:
    """report_due_time with the cushion read once for all the results of a walk; rpc.pxd
    types the times in C doubles, with the same operations as min() of the two."""
    before_deadline = j.deadline - cushion
    after_completion = j.completed_time + MAX_REPORT_DELAY
    return after_completion if after_completion < before_deadline else before_deadline


def project_with_overdue_results(em, now: float):
    """find_project_with_overdue_results (§6.7) as BOINC's client runs it: the ready results
    in the client's result order (arrival, JobState.index), and the project of the first one
    that is due, or that brings its project's count of ready results to
    RESULT_REPORT_IF_AT_LEAST_N; projects in RPC back-off are passed over. None if none.
    Every decision instant asks, and mostly no project has a ready result: the emulator's
    other attributes are read only once one has."""
    ready = []
    for p in em.projects:
        if p.ready and p.min_rpc_time <= now:
            ready.extend(p.ready)
    if not ready:
        return None
    ready.sort(key=_result_index)
    immediately = em.prefs.report_results_immediately
    cushion = report_cushion(em)
    counts: dict = {}
    for j in ready:
        owner = j.project
        if immediately or now > _due_time(j, cushion):
            return owner
        n = counts.get(owner, 0) + 1
        counts[owner] = n
        if n >= RESULT_REPORT_IF_AT_LEAST_N:
            return owner
    return None


def _result_index(j):
    return j.index


def must_report(em, p, now: float) -> bool:
    """find_project_with_overdue_results (§6.7) for one project not in RPC back-off."""
    if not p.ready or p.min_rpc_time > now:
        return False
    if em.prefs.report_results_immediately or len(p.ready) >= RESULT_REPORT_IF_AT_LEAST_N:
        return True
    cushion = report_cushion(em)
    return any(now > _due_time(j, cushion) for j in p.ready)
