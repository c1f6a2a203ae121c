# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The queued jobs of a round-robin simulation as typed columns, which both of its variants run over.

RR_SIM::simulate (reference/client.md §6.4) runs in one of two ways: by scheduling priority
(`ByPriority`, rr_priority.py, `--compat intended`) or picking afresh at every job end as
BOINC's client has it now (`Repick`, rr_repick.py, `--compat bce`). Both run over the same
records of the queued jobs, and `QueuedJobs` is their common part: it fills the columns from
the emulator's projects at the start of each simulation (RR_SIM::init_pending_lists: every
job's projected finish and miss reset, each project's instances in its queues counted into
the result's `nused_total`), takes a job out of its queue, frees an ended job's instances and
notes its finish and a deadline miss, integrates what both variants integrate over a step
(shortfall and saturated time, the max_concurrent shortfall, the per-project shortfall) and
writes the figures back. One object serves every simulation of a run: the columns are kept
and grown, never made again, and the entries past the queued jobs (`njobs`, `nslots`) are
left from earlier simulations.

rr_queue.pxd gives the columns and the loops' locals C types, so the compiled core (build.py)
runs this module as C, reading each job's attributes once per simulation; without a compiler
the same source runs as Python on `array.array`s, with the same arithmetic in the same order.
The first line of the file turns off Cython's index checks on the compiled core: every
index the loops use is within its column, whose length the queue sets before a simulation.
"""

from __future__ import annotations

from array import array

IDLE_EPS = 1e-6  # rr_sim.IDLE_EPS (rr_sim imports this module)


def busy_update(busy: list[float], dur: float, nused: float) -> None:
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


def doubles(n: int) -> array:
    return array("d", bytes(8 * n))


def ints(n: int) -> array:
    return array("i", bytes(4 * n))


class QueuedJobs:
    """The queued jobs of a `RoundRobin` (rr_sim.py) and what a simulation over them keeps;
    `load(rr)` fills them, a variant's own run then steps over them.

    The jobs are numbered per resource (GPU types first, then the CPU) and project, each
    project's jobs in arrival order; the projects in index order, or under bce in the
    emulator's pointer order, the reverse of the file's (reference/client.md §9.1). A
    project's jobs on a resource are one `slot` (slot_first[s] to slot_first[s + 1];
    slot_head[s] is its first job not yet taken, slot_left[s] how many are left), and a
    resource's slots are rsc_lo[r] to rsc_hi[r]; `slot_at` finds the slot of (resource,
    project) at index r x nprojects + project index, as `p_used` holds that project's
    instances in use. `active` holds the jobs running in the simulation."""

    def __init__(self, em, static):
        nr = len(em.resources)
        nprojects = len(em.projects)
        self.nr = nr
        self.nprojects = nprojects
        self.bce = bool(em.bce)
        nslots = nr * nprojects
        self.slot_first = ints(nslots + 1)
        self.slot_head = ints(nslots)
        self.slot_left = ints(nslots)
        self.slot_proj = ints(nslots)
        self.slot_at = ints(nslots)
        self.slot_next = ints(nslots)
        self.rsc_lo = ints(nr)
        self.rsc_hi = ints(nr)
        self.caps = array("d", [float(c) for c in static.caps])
        self.frac = doubles(nr)
        self.gpu_sum = doubles(nr)
        self.sim_nused = doubles(nr)
        self.p_used = doubles(nslots)
        # under bce (rr_repick.py): RSC_PROJECT_WORK_FETCH's sim_nused as BOINC's pick leaves
        # it, which the max_concurrent shortfall reads; the first job of each slot still in
        # BOINC's pending list (ended jobs stay there until a pick passes them, `dropped`);
        # which projects a limit stopped in this pick
        self.pwf_used = doubles(nslots)
        self.slot_lo = ints(nslots)
        self.proj_at_limit = ints(nprojects or 1)
        self.shortfall = doubles(nr)
        self.saturated = doubles(nr)
        mc_keys = list(static.mc_cap)
        self.mc_keys = mc_keys
        self.nmc = len(mc_keys)
        self.mc_proj = array("i", [pi for pi, _r in mc_keys] or [0])
        self.mc_rsc = array("i", [r for _pi, r in mc_keys] or [0])
        self.mc_cap = array("d", [float(static.mc_cap[key]) for key in mc_keys] or [0.0])
        self.mc_short = doubles(self.nmc or 1)
        self.any_mc = bool(static.any_mc)
        self.capacity = 0
        self._grow(16)
        self.nslots = 0
        self.njobs = 0
        self.napps = 0
        self.nactive = 0
        self.jobs = []

    def _grow(self, n: int) -> None:
        """Room for `n` queued jobs in every job column."""
        self.capacity = n
        self.left = doubles(n)
        self.rate = doubles(n)
        self.tol = doubles(n)
        self.gpu_usage = doubles(n)
        self.avg_ncpus = doubles(n)
        self.peak = doubles(n)
        self.deadline = doubles(n)
        self.rsc = ints(n)
        self.proj = ints(n)
        self.slot_of = ints(n)
        self.gone = ints(n)
        self.dropped = ints(n)
        self.active = ints(n)
        self.app = ints(n)
        self.mc_limit = ints(n)
        self.mc_running = ints(n)

    def load(self, rr) -> None:
        """RR_SIM::init_pending_lists for RoundRobin `rr`: reset every job's projected finish
        and miss, count each project's instances queued into `rr.result.nused_total` (every
        job's CPU share in the CPU's total, a GPU job's too; a GPU job's usage in its type's)
        and copy what the simulation reads of the jobs into the columns, in pick order."""
        em = rr.em
        result = rr.result
        self.rr = rr
        self.result = result
        now = rr.now
        self.now = now
        self.sim_now = rr.sim_now
        self.buf_end = rr.buf_end
        self.buf_min = em.work_buf_min
        self.gpu_cpu = bool(rr.gpu_cpu)
        self.detail = bool(rr.detail)
        self.steps = rr.steps
        self.max_steps = rr.max_steps
        exact = bool(em.exact_estimates)
        self.exact = exact
        nr = self.nr
        nprojects = self.nprojects
        bce = self.bce
        slot_first = self.slot_first
        slot_at = self.slot_at
        slot_next = self.slot_next
        projects = rr.projects
        # how many jobs each project has queued on each resource
        for c in range(nr * nprojects):
            slot_next[c] = 0
            slot_at[c] = -1
            self.p_used[c] = 0.0
            self.pwf_used[c] = 0.0
        njobs = 0
        for p in projects:
            pi = p.index
            for j in p.jobs:
                r = j.rsc
                slot_next[r * nprojects + pi] += 1
                njobs += 1
        if njobs > self.capacity:
            self._grow(max(njobs, 2 * self.capacity))
        self.njobs = njobs
        # the slots in pick order; slot_next[c] becomes the place of the slot's next job
        nslots = 0
        k = 0
        rscs = em.resources
        for r in range(nr - 1, -1, -1):
            self.rsc_lo[r] = nslots
            for i in range(nprojects):
                pi = nprojects - 1 - i if bce else i
                c = r * nprojects + pi
                n = slot_next[c]
                if not n:
                    continue
                slot_first[nslots] = k
                self.slot_head[nslots] = k
                self.slot_left[nslots] = n
                self.slot_lo[nslots] = k
                self.slot_proj[nslots] = pi
                slot_at[c] = nslots
                slot_next[c] = k
                k += n
                nslots += 1
            self.rsc_hi[r] = nslots
            self.frac[r] = rscs[r].overall_frac
            # nothing in use yet
            self.sim_nused[r] = 0.0
            self.shortfall[r] = result.rsc[r].shortfall
            self.saturated[r] = result.rsc[r].saturated_time
        slot_first[nslots] = k
        self.nslots = nslots
        self.napps = self._fill(projects, result.nused_total, now, exact)
        for a in range(self.napps):
            self.mc_running[a] = 0
        for m in range(self.nmc):
            self.mc_short[m] = result.mc_shortfall[self.mc_keys[m]]
        self.nactive = 0

    def _fill(self, projects, nused_total: dict, now: float, exact: bool) -> int:
        """Copy each project's jobs, in arrival order, to their places in the columns; the
        number of max_concurrent apps among them."""
        nr = self.nr
        nprojects = self.nprojects
        slot_next = self.slot_next
        slot_at = self.slot_at
        gpu_sum = self.gpu_sum
        frac = self.frac
        jobs: list = [None] * self.njobs
        self.jobs = jobs
        apps: dict = {}
        for p in projects:
            queued = p.jobs
            if not queued:
                continue
            pi = p.index
            for r in range(nr):
                gpu_sum[r] = 0.0
            ncpus = 0.0
            for j in queued:
                r = j.rsc
                c = r * nprojects + pi
                k = slot_next[c]
                slot_next[c] = k + 1
                jobs[k] = j
                j.rr_miss = False
                j.rr_finish = now
                size = j.size
                # the remaining FLOPs as the simulation first sees them (estimated_flops_remaining,
                # RR_SIM's flops_left); nothing the estimate reads changes during a simulation
                rem = j.flops_left if exact else j.fpops_est - j.done
                self.left[k] = 0.0 if 0.0 > rem else rem
                flops = j.flops
                self.rate[k] = flops * frac[r]
                self.tol[k] = 1e-9 * (size + 1.0)
                usage = j.gpu_usage
                ncpu = j.avg_ncpus
                self.gpu_usage[k] = usage
                self.avg_ncpus[k] = ncpu
                self.peak[k] = j.peak_flops
                self.deadline[k] = j.deadline
                self.rsc[k] = r
                self.proj[k] = pi
                self.slot_of[k] = slot_at[c]
                self.gone[k] = 0
                self.dropped[k] = 0
                mc = 0
                if self.any_mc:  # else no app has a limit, and the apps are not read
                    app = j.app
                    mc = int(app.max_concurrent)
                    if mc:
                        self.app[k] = apps.setdefault(app, len(apps))
                self.mc_limit[k] = mc
                if r:
                    gpu_sum[r] += usage
                ncpus += ncpu
            for r in range(1, nr):
                if slot_at[r * nprojects + pi] >= 0:
                    nused_total[(pi, r)] = gpu_sum[r]
            nused_total[(pi, 0)] = ncpus
        return len(apps)

    def _take(self, s: int, k: int) -> None:
        """Take the job `k` out of its slot `s`. A slot's jobs before its head are all taken,
        so a pick starts there and does not pass them again."""
        self.gone[k] = 1
        self.slot_left[s] -= 1
        if k == self.slot_head[s]:
            end = self.slot_first[s + 1]
            k += 1
            while k < end and self.gone[k]:
                k += 1
            self.slot_head[s] = k

    def _end(self, k: int) -> None:
        """The job `k` ended: free its instances and its app's place under max_concurrent,
        note its projected finish and a deadline miss, and add a miss's run time to the busy
        time: under bce BOINC's emulator's estimate (estimated_runtime_remaining: a job never
        started is its estimate times the project's duration correction factor, rr_sim.cpp),
        else its remaining FLOPs at its rate."""
        j = self.jobs[k]
        r = self.rsc[k]
        pi = self.proj[k]
        pu = r * self.nprojects + pi
        if self.mc_limit[k]:
            self.mc_running[self.app[k]] -= 1
        if r:
            self.p_used[pu] -= self.gpu_usage[k]
            self.sim_nused[r] -= self.gpu_usage[k]
            if self.gpu_cpu:
                self.sim_nused[0] -= self.avg_ncpus[k]
        else:
            self.p_used[pu] -= self.avg_ncpus[k]
            self.sim_nused[0] -= self.avg_ncpus[k]
        sim_now = self.sim_now
        j.rr_finish = sim_now
        if sim_now > self.deadline[k] - self.buf_min:
            j.rr_miss = True
            key = (pi, r)
            misses = self.result.misses
            misses[key] = misses.get(key, 0) + 1
            if self.bce:
                # estimated_runtime_remaining() / overall frac, in that order (rr_sim.cpp)
                dur = j.runtime_remaining(j.flops) / self.frac[r]
            else:
                dur = j.est_flops_remaining(self.exact) / self.rate[k]
            busy = self.rr.busy
            busy_update(busy[r], dur, j.gpu_usage if r else j.avg_ncpus)
            if r:
                busy_update(busy[0], dur, j.avg_ncpus)

    def _resource_step(self, dt: float) -> None:
        """Shortfall (idle instance-seconds up to the buffer end) and saturated time over a
        step of `dt` (RSC_WORK_FETCH::update_stats)."""
        sim_now = self.sim_now
        buf_end = self.buf_end
        eps = IDLE_EPS
        for r in range(self.nr):
            idle = self.caps[r] - self.sim_nused[r]
            if idle > eps:
                if sim_now < buf_end:
                    self.shortfall[r] += idle * (buf_end - sim_now if sim_now + dt > buf_end else dt)
            else:
                self.saturated[r] = sim_now + dt - self.now

    def _mc_fill(self, dt: float) -> None:
        """mc_update_stats (rr_sim.cpp, §6.4): for each project with max_concurrent, on every
        resource, the instances it could use (`mc_cap`, rr_sim._Static) less those it uses,
        times the step up to the buffer end, when above 1e-6. What it uses is BOINC's
        per-project count as its pick leaves it (`pwf_used`, rr_repick.py) under bce, else
        the instances its jobs hold (`p_used`)."""
        sim_now = self.sim_now
        buf_end = self.buf_end
        if not sim_now < buf_end:
            return
        used = self.pwf_used if self.bce else self.p_used
        eps = IDLE_EPS
        span = buf_end - sim_now if sim_now + dt > buf_end else dt
        for m in range(self.nmc):
            x = self.mc_cap[m] - used[self.mc_rsc[m] * self.nprojects + self.mc_proj[m]]
            if x > eps:
                self.mc_short[m] += x * span

    def _project_shortfall_step(self, dt: float) -> None:
        """With `detail`: how far each project's simulated use falls below its fair share of
        each resource's instances, up to the buffer end."""
        sim_now = self.sim_now
        buf_end = self.buf_end
        if sim_now >= buf_end:
            return
        span = min(sim_now + dt, buf_end) - sim_now
        shortfall = self.result.project_rsc_shortfall
        fair = self.rr.static.fair
        for r in range(self.nr):
            row = r * self.nprojects
            for pi, f in fair[r].items():
                used = self.p_used[row + pi]
                if used < f:
                    key = (pi, r)
                    shortfall[key] = shortfall.get(key, 0.0) + (f - used) * span

    def _write_back(self):
        """Write the integrated figures into the result (the max_concurrent shortfall with its
        tail up to the buffer end) and the simulation's end into the RoundRobin, let go of the
        jobs, then the RoundRobin's tail; the result."""
        result = self.result
        rr = self.rr
        if self.nmc and self.sim_now < self.buf_end:
            self._mc_fill(self.buf_end - self.sim_now)  # the tail, with the counts the last pick left
        for r in range(self.nr):
            result.rsc[r].shortfall = self.shortfall[r]
            result.rsc[r].saturated_time = self.saturated[r]
        for m in range(self.nmc):
            result.mc_shortfall[self.mc_keys[m]] = self.mc_short[m]
        self.jobs = []
        self.rr = None
        self.result = None
        rr.sim_now = self.sim_now
        rr.steps = self.steps
        rr.tail()
        return result
