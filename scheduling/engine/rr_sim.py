"""Round-robin simulations of the queued jobs.

- `rr_simulate`: BOINC 7's per-processor-type FIFO round-robin simulation
  (reference/client.md §6.4, seed 002): shortfall, idle instances now, saturated time,
  deadline misses per job and per project, and the busy time of the deadline-missing jobs.
- `wrr_simulate`: the debt era's weighted round-robin simulation of the CPU
  (reference/debt-era.md §4, seed 001): total_shortfall and shortfall per project.

Both take the emulator (for the resources, projects and buffer preferences) and `now`, and
write `rr_finish` / `rr_miss` on the jobs.
"""

from __future__ import annotations

import math

from .rec import adjust_rec_sched, compute_priority, priority_init, update_average
from .state import COBBLESTONE_SCALE

IDLE_EPS = 1e-6


class RscSim:
    """Per-resource outputs of a simulation."""

    __slots__ = ("shortfall", "nidle_now", "saturated_time", "busy_time", "sim_nused")

    def __init__(self):
        self.shortfall = 0.0
        self.nidle_now = 0.0
        self.saturated_time = 0.0
        self.busy_time = 0.0
        self.sim_nused = 0.0


class RRResult:
    """Outputs of a simulation at `time`.

    `misses`, `nused_total` and `n_runnable` are keyed by (project index, resource index);
    `project_shortfall` is per project index, `total_shortfall` the CPU's (debt era);
    `project_rsc_shortfall` (BOINC 7, with `detail`) is keyed like `misses`.
    """

    __slots__ = ("time", "rsc", "misses", "nused_total", "n_runnable", "project_shortfall",
                 "total_shortfall", "project_rsc_shortfall", "mc_shortfall", "last_mc_limit",
                 "contested", "rec_sum")

    def __init__(self, time: float, nrsc: int, nprojects: int):
        self.time = time
        self.rsc = [RscSim() for _ in range(nrsc)]
        self.misses: dict[tuple[int, int], int] = {}
        self.nused_total: dict[tuple[int, int], float] = {}
        self.n_runnable: dict[tuple[int, int], int] = {}
        self.project_shortfall = [0.0] * nprojects
        self.total_shortfall = 0.0
        self.project_rsc_shortfall: dict[tuple[int, int], float] = {}
        # projects with a max_concurrent app on the resource (§6.4, §6.5), keyed like misses:
        # idle instance-seconds up to the buffer end that the limit lets the project fill,
        # and the last simulated time (from now) at which the limit held a job back
        self.mc_shortfall: dict[tuple[int, int], float] = {}
        self.last_mc_limit: dict[tuple[int, int], float] = {}
        # picks by priority with another project in the running (see order_time):
        # (priority gap, chosen index, other index, the part of each priority that moves
        # with REC, chosen share_frac, other share_frac)
        self.contested: list[tuple] = []
        self.rec_sum = 1.0


def credit_rates(em) -> dict:
    """Credits per day each project earns with the jobs running now: the constant rate R
    toward which its REC moves between events (§6.1). Projects running nothing are absent."""
    per_day = 86400.0 * em.prefs.cpu_usage_limit / 100.0 * em.cpu_flops * COBBLESTONE_SCALE
    rate: dict = {}
    for j in em.running:
        if j.rate <= 0:
            continue
        secs = j.avg_ncpus * (em.cpu_scale if j.rsc == 0 else 1.0)
        if j.rsc:
            secs += j.gpu_usage * em.resources[j.rsc].relative_speed
        rate[j.project] = rate.get(j.project, 0.0) + secs * per_day
    return rate


def rec_drift(em) -> dict:
    """How fast each project's REC moves now, in REC units per second (signed). Between
    events a project earns credit at a constant rate R (credits per day), so REC moves
    exponentially toward R, at ln 2 / half_life x (R - REC) per second now and ever more
    slowly after (§6.1)."""
    lam = math.log(2.0) / em.rec_half_life
    rate = credit_rates(em)
    return {p: lam * (rate.get(p, 0.0) - p.rec) for p in em.projects}


def order_time(em, rr) -> float:
    """Seconds from now before any pick of the simulation `rr` between projects by priority
    can come out the other way, with the jobs running now.

    A pick's priority is -(a + c x rec_sum) / (rec_sum x share_frac): `a` is the project's
    REC, decayed in the simulation, plus the credit it projects (both at least 0), and
    `c x rec_sum` the simulation's charges (adjust_rec_sched). The charges' part does not
    move with rec_sum, so as REC drifts a priority moves by at most |drift| / (rec_sum x
    share_frac) + |priority| x |rec_sum's drift| / rec_sum per second; rec_sum itself moves
    exponentially toward the sum of the credit rates (rec_drift)."""
    if not rr.contested:
        return math.inf
    drift = rec_drift(em)
    projects = em.projects
    rec_sum = rr.rec_sum
    k = abs(sum(drift[p] for p in projects if p.jobs and p.share > 0)) / rec_sum
    t = math.inf
    for gap, i, o, pri_i, pri_o, sf_i, sf_o in rr.contested:
        # a zero-share project's priority is -1000 - rec_temp / rec_sum (compute_priority)
        speed = ((abs(drift[projects[i]]) / (sf_i or 1.0) + abs(drift[projects[o]]) / (sf_o or 1.0)) / rec_sum
                 + k * (pri_i + pri_o))
        if speed > 0:
            # a tie that can move may break the other way at once (ties go to the first project)
            t = min(t, gap / speed)
    return t


def order_can_change_misses(em, rr, now: float) -> bool:
    """Whether some other order of the simulation's picks could change a deadline miss.

    Whatever the order, a resource's jobs are all done by the list-scheduling bound now +
    (instance-seconds of work) / instances + the longest job, and no job ends before its own
    run time from now; a job on time past the first bound, or late before the second, is what
    a reorder could flip. max_concurrent can idle instances with work waiting, which breaks
    the bound, so then the answer is yes."""
    exact = em.exact_estimates
    buf_min = em.work_buf_min
    nr = len(em.resources)
    work = [0.0] * nr
    longest = [0.0] * nr
    jobs = []
    for p in em.projects:
        for j in p.jobs:
            if j.app.max_concurrent:
                return True
            r = j.rsc
            dur = j.est_flops_remaining(exact) / (j.flops * em.resources[r].overall_frac)
            jobs.append((j, dur))
            work[0] += j.avg_ncpus * dur
            if r:
                work[r] += j.gpu_usage * dur
            longest[r] = max(longest[r], dur)
            longest[0] = max(longest[0], dur)
    end = [now + work[r] / (em.n_usable_cpus if r == 0 else em.resources[r].ninstances) + longest[r]
           for r in range(nr)]
    for j, dur in jobs:
        due = j.deadline - buf_min
        if (due >= now + dur) if j.rr_miss else (due < end[j.rsc]):
            return True
    return False


def _busy_update(busy: list[float], dur: float, nused: float) -> None:
    """BUSY_TIME_ESTIMATOR::update (§6.4): usage below 1 is ignored, fractional usage
    truncated; the job goes on the least-busy instance (the first of equals) and the next
    int(nused) - 1 instances in index order, wrapping around (docs/engine-fidelity.md)."""
    n = int(nused)
    count = len(busy)
    if n < 1 or not count:
        return
    first = busy.index(min(busy))
    for i in range(n):
        busy[(first + i) % count] += dur


def rr_simulate(em, now: float, detail: bool = False) -> RRResult:
    """RR_SIM::simulate (reference/client.md §6.4).

    Projects are picked by scheduling priority, re-ordered after each pick and as the
    projected REC grows (`em.bce` off), or in BOINC's emulator's pointer order, which is the
    reverse of the file order and never changes (`em.bce` on, reference/client.md §9.1).
    With `detail`, each project's shortfall per resource is also integrated: how far its
    simulated use falls below its share of the instances up to the buffer end.
    """
    rscs = em.resources
    nr = len(rscs)
    projects = em.projects
    result = RRResult(now, nr, len(projects))
    buf_end = now + em.work_buf_total
    buf_min = em.work_buf_min
    exact = em.exact_estimates
    by_priority = not em.bce
    ncpus = em.n_usable_cpus

    pending = [dict() for _ in range(nr)]
    # max_concurrent: a project's pick skips jobs of an app at its limit (§6.4)
    mc_running: dict = {}
    mc_cap: dict = {}  # (project, resource) -> instances its limited apps let it use
    for p in projects:
        for app in p.spec.apps:
            for v in app.versions:
                r = em.rsc_index.get(v.resource)
                if r is None:
                    continue
                cap = app.max_concurrent * (v.gpu_usage if r else v.avg_ncpus) if app.max_concurrent else math.inf
                mc_cap[(p.index, r)] = max(mc_cap.get((p.index, r), 0.0), 0.0) + cap
    mc_cap = {k: v for k, v in mc_cap.items() if v < math.inf}
    for key in mc_cap:
        result.mc_shortfall[key] = 0.0
        result.last_mc_limit[key] = 0.0
    left: dict = {}
    rate: dict = {}
    for p in projects:
        for j in p.jobs:
            r = j.rsc
            rt = j.flops * rscs[r].overall_frac
            left[j] = j.est_flops_remaining(exact)
            rate[j] = rt
            j.rr_miss = False
            j.rr_finish = now
            pending[r].setdefault(p.index, []).append(j)
            key = (p.index, r)
            result.nused_total[key] = result.nused_total.get(key, 0.0) + (j.gpu_usage if r else j.avg_ncpus)
            result.n_runnable[key] = result.n_runnable.get(key, 0) + 1
    for queues in pending:
        for q in queues.values():
            q.reverse()  # pop() takes the earliest arrival

    rec_sum = 1.0
    contest = result.contested
    if by_priority:
        rec_sum = priority_init(projects, lambda p: bool(p.jobs) and p.share > 0)
        result.rec_sum = rec_sum
    total_peak = em.total_peak_flops
    sim_nused = [0.0] * nr
    p_used = [[0.0] * len(projects) for _ in range(nr)]
    fair = []
    if detail:
        for r in range(nr):
            cap = ncpus if r == 0 else rscs[r].ninstances
            able = [p for p in projects if p.rsc_ok[r] and p.share > 0]
            total = sum(p.share for p in able)
            fair.append({p.index: p.share / total * cap for p in able} if total > 0 else {})
    active: list = []
    credit: dict = {}  # projected credit per second of each project's active jobs
    busy = [[0.0] * rscs[r].ninstances for r in range(nr)]

    def next_job(q):
        """The earliest pending job whose app is under its max_concurrent, or None."""
        for k in range(len(q) - 1, -1, -1):
            mc = q[k].app.max_concurrent
            if not mc or mc_running.get(q[k].app, 0) < mc:
                return k
        return None

    def moving(p) -> float:
        """The part of p's priority that moves with REC: rec_temp / (rec_sum x share_frac)."""
        return p.rec_temp / (rec_sum * (p.share_frac or 1.0))

    def contested(pi, open_q):
        chosen = projects[pi]
        for i in open_q:
            if i != pi:
                other = projects[i]
                contest.append((chosen.priority - other.priority, pi, i, moving(chosen), moving(other),
                                chosen.share_frac, other.share_frac))

    def pick():
        # GPU types first, then the CPU (reference/client.md §6.4 pick_jobs_to_run)
        for r in range(nr - 1, -1, -1):
            queues = pending[r]
            if not queues:
                continue
            limit = ncpus if r == 0 else rscs[r].ninstances
            open_q = set(queues)
            while sim_nused[r] < limit and open_q:
                if by_priority:
                    pi = max(open_q, key=lambda i: (projects[i].priority, -i))
                else:
                    pi = max(open_q)
                q = queues[pi]
                k = next_job(q)
                if k is None:
                    open_q.discard(pi)  # its max_concurrent has run out
                    continue
                if by_priority and len(open_q) > 1:
                    contested(pi, open_q)
                j = q.pop(k)
                if j.app.max_concurrent:
                    mc_running[j.app] = mc_running.get(j.app, 0) + 1
                if not q:
                    del queues[pi]
                    open_q.discard(pi)
                active.append(j)
                p_used[r][pi] += j.gpu_usage if r else j.avg_ncpus
                if r:
                    sim_nused[r] += j.gpu_usage
                sim_nused[0] += j.avg_ncpus
                if by_priority:
                    p = projects[pi]
                    peak = em.job_peak_flops(j)
                    credit[p] = credit.get(p, 0.0) + peak * COBBLESTONE_SCALE
                    adjust_rec_sched(p, peak, total_peak, rec_sum)

    pick()
    for r in range(nr):
        result.rsc[r].nidle_now = max(0.0, rscs[r].ninstances - sim_nused[r]) if r else max(0.0, ncpus - sim_nused[0])

    sim_now = now
    half_life = em.rec_half_life
    while active:
        # BOINC cuts steps longer than an hour so that the projected REC re-orders projects;
        # here no pick happens between job ends and update_average composes exactly for a
        # constant rate, so stepping from job end to job end gives the same result
        dt = min(left[j] / rate[j] for j in active)
        finished = []
        still = []
        for j in active:
            lj = left[j] - rate[j] * dt
            if lj <= 1e-9 * (j.size + 1.0):
                finished.append(j)
            else:
                left[j] = lj
                still.append(j)
        for (pi, r), cap in mc_cap.items():
            q = pending[r].get(pi)
            if q and next_job(q) is None:
                result.last_mc_limit[(pi, r)] = sim_now + dt - now
            if sim_now < buf_end:
                room = (ncpus if r == 0 else rscs[r].ninstances) - sim_nused[r]
                fill = min(room, cap - p_used[r][pi])
                if fill > IDLE_EPS:
                    result.mc_shortfall[(pi, r)] += fill * (min(sim_now + dt, buf_end) - sim_now)
        for r in range(nr):
            cap = ncpus if r == 0 else rscs[r].ninstances
            idle = cap - sim_nused[r]
            rs = result.rsc[r]
            if detail and sim_now < buf_end:
                span = min(sim_now + dt, buf_end) - sim_now
                for pi, f in fair[r].items():
                    if p_used[r][pi] < f:
                        key = (pi, r)
                        result.project_rsc_shortfall[key] = (
                            result.project_rsc_shortfall.get(key, 0.0) + (f - p_used[r][pi]) * span)
            if idle > IDLE_EPS:
                if sim_now < buf_end:
                    rs.shortfall += idle * (min(sim_now + dt, buf_end) - sim_now)
            else:
                rs.saturated_time = sim_now + dt - now
        if by_priority:
            for p, credit_rate in credit.items():
                if credit_rate > 0:
                    p.rec_temp, _t = update_average(sim_now + dt, sim_now, credit_rate * dt, half_life,
                                                    p.rec_temp, sim_now)
                    compute_priority(p, rec_sum)
        sim_now += dt
        active = still
        if finished:
            for j in finished:
                r = j.rsc
                if j.app.max_concurrent:
                    mc_running[j.app] -= 1
                p_used[r][j.project.index] -= j.gpu_usage if r else j.avg_ncpus
                if by_priority:
                    credit[j.project] -= em.job_peak_flops(j) * COBBLESTONE_SCALE
                if r:
                    sim_nused[r] -= j.gpu_usage
                sim_nused[0] -= j.avg_ncpus
                j.rr_finish = sim_now
                if sim_now > j.deadline - buf_min:
                    j.rr_miss = True
                    key = (j.project.index, r)
                    result.misses[key] = result.misses.get(key, 0) + 1
                    if em.bce and not j.started:
                        # estimated_runtime_remaining(): a job never started is its estimate
                        # times the project's duration correction factor (rr_sim.cpp)
                        dur = j.fpops_est * j.project.dcf / rate[j]
                    else:
                        dur = j.est_flops_remaining(exact) / rate[j]
                    _busy_update(busy[r], dur, j.gpu_usage if r else j.avg_ncpus)
                    if r:
                        _busy_update(busy[0], dur, j.avg_ncpus)
            pick()
    if sim_now < buf_end:
        for (pi, r), cap in mc_cap.items():
            room = ncpus if r == 0 else rscs[r].ninstances
            result.mc_shortfall[(pi, r)] += min(room, cap) * (buf_end - sim_now)
        for r in range(nr):
            cap = ncpus if r == 0 else rscs[r].ninstances
            result.rsc[r].shortfall += cap * (buf_end - sim_now)
            if detail:
                for pi, f in fair[r].items():
                    key = (pi, r)
                    result.project_rsc_shortfall[key] = result.project_rsc_shortfall.get(key, 0.0) + f * (buf_end - sim_now)
    for r in range(nr):
        result.rsc[r].busy_time = min(busy[r]) if busy[r] else 0.0
    result.total_shortfall = result.rsc[0].shortfall
    return result


def wrr_simulate(em, now: float) -> RRResult:
    """The debt era's weighted round-robin simulation of the CPU (reference/debt-era.md §4).

    Each project's CPU share is its fraction of the resource shares of the projects that
    still have results, split equally among its results; a result never gets more than one
    CPU, and what a project cannot use goes to the others. Over the horizon min_queue
    (`work_buf_min`), total_shortfall integrates idle CPUs and shortfall(P) integrates how
    far P's use falls below its share of all CPUs, share(P)/sum of shares x NCPUS.
    Deadline misses use the plain report deadline. GPU jobs are not simulated.
    """
    projects = em.projects
    result = RRResult(now, len(em.resources), len(projects))
    ncpus = em.n_usable_cpus
    frac = em.resources[0].overall_frac
    horizon = now + em.work_buf_min
    left: dict = {}
    by_project: dict = {}
    for p in projects:
        for j in p.jobs:
            if j.rsc != 0:
                continue
            j.rr_miss = False
            j.rr_finish = now
            left[j] = j.est_flops_remaining(em.exact_estimates)
            by_project.setdefault(p, []).append(j)
            key = (p.index, 0)
            result.nused_total[key] = result.nused_total.get(key, 0.0) + j.avg_ncpus
            result.n_runnable[key] = result.n_runnable.get(key, 0) + 1
    share_sum = sum(p.share for p in projects)
    fair = {p: (p.share / share_sum * ncpus if share_sum > 0 else ncpus / len(projects)) for p in projects}
    sim_now = now
    first = True
    while True:
        live = {p: [j for j in js if j in left] for p, js in by_project.items()}
        live = {p: js for p, js in live.items() if js}
        cpus = _wrr_allocation(live, ncpus)
        used = {p: sum(cpus[j] for j in js) for p, js in live.items()}
        busy_cpus = sum(used.values())
        if first:
            result.rsc[0].nidle_now = max(0.0, ncpus - busy_cpus)
            first = False
        if live:
            dt = min(left[j] / (cpus[j] * j.flops * frac) for js in live.values() for j in js if cpus[j] > 0)
        else:
            dt = math.inf
        span = max(0.0, min(sim_now + dt, horizon) - sim_now)
        if span > 0:
            result.total_shortfall += max(0.0, ncpus - busy_cpus) * span
            for p in projects:
                result.project_shortfall[p.index] += max(0.0, fair[p] - used.get(p, 0.0)) * span
        if busy_cpus >= ncpus - IDLE_EPS and live:
            result.rsc[0].saturated_time = sim_now + dt - now
        if not live:
            break
        for js in live.values():
            for j in js:
                if cpus[j] > 0:
                    left[j] -= cpus[j] * j.flops * frac * dt
        sim_now += dt
        for js in live.values():
            for j in js:
                if left[j] <= 1e-9 * (j.size + 1.0):
                    del left[j]
                    j.rr_finish = sim_now
                    if sim_now > j.deadline:
                        j.rr_miss = True
                        key = (j.project.index, 0)
                        result.misses[key] = result.misses.get(key, 0) + 1
    result.rsc[0].shortfall = result.total_shortfall
    return result


def _wrr_allocation(live: dict, ncpus: float) -> dict:
    """CPUs per result: shares among projects with results, equal within a project, at most
    one CPU per result, what a project cannot use redistributed to the others."""
    alloc = {j: 0.0 for js in live.values() for j in js}
    open_jobs = {p: list(js) for p, js in live.items()}
    remaining = float(ncpus)
    while remaining > IDLE_EPS and open_jobs:
        weights = {p: p.share for p in open_jobs}
        total = sum(weights.values())
        if total <= 0:
            weights = {p: 1.0 for p in open_jobs}
            total = float(len(open_jobs))
        given = 0.0
        for p, js in list(open_jobs.items()):
            grant = remaining * weights[p] / total / len(js)
            for j in list(js):
                g = min(grant, 1.0 - alloc[j])
                alloc[j] += g
                given += g
                if alloc[j] >= 1.0 - IDLE_EPS:
                    alloc[j] = 1.0
                    js.remove(j)
            if not js:
                del open_jobs[p]
        remaining -= given
        if given <= IDLE_EPS:
            break
    return alloc
