"""The round-robin simulation as BOINC's client has it now (rr_sim.cpp), over typed records.

Under `--compat bce` every simulation picks the running set afresh at every job end
(reference/client.md §6.4, pick_jobs_to_run; docs/engine-fidelity.md, "The round-robin
simulation picks afresh"), so a host with a few dozen queued jobs re-picks them thousands of
times a day. `Repick` copies what the simulation reads of the queued jobs into flat arrays
once per simulation (remaining FLOPs, rates, instances, deadlines, project and resource,
max_concurrent app) and runs from them. rr_repick.pxd gives those arrays and the loops' locals
C types, so the compiled core (build.py) runs this module as C; without a compiler the same
source runs as Python, on `array.array`s, with the same arithmetic in the same order. The
jobs' outputs (`rr_finish`, `rr_miss`) and the `RRResult` are written back as the Python
simulation writes them; tests/scheduling/test_rr_repick.py and bench/engine_identity.py check
the figures bit for bit.
"""

from __future__ import annotations

import math
from array import array

from .state import EngineLimitError

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


def _doubles(n: int) -> array:
    return array("d", bytes(8 * n))


def _ints(n: int) -> array:
    return array("i", bytes(4 * n))


class Repick:
    """RR_SIM::simulate with pick_jobs_to_run afresh at every job end, for a `RoundRobin`
    (rr_sim.py) whose jobs are queued: `load(rr)`, then `run()` fills `rr.result` and
    returns it. One Repick serves every simulation of a run (`for_emulator`): its columns
    are kept and grown, not made again for each simulation, and a column's entries past the
    queued jobs (`njobs`, `nslots`) are left from earlier simulations.

    The queued jobs are numbered in pick order: per resource (GPU types first, then the
    CPU), projects in the emulator's pointer order (the reverse of the file order), each
    project's jobs in arrival order. A project's jobs on a resource are one `slot`
    (slot_first[s] to slot_first[s + 1]; slot_head[s] is its first job not yet ended), and a
    resource's slots are rsc_lo[r] to rsc_hi[r]. The instances in use (`sim_nused`, per resource) and per project
    (`p_used`, index r x nprojects + project index) are those the Python simulation keeps,
    with the same updates in the same order, since the max_concurrent shortfall and the
    per-project shortfall read them."""

    def __init__(self, em, static):
        nr = len(em.resources)
        nprojects = len(em.projects)
        self.nr = nr
        self.nprojects = nprojects
        nslots = nr * nprojects
        self.slot_first = _ints(nslots + 1)
        self.slot_proj = _ints(nslots)
        self.slot_left = _ints(nslots)
        self.slot_head = _ints(nslots)
        self.rsc_lo = _ints(nr)
        self.rsc_hi = _ints(nr)
        self.caps = array("d", [float(c) for c in static.caps])
        self.sim_nused = _doubles(nr)
        self.p_used = _doubles(nr * nprojects)
        self.shortfall = _doubles(nr)
        self.saturated = _doubles(nr)
        mc_keys = list(static.mc_cap)
        self.mc_keys = mc_keys
        self.nmc = len(mc_keys)
        self.mc_proj = array("i", [pi for pi, _r in mc_keys] or [0])
        self.mc_rsc = array("i", [r for _pi, r in mc_keys] or [0])
        self.mc_cap = array("d", [float(static.mc_cap[key]) for key in mc_keys] or [0.0])
        self.mc_short = _doubles(self.nmc or 1)
        self.capacity = 0
        self._grow(16)
        self.nslots = 0
        self.njobs = 0
        self.nactive = 0

    @staticmethod
    def for_emulator(em, static) -> Repick:
        """The emulator's one Repick, made at its first simulation: its columns serve every
        simulation of the run, grown when the queue outgrows them."""
        sim = em.__dict__.get("_rr_repick")
        if sim is None:
            sim = em._rr_repick = Repick(em, static)
        return sim

    def _grow(self, n: int) -> None:
        """Room for `n` queued jobs in every job column."""
        self.capacity = n
        self.slot_of = _ints(n)
        self.rsc = _ints(n)
        self.proj = _ints(n)
        self.app = _ints(n)
        self.mc_limit = _ints(n)
        self.gone = _ints(n)
        self.active = _ints(n)
        self.left = _doubles(n)
        self.rate = _doubles(n)
        self.gpu_usage = _doubles(n)
        self.avg_ncpus = _doubles(n)
        self.deadline = _doubles(n)
        self.mc_running = _ints(n)

    def load(self, rr) -> None:
        """Copy the queued jobs of RoundRobin `rr` into the columns, in pick order."""
        self.rr = rr
        self.result = rr.result
        em = rr.em
        nr = self.nr
        self.now = rr.now
        self.sim_now = rr.sim_now
        self.buf_end = rr.buf_end
        self.buf_min = em.work_buf_min
        self.gpu_cpu = bool(rr.gpu_cpu)
        self.detail = bool(rr.detail)
        self.steps = rr.steps
        self.max_steps = rr.max_steps
        njobs = 0
        for queues in rr.pending:
            for q in queues.values():
                njobs += len(q)
        if njobs > self.capacity:
            self._grow(max(njobs, 2 * self.capacity))
        self.njobs = njobs
        jobs: list = []
        self.jobs = jobs
        nslots = 0
        for r in range(nr - 1, -1, -1):
            self.rsc_lo[r] = nslots
            # pending[r]'s queues are reversed (pop() takes the earliest arrival)
            for pi, q in sorted(rr.pending[r].items(), reverse=True):
                self.slot_first[nslots] = len(jobs)
                self.slot_head[nslots] = len(jobs)
                self.slot_left[nslots] = len(q)
                self.slot_proj[nslots] = pi
                jobs.extend(reversed(q))
                nslots += 1
            self.rsc_hi[r] = nslots
            # nothing in use yet, as RoundRobin's own counts start
            self.sim_nused[r] = 0.0
            self.shortfall[r] = self.result.rsc[r].shortfall
            self.saturated[r] = self.result.rsc[r].saturated_time
        self.slot_first[nslots] = njobs
        self.nslots = nslots
        for i in range(nr * self.nprojects):
            self.p_used[i] = 0.0
        self.napps = self._fill(rr.rscs, bool(rr.exact))
        for m in range(self.nmc):
            self.mc_short[m] = self.result.mc_shortfall[self.mc_keys[m]]
        self.nactive = 0

    def _fill(self, rscs, exact: bool) -> int:
        """Copy the queued jobs into the columns; the number of max_concurrent apps among them."""
        apps: dict = {}
        jobs = self.jobs
        slot_first = self.slot_first
        slot_proj = self.slot_proj
        for s in range(self.nslots):
            pi = slot_proj[s]
            for k in range(slot_first[s], slot_first[s + 1]):
                j = jobs[k]
                r = j.rsc
                self.slot_of[k] = s
                self.rsc[k] = r
                self.proj[k] = pi
                self.gone[k] = 0
                mc = int(j.app.max_concurrent)
                self.mc_limit[k] = mc
                if mc:
                    self.app[k] = apps.setdefault(j.app, len(apps))
                # the remaining FLOPs as the simulation first sees them (RR_SIM's
                # flops_left); nothing the estimate reads changes during a simulation
                self.left[k] = j.est_flops_remaining(exact)
                self.rate[k] = j.flops * rscs[r].overall_frac
                self.gpu_usage[k] = j.gpu_usage
                self.avg_ncpus[k] = j.avg_ncpus
                self.deadline[k] = j.deadline
        return len(apps)

    def run(self):
        """Pick, then run the picked jobs to the first end (or a time-slice step of an hour,
        or a tenth of the time beyond ten hours, when that end is more than an hour away),
        integrate the step, retire the job that ends and pick afresh (RoundRobin.run_repick
        says why)."""
        result = self.result
        nr = self.nr
        self.repick()
        caps = self.caps
        sim_nused = self.sim_nused
        left = self.left
        rate = self.rate
        active = self.active
        for r in range(nr):
            idle = caps[r] - sim_nused[r]
            result.rsc[r].nidle_now = idle if idle > 0.0 else 0.0  # max(0.0, idle)
        slices = 0
        # RR_SIM's flops_left holds the jobs picked so far: after the first pick, these
        max_slices = 10_000 + 1_000 * self.nactive
        inf = math.inf
        while self.nactive:
            nactive = self.nactive
            best = -1
            dt = 0.0
            for i in range(nactive):
                k = active[i]
                d = left[k] / rate[k]
                if best < 0 or d < dt:
                    best = i
                    dt = d
            if not dt < inf:
                self.steps = self.max_steps  # a job that would never end: the bound below
            if dt > 3600.0 and self.steps < self.max_steps:
                best = -1
                dt = dt / 10.0 if dt > 36000.0 else 3600.0
                slices += 1
                if slices > max_slices:
                    raise EngineLimitError(
                        f"the round-robin simulation at {self.now:.0f} s took more than {max_slices} time-slice "
                        f"steps: job sizes or processor speeds are out of range (a job would never end)"
                    )
            else:
                self.steps += 1
                if self.steps > self.max_steps:
                    raise self.rr.too_many_steps()
            if self.nmc:
                self._mc_step(dt)
            if self.detail:
                self._project_shortfall_step(dt)
            self._resource_step(dt)
            for i in range(nactive):
                k = active[i]
                x = left[k] - rate[k] * dt
                left[k] = x if x > 0.0 else 0.0
            self.sim_now += dt
            if best >= 0:
                k = active[best]
                self._retire(k)
                self._remove(k)
                self.repick()
        self._finish()
        return result

    def repick(self) -> None:
        """pick_jobs_to_run (rr_sim.cpp) from nothing: the active jobs and the instances in
        use. A job is taken before the resource is checked, so a CPU already full of GPU
        jobs' CPU shares still takes one CPU job; a project whose app reaches its
        max_concurrent with the job just taken gives no more jobs to this set. A project
        passed over because its resource is full keeps its count of instances from before,
        as in RoundRobin."""
        caps = self.caps
        sim_nused = self.sim_nused
        p_used = self.p_used
        active = self.active
        gpu_usage = self.gpu_usage
        avg_ncpus = self.avg_ncpus
        mc_limit = self.mc_limit
        mc_running = self.mc_running
        slot_first = self.slot_first
        slot_head = self.slot_head
        slot_left = self.slot_left
        slot_proj = self.slot_proj
        gone = self.gone
        nprojects = self.nprojects
        gpu_cpu = self.gpu_cpu
        for a in range(self.napps):
            mc_running[a] = 0
        n = 0
        sim_nused[0] = 0.0
        for r in range(self.nr - 1, -1, -1):
            if r:
                sim_nused[r] = 0.0
            limit = caps[r]
            full = False
            for s in range(self.rsc_lo[r], self.rsc_hi[r]):
                if not slot_left[s]:
                    continue
                pu = r * nprojects + slot_proj[s]
                p_used[pu] = 0.0
                for k in range(slot_head[s], slot_first[s + 1]):
                    if gone[k]:
                        continue
                    active[n] = k
                    n += 1
                    # RR_SIM::activate's counts: a GPU job's CPU share counts in the CPU's
                    # while GPUs compute (RoundRobin._occupy)
                    if r:
                        p_used[pu] += gpu_usage[k]
                        sim_nused[r] += gpu_usage[k]
                        if gpu_cpu:
                            sim_nused[0] += avg_ncpus[k]
                    else:
                        p_used[pu] += avg_ncpus[k]
                        sim_nused[0] += avg_ncpus[k]
                    at_limit = False
                    mc = mc_limit[k]
                    if mc:
                        a = self.app[k]
                        mc_running[a] += 1
                        at_limit = mc_running[a] >= mc
                        if at_limit:
                            self.result.last_mc_limit[(slot_proj[s], r)] = self.sim_now - self.now
                    if sim_nused[r] >= limit:
                        full = True
                        break
                    if at_limit:
                        break
                if full:
                    break
        self.nactive = n

    def _remove(self, k: int) -> None:
        """Take the job `k` out of its project's queue. A queue's jobs before its head are all
        gone, so a pick starts there and does not pass the finished jobs again."""
        s = self.slot_of[k]
        gone = self.gone
        gone[k] = 1
        self.slot_left[s] -= 1
        if k == self.slot_head[s]:
            end = self.slot_first[s + 1]
            k += 1
            while k < end and gone[k]:
                k += 1
            self.slot_head[s] = k

    def _retire(self, k: int) -> None:
        """The job `k` ended: free its instances, note its projected finish and a deadline
        miss, and add a miss's run time to the busy time (RoundRobin.retire under bce, where
        no credit is projected and a job's run time is BOINC's emulator's estimate)."""
        j = self.jobs[k]
        r = self.rsc[k]
        pu = r * self.nprojects + self.proj[k]
        sim_nused = self.sim_nused
        if self.mc_limit[k]:
            self.mc_running[self.app[k]] -= 1
        if r:
            self.p_used[pu] -= self.gpu_usage[k]
            sim_nused[r] -= self.gpu_usage[k]
            if self.gpu_cpu:
                sim_nused[0] -= self.avg_ncpus[k]
        else:
            self.p_used[pu] -= self.avg_ncpus[k]
            sim_nused[0] -= self.avg_ncpus[k]
        sim_now = self.sim_now
        j.rr_finish = sim_now
        if sim_now > self.deadline[k] - self.buf_min:
            j.rr_miss = True
            key = (self.proj[k], r)
            misses = self.result.misses
            misses[key] = misses.get(key, 0) + 1
            # estimated_runtime_remaining(): a job never started is its estimate times the
            # project's duration correction factor (rr_sim.cpp)
            dur = j.runtime_remaining(self.rate[k])
            busy = self.rr.busy
            busy_update(busy[r], dur, j.gpu_usage if r else j.avg_ncpus)
            if r:
                busy_update(busy[0], dur, j.avg_ncpus)

    def _resource_step(self, dt: float) -> None:
        """Shortfall (idle instance-seconds up to the buffer end) and saturated time
        (RSC_WORK_FETCH::update_stats)."""
        sim_now = self.sim_now
        buf_end = self.buf_end
        caps = self.caps
        sim_nused = self.sim_nused
        eps = IDLE_EPS
        for r in range(self.nr):
            idle = caps[r] - sim_nused[r]
            if idle > eps:
                if sim_now < buf_end:
                    end = sim_now + dt
                    self.shortfall[r] += idle * ((buf_end if buf_end < end else end) - sim_now)
            else:
                self.saturated[r] = sim_now + dt - self.now

    def _mc_step(self, dt: float) -> None:
        """max_concurrent: the idle instance-seconds up to the buffer end that each limited
        project may fill (§6.4, §6.5); when a limit held a job back, repick notes."""
        sim_now = self.sim_now
        buf_end = self.buf_end
        if not sim_now < buf_end:
            return
        eps = IDLE_EPS
        for m in range(self.nmc):
            r = self.mc_rsc[m]
            room = self.caps[r] - self.sim_nused[r]
            other = self.mc_cap[m] - self.p_used[r * self.nprojects + self.mc_proj[m]]
            fill = other if other < room else room  # min(room, other)
            if fill > eps:
                end = sim_now + dt
                self.mc_short[m] += fill * ((buf_end if buf_end < end else end) - sim_now)

    def _project_shortfall_step(self, dt: float) -> None:
        """With `detail`: how far each project's simulated use falls below its fair share of
        each resource's instances, up to the buffer end (RoundRobin._project_shortfall_step)."""
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

    def _finish(self) -> None:
        """Write the integrated figures into the result and the simulation, then its tail."""
        result = self.result
        rr = self.rr
        for r in range(self.nr):
            result.rsc[r].shortfall = self.shortfall[r]
            result.rsc[r].saturated_time = self.saturated[r]
        for m in range(self.nmc):
            result.mc_shortfall[self.mc_keys[m]] = self.mc_short[m]
        rr.sim_now = self.sim_now
        rr.steps = self.steps
        rr.tail()
