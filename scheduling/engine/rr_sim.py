"""Round-robin simulations of the queued jobs.

- `RoundRobin` (`rr_simulate`): BOINC 7's per-processor-type FIFO round-robin simulation
  (reference/client.md §6.4, seed 002): shortfall, idle instances now, saturated time,
  deadline misses per job and per project, and the busy time of the deadline-missing jobs.
- `wrr_simulate`: the debt era's weighted round-robin simulation of the CPU
  (reference/debt-era.md §4, seed 001): total_shortfall and shortfall per project.

Both take the emulator (for the resources, projects and buffer preferences) and `now`, and
write `rr_finish` / `rr_miss` on the jobs. Each step of a simulation ends at least one job, so
a simulation that takes more than MAX_STEPS_PER_JOB steps per job has numbers out of range
(a job of infinite size, say) and raises EngineLimitError instead of running on.
"""

from __future__ import annotations

import math
from itertools import repeat
from operator import le, mul, sub, truediv

from .rec import LN2, adjust_rec_sched, compute_priority, priority_init
from .rr_repick import IDLE_EPS, Repick, busy_update
from .state import COBBLESTONE_SCALE, EngineLimitError, JobState


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

    `misses` and `nused_total` are keyed by (project index, resource index);
    `project_shortfall` is per project index, `total_shortfall` the CPU's (debt era);
    `project_rsc_shortfall` (BOINC 7, with `detail`) is keyed like `misses`.
    """

    __slots__ = (
        "time",
        "rsc",
        "misses",
        "nused_total",
        "project_shortfall",
        "total_shortfall",
        "project_rsc_shortfall",
        "mc_shortfall",
        "last_mc_limit",
        "contested",
        "rec_sum",
        "gpu_cpu",
    )

    def __init__(self, time: float, nrsc: int, nprojects: int):
        self.time = time
        self.rsc = [RscSim() for _ in range(nrsc)]
        self.misses: dict[tuple[int, int], int] = {}
        self.nused_total: dict[tuple[int, int], float] = {}
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
        self.gpu_cpu = True  # whether GPU jobs' CPU shares were counted (RoundRobin.gpu_cpu)


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
        speed = (abs(drift[projects[i]]) / (sf_i or 1.0) + abs(drift[projects[o]]) / (sf_o or 1.0)) / rec_sum + k * (
            pri_i + pri_o
        )
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
    fracs = [res.overall_frac for res in em.resources]
    for p in em.projects:
        for j in p.jobs:
            if j.app.max_concurrent:
                return True
            r = j.rsc
            dur = j.est_flops_remaining(exact) / (j.flops * fracs[r])
            jobs.append((j, dur))
            work[0] += j.avg_ncpus * dur
            if r:
                work[r] += j.gpu_usage * dur
            longest[r] = max(longest[r], dur)
            longest[0] = max(longest[0], dur)
    end = [now + work[r] / (em.n_usable_cpus if r == 0 else em.resources[r].ninstances) + longest[r] for r in range(nr)]
    for j, dur in jobs:
        due = j.deadline - buf_min
        if (due >= now + dur) if j.rr_miss else (due < end[j.rsc]):
            return True
    return False


def _jobs(n: int) -> str:
    return f"{n} queued job" + ("" if n == 1 else "s")


# Each step of the simulation ends at least one job; a job whose remainder rounds to a few ulps
# of its size may take another. Far more than that means the numbers are out of range.
MAX_STEPS_PER_JOB = 64


class _Static:
    """What the simulations of one run share and never changes during it: instances per
    resource, the max_concurrent caps per (project, resource), each project's fair share of
    the instances (for `detail`)."""

    __slots__ = ("caps", "mc_cap", "any_mc", "fair", "gpus_first")

    def __init__(self, em):
        rscs = em.resources
        nr = len(rscs)
        self.gpus_first = tuple(range(nr - 1, -1, -1))  # pick's order of the resources
        self.caps = [em.n_usable_cpus if r == 0 else rscs[r].ninstances for r in range(nr)]
        mc_cap: dict = {}  # (project, resource) -> instances its limited apps let it use
        for p in em.projects:
            for app in p.spec.apps:
                for v in app.versions:
                    r = em.rsc_index.get(v.resource)
                    if r is None:
                        continue
                    cap = app.max_concurrent * (v.gpu_usage if r else v.avg_ncpus) if app.max_concurrent else math.inf
                    mc_cap[(p.index, r)] = max(mc_cap.get((p.index, r), 0.0), 0.0) + cap
        self.mc_cap = {k: v for k, v in mc_cap.items() if v < math.inf}
        self.any_mc = any(app.max_concurrent for p in em.projects for app in p.spec.apps)
        self.fair = []
        for r in range(nr):
            able = [p for p in em.projects if p.rsc_ok[r] and p.share > 0]
            total = sum(p.share for p in able)
            self.fair.append({p.index: p.share / total * self.caps[r] for p in able} if total > 0 else {})


def _static(em) -> _Static:
    static = em.__dict__.get("_rr_static")
    if static is None:
        static = em._rr_static = _Static(em)
    return static


def decay_factors(t0: float, t1: float, half_life: float) -> tuple[float, float]:
    """The parts of rec.update_average(t1, t0, work, half_life, avg, t0) that do not depend
    on the project: (diff, weight of the old average). Every project a step of the simulation
    charges shares them, so the step computes them once (`decayed`)."""
    diff = t1 - t0
    if diff <= 0:
        return diff, 1.0
    return diff, math.exp(-diff * LN2 / half_life)


def decayed(avg: float, work: float, diff: float, w: float, half_life: float) -> float:
    """rec.update_average's new average from `decay_factors`, with the same arithmetic
    (tests/scheduling/test_rr_sim.py checks the two agree bit for bit)."""
    if diff <= 0:
        return avg
    if 1.0 - w > 1e-6:
        return avg * w + (1.0 - w) * (work / (diff / 86400.0))
    return avg + LN2 * work * 86400.0 / half_life


class RoundRobin:
    """RR_SIM::simulate (reference/client.md §6.4): one simulation of the queued jobs at `now`.

    The jobs of each resource wait in per-project FIFO queues. `pick` fills the instances,
    GPU types first, taking projects by scheduling priority (re-ordered after each pick and as
    the projected REC grows), or, under `--compat bce`, in BOINC's emulator's pointer order,
    which is the reverse of the file order and never changes (reference/client.md §9.1).
    `step` then runs the picked jobs to the next job end, integrating shortfall, saturation,
    max_concurrent shortfall and projected REC over the step; `retire` takes the jobs that
    ended out (deadline misses, busy time) and the next pick fills what they left. With
    `detail`, each project's shortfall per resource is also integrated: how far its simulated
    use falls below its share of the instances up to the buffer end.

    `run()` returns the `RRResult` and writes `rr_finish` / `rr_miss` on every job.
    """

    def __init__(self, em, now: float, detail: bool = False):
        self.em = em
        self.now = now
        self.detail = detail
        static = _static(em)
        self.static = static
        self.caps = static.caps
        self.nr = nr = len(em.resources)
        self.projects = projects = em.projects
        self.result = result = RRResult(now, nr, len(projects))
        self.buf_end = now + em.work_buf_total
        self.by_priority = not em.bce
        # RR_SIM::activate: while GPU computing is suspended a GPU job's CPU share is not
        # counted, so that the CPU buffer looks as empty as it is (docs/engine-fidelity.md)
        self.gpu_cpu = result.gpu_cpu = em._gpu_allowed()
        self.mc_cap = static.mc_cap
        self.any_mc = static.any_mc
        for key in self.mc_cap:
            result.mc_shortfall[key] = 0.0
            result.last_mc_limit[key] = 0.0
        self.mc_running: dict = {}  # app -> simulated jobs running, against max_concurrent
        # resource -> project index -> FIFO (reversed)
        self.pending: list[dict[int, list[JobState]]] = [dict() for _ in range(nr)]
        self.sim_nused = [0.0] * nr
        self.p_used = [[0.0] * len(projects) for _ in range(nr)]
        self.busy = [[0.0] * em.resources[r].ninstances for r in range(nr)]
        self.credit: dict = {}  # projected credit per second of each project's active jobs
        # the picked jobs, with their remaining FLOPs, rates and end tolerances, in pick order
        self.active: list = []
        self.left: list = []
        self.rate: list = []
        self.tol: list = []
        self.sim_now = now
        self.rec_sum = 1.0
        self.steps = 0
        self._queue_jobs()

    def _queue_jobs(self) -> None:
        em = self.em
        now = self.now
        result = self.result
        nused_total = result.nused_total
        pending = self.pending
        njobs = 0
        for p in self.projects:
            jobs = p.jobs
            if not jobs:
                continue
            pi = p.index
            njobs += len(jobs)
            # every job's CPU share counts in its project's CPU total, a GPU job's too
            # (RR_SIM::init_pending_lists)
            ncpus = 0.0
            for j in jobs:
                r = j.rsc
                j.rr_miss = False
                j.rr_finish = now
                queue = pending[r].get(pi)
                if queue is None:
                    queue = pending[r][pi] = []
                    if r:
                        nused_total[(pi, r)] = 0.0
                queue.append(j)
                if r:
                    nused_total[(pi, r)] += j.gpu_usage
                ncpus += j.avg_ncpus
            nused_total[(pi, 0)] = ncpus
        for queues in pending:
            for q in queues.values():
                q.reverse()  # pop() takes the earliest arrival
        self.max_steps = MAX_STEPS_PER_JOB * (njobs + 1)
        self.exact = em.exact_estimates
        self.rscs = em.resources
        if self.by_priority:
            self.rec_sum = priority_init(self.projects, lambda p: bool(p.jobs) and p.share > 0)
            result.rec_sum = self.rec_sum

    def run(self) -> RRResult:
        """Pick, then step from job end to job end: run the picked jobs to the first end,
        integrate the step (shortfall, saturation, max_concurrent, projected REC), retire the
        jobs that end and pick again. Under `--compat bce`, `run_repick`."""
        if self.em.bce:
            return self.run_repick()
        result = self.result
        caps = self.caps
        self.pick()
        sim_nused = self.sim_nused
        nr = self.nr
        rsc = result.rsc
        for r in range(nr):
            rsc[r].nidle_now = max(0.0, caps[r] - sim_nused[r])
        active, rate, tol = self.active, self.rate, self.tol
        now = self.now
        buf_end = self.buf_end
        max_steps = self.max_steps
        mc = bool(self.mc_cap)
        detail = self.detail
        by_priority = self.by_priority
        sim_now = self.sim_now
        steps = self.steps
        while active:
            steps += 1
            if steps > max_steps:
                self.steps = steps
                raise self.too_many_steps()
            left = self.left
            dt = min(map(truediv, left, rate))
            left = list(map(sub, left, map(mul, rate, repeat(dt))))  # left - rate x dt
            if mc:
                self._mc_step(dt)
            if detail:
                self._project_shortfall_step(dt)
            # shortfall (idle instance-seconds up to the buffer end) and saturated time
            for r in range(nr):
                idle = caps[r] - sim_nused[r]
                if idle > IDLE_EPS:
                    if sim_now < buf_end:
                        rsc[r].shortfall += idle * (min(sim_now + dt, buf_end) - sim_now)
                else:
                    rsc[r].saturated_time = sim_now + dt - now
            if by_priority:
                self._rec_step(dt)
            sim_now = self.sim_now = sim_now + dt
            ends = list(map(le, left, tol))
            n = ends.count(True)
            if n == 0:
                self.left = left
                continue
            if n == 1:
                k = ends.index(True)
                ended = [active[k]]
                del active[k], left[k], rate[k], tol[k]
            else:
                done = [k for k, end in enumerate(ends) if end]
                ended = [active[k] for k in done]
                for k in reversed(done):
                    del active[k], left[k], rate[k], tol[k]
            self.left = left
            self.retire(ended)
            self.pick()
        self.steps = steps
        self.tail()
        return result

    def run_repick(self) -> RRResult:
        """RR_SIM::simulate as BOINC's client has it now (rr_sim.cpp), under `--compat bce`.

        Each iteration picks the running set afresh (pick_jobs_to_run): the GPU types first,
        then the CPU, projects in the emulator's pointer order (reverse file order), each
        project's unfinished jobs in arrival order, until the resource is saturated; so a job
        the simulation started can be left out of a later set when GPU jobs with larger CPU
        shares take the CPUs first, and it waits with its work half done. Then the job with
        the shortest time to its end ends alone (a tie ends at the next iteration, after a
        fresh pick); when that is more than an hour away, the simulation takes a time-slice
        step of an hour, or a tenth of the time beyond ten hours, and ends no job
        (docs/engine-fidelity.md, "The round-robin simulation picks afresh").
        `Repick` (rr_repick.py) runs it over typed records of the queued jobs."""
        return Repick(self).run()

    def too_many_steps(self) -> EngineLimitError:
        """The error of a simulation past its bound of steps (MAX_STEPS_PER_JOB per job)."""
        return EngineLimitError(
            f"the round-robin simulation at {self.now:.0f} s took more than {self.max_steps} steps "
            f"for {_jobs(self.max_steps // MAX_STEPS_PER_JOB - 1)}: job sizes or processor speeds "
            f"are out of range (a job would never end)"
        )

    # ------------------------------------------------------------------ picking jobs

    def _next_job(self, q):
        """The earliest pending job whose app is under its max_concurrent, or None."""
        mc_running = self.mc_running
        for k in range(len(q) - 1, -1, -1):
            mc = q[k].app.max_concurrent
            if not mc or mc_running.get(q[k].app, 0) < mc:
                return k
        return None

    def pick(self) -> None:
        """Fill the idle instances, GPU types first, then the CPU (§6.4 pick_jobs_to_run)."""
        projects = self.projects
        by_priority = self.by_priority
        any_mc = self.any_mc
        sim_nused = self.sim_nused
        caps = self.caps
        pending = self.pending
        exact = self.exact
        active, left, rates, tol = self.active, self.left, self.rate, self.tol
        for r in self.static.gpus_first:
            queues = pending[r]
            limit = caps[r]
            if not queues or sim_nused[r] >= limit:
                continue
            frac = self.rscs[r].overall_frac
            # the projects still in the running, in index order: without max_concurrent a
            # project leaves only when its queue empties, so the queues' keys name them
            open_q = set(queues) if any_mc else queues
            while sim_nused[r] < limit and open_q:
                if by_priority:
                    # the highest priority; the lowest index among equals
                    pi = -1
                    best = 0.0
                    for i in open_q:
                        pr = projects[i].priority
                        if pi < 0 or pr > best or (pr == best and i < pi):
                            pi, best = i, pr
                else:
                    pi = max(open_q)
                q = queues[pi]
                if any_mc:
                    k = self._next_job(q)
                    if k is None:
                        open_q.discard(pi)  # type: ignore[union-attr]  # a set with max_concurrent
                        continue
                    if by_priority and len(open_q) > 1:
                        self._contest(pi, open_q)
                    j = q.pop(k)
                    if j.app.max_concurrent:
                        self.mc_running[j.app] = self.mc_running.get(j.app, 0) + 1
                    if not q:
                        del queues[pi]
                        open_q.discard(pi)  # type: ignore[union-attr]  # a set with max_concurrent
                else:
                    if by_priority and len(open_q) > 1:
                        self._contest(pi, open_q)
                    j = q.pop()
                    if not q:
                        del queues[pi]
                active.append(j)
                rem = (j.size if exact else j.fpops_est) - j.done  # est_flops_remaining
                left.append(0.0 if 0.0 > rem else rem)
                rates.append(j.flops * frac)
                tol.append(1e-9 * (j.size + 1.0))
                self._occupy(r, pi, j)
                if by_priority:
                    p = projects[pi]
                    em = self.em
                    peak = j.peak_flops
                    self.credit[p] = self.credit.get(p, 0.0) + peak * COBBLESTONE_SCALE
                    adjust_rec_sched(p, peak, em.total_peak_flops, self.rec_sum)

    def _contest(self, pi: int, open_q) -> None:
        """Record a pick by priority with other projects in the running (see order_time):
        (priority gap, chosen index, other index, the part of each priority that moves with
        REC, rec_temp / (rec_sum x share_frac), and each share_frac)."""
        projects = self.projects
        rec_sum = self.rec_sum
        chosen = projects[pi]
        sf_c = chosen.share_frac
        pri_c = chosen.priority
        moving_c = chosen.rec_temp / (rec_sum * (sf_c or 1.0))
        self.result.contested.extend(
            [
                (
                    pri_c - o.priority,
                    pi,
                    i,
                    moving_c,
                    o.rec_temp / (rec_sum * (o.share_frac or 1.0)),
                    sf_c,
                    o.share_frac,
                )
                for i in open_q
                if i != pi
                for o in (projects[i],)
            ]
        )

    # ------------------------------------------------------------------ running to the next end

    def _mc_step(self, dt: float) -> None:
        """max_concurrent: when a limit last held a job back, and the idle instance-seconds up
        to the buffer end that each limited project may fill (§6.4, §6.5)."""
        result = self.result
        sim_now = self.sim_now
        caps = self.caps
        for (pi, r), cap in self.mc_cap.items():
            q = self.pending[r].get(pi)
            if q and self._next_job(q) is None:
                result.last_mc_limit[(pi, r)] = sim_now + dt - self.now
            if sim_now < self.buf_end:
                room = caps[r] - self.sim_nused[r]
                fill = min(room, cap - self.p_used[r][pi])
                if fill > IDLE_EPS:
                    result.mc_shortfall[(pi, r)] += fill * (min(sim_now + dt, self.buf_end) - sim_now)

    def _occupy(self, r: int, pi: int, j) -> None:
        """RR_SIM::activate's counts for a picked job: its instances in its project's and its
        resource's use, and a GPU job's CPU share in the CPU's while GPUs compute."""
        if r:
            self.p_used[r][pi] += j.gpu_usage
            self.sim_nused[r] += j.gpu_usage
            if self.gpu_cpu:
                self.sim_nused[0] += j.avg_ncpus
        else:
            self.p_used[0][pi] += j.avg_ncpus
            self.sim_nused[0] += j.avg_ncpus

    def _project_shortfall_step(self, dt: float) -> None:
        """With `detail`: how far each project's simulated use falls below its fair share of
        each resource's instances, up to the buffer end."""
        sim_now = self.sim_now
        buf_end = self.buf_end
        if sim_now >= buf_end:
            return
        span = min(sim_now + dt, buf_end) - sim_now
        shortfall = self.result.project_rsc_shortfall
        for r in range(self.nr):
            p_used = self.p_used[r]
            for pi, f in self.static.fair[r].items():
                if p_used[pi] < f:
                    key = (pi, r)
                    shortfall[key] = shortfall.get(key, 0.0) + (f - p_used[pi]) * span

    def _rec_step(self, dt: float) -> None:
        """Projected REC: each project with active jobs earns their credit over the step, and
        its priority follows (rec.update_average and rec.compute_priority, §6.1, §6.2, with
        their arithmetic; tests/scheduling/test_rr_sim.py checks both). BOINC cuts steps
        longer than an hour so that the projected REC re-orders projects; here no pick happens
        between job ends and update_average composes exactly for a constant rate, so stepping
        from job end to job end gives the same result."""
        sim_now = self.sim_now
        half_life = self.em.rec_half_life
        diff, w = decay_factors(sim_now, sim_now + dt, half_life)
        if diff <= 0:
            return  # no REC moves, and every charged priority already follows its rec_temp
        rec_sum = self.rec_sum
        one_w = 1.0 - w
        if one_w > 1e-6:
            days = diff / 86400.0
            for p, credit_rate in self.credit.items():
                if credit_rate > 0:
                    rec = p.rec_temp = p.rec_temp * w + one_w * (credit_rate * dt / days)
                    # compute_priority
                    if p.share == 0:
                        p.priority = -1e3 - rec / rec_sum
                    elif p.share_frac > 0:
                        p.priority = -(rec / rec_sum) / p.share_frac
                    else:
                        p.priority = -(rec / rec_sum)
        else:
            for p, credit_rate in self.credit.items():
                if credit_rate > 0:
                    p.rec_temp = decayed(p.rec_temp, credit_rate * dt, diff, w, half_life)
                    compute_priority(p, rec_sum)

    def retire(self, ended: list) -> None:
        """The jobs that ended in the last step: free their instances, note their projected
        finish and deadline misses, and add a miss's run time to the busy time (§6.4)."""
        em = self.em
        sim_now = self.sim_now
        result = self.result
        buf_min = em.work_buf_min
        by_priority = self.by_priority
        p_used = self.p_used
        sim_nused = self.sim_nused
        for j in ended:
            r = j.rsc
            if j.app.max_concurrent:
                self.mc_running[j.app] -= 1
            if r:
                p_used[r][j.project.index] -= j.gpu_usage
                sim_nused[r] -= j.gpu_usage
                if self.gpu_cpu:
                    sim_nused[0] -= j.avg_ncpus
            else:
                p_used[0][j.project.index] -= j.avg_ncpus
                sim_nused[0] -= j.avg_ncpus
            if by_priority:
                self.credit[j.project] -= j.peak_flops * COBBLESTONE_SCALE
            j.rr_finish = sim_now
            if sim_now > j.deadline - buf_min:
                j.rr_miss = True
                key = (j.project.index, r)
                result.misses[key] = result.misses.get(key, 0) + 1
                rate = j.flops * self.rscs[r].overall_frac
                if em.bce:
                    # estimated_runtime_remaining(): a job never started is its estimate
                    # times the project's duration correction factor (rr_sim.cpp)
                    dur = j.runtime_remaining(rate)
                else:
                    dur = j.est_flops_remaining(self.exact) / rate
                busy_update(self.busy[r], dur, j.gpu_usage if r else j.avg_ncpus)
                if r:
                    busy_update(self.busy[0], dur, j.avg_ncpus)

    def tail(self) -> None:
        """After the last job: every instance idle up to the buffer end; the busy times."""
        result = self.result
        sim_now = self.sim_now
        buf_end = self.buf_end
        caps = self.caps
        if sim_now < buf_end:
            for (pi, r), cap in self.mc_cap.items():
                result.mc_shortfall[(pi, r)] += min(caps[r], cap) * (buf_end - sim_now)
            for r in range(self.nr):
                cap = caps[r]
                result.rsc[r].shortfall += cap * (buf_end - sim_now)
                if self.detail:
                    shortfall = result.project_rsc_shortfall
                    for pi, f in self.static.fair[r].items():
                        key = (pi, r)
                        shortfall[key] = shortfall.get(key, 0.0) + f * (buf_end - sim_now)
        for r in range(self.nr):
            busy = self.busy[r]
            result.rsc[r].busy_time = min(busy) if busy else 0.0
        result.total_shortfall = result.rsc[0].shortfall


def rr_simulate(em, now: float, detail: bool = False) -> RRResult:
    """RR_SIM::simulate (reference/client.md §6.4): `RoundRobin(em, now, detail).run()`."""
    return RoundRobin(em, now, detail).run()


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
    share_sum = sum(p.share for p in projects)
    fair = {p: (p.share / share_sum * ncpus if share_sum > 0 else ncpus / len(projects)) for p in projects}
    sim_now = now
    first = True
    steps = 0
    njobs = len(left)
    max_steps = MAX_STEPS_PER_JOB * (njobs + 1)
    while True:
        steps += 1
        if steps > max_steps:
            raise EngineLimitError(
                f"the weighted round-robin simulation at {now:.0f} s took more than {max_steps} steps for "
                f"{_jobs(njobs)}: job sizes or processor speeds are out of range (a job would never end)"
            )
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
