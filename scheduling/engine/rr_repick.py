# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The round-robin simulation as BOINC's client has it now (rr_sim.cpp), over typed records.

Under `--compat bce` every simulation picks the running set afresh at every job end
(reference/client.md §6.4, pick_jobs_to_run; docs/engine-fidelity.md, "The round-robin
simulation picks afresh"), so a host with a few dozen queued jobs re-picks them thousands of
times a day. `Repick` runs it over the columns of the queued jobs that rr_queue.QueuedJobs
fills once per simulation (remaining FLOPs, rates, instances, deadlines, project and resource,
max_concurrent app). rr_repick.pxd gives its loops' locals C types, so the compiled core
(build.py) runs this module as C; without a compiler the same source runs as Python, on
`array.array`s, with the same arithmetic in the same order. The jobs' outputs (`rr_finish`,
`rr_miss`) and the `RRResult` are written back as the Python simulation writes them;
tests/scheduling/test_rr_repick.py and bench/engine_identity.py check the figures bit for bit.
The first line of the file turns off Cython's index checks on the compiled core: every
index the loops use is within its column, whose length the queue sets before a simulation.
"""

from __future__ import annotations

import math

from .rr_queue import QueuedJobs
from .state import EngineLimitError


class Repick(QueuedJobs):
    """RR_SIM::simulate with pick_jobs_to_run afresh at every job end, for a `RoundRobin`
    (rr_sim.py) whose jobs are queued: `load(rr)`, then `run()` fills `rr.result` and
    returns it. One Repick serves every simulation of a run (`for_emulator`).

    The queued jobs are numbered in pick order (QueuedJobs): per resource, GPU types first,
    projects in the emulator's pointer order (the reverse of the file order), each project's
    jobs in arrival order. The instances in use (`sim_nused`, per resource) and per project
    (`p_used`) are those the Python simulation keeps, with the same updates in the same
    order, since the max_concurrent shortfall and the per-project shortfall read them."""

    @staticmethod
    def for_emulator(em, static) -> Repick:
        """The emulator's one Repick, made at its first simulation: its columns serve every
        simulation of the run, grown when the queue outgrows them."""
        sim = em.__dict__.get("_rr_repick")
        if sim is None:
            sim = em._rr_repick = Repick(em, static)
        return sim

    def run(self):
        """Pick, then run the picked jobs to the first end (or a time-slice step of an hour,
        or a tenth of the time beyond ten hours, when that end is more than an hour away),
        integrate the step, retire the job that ends and pick afresh, after a time-slice
        step too (RoundRobin.run_repick says why)."""
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
                self._mc_fill(dt)
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
                self._end(k)
                self._take(self.slot_of[k], k)
            # a time-slice step picks afresh too: the same jobs, but the pick notes a project
            # at its max_concurrent limit, counts GPU jobs' CPU shares again and drops jobs
            # that ended from the pending lists
            self.repick()
        return self._write_back()

    def repick(self) -> None:
        """pick_jobs_to_run (rr_sim.cpp) from nothing: the active jobs and the instances in
        use. A job is taken before the resource is checked, so a CPU already full of GPU
        jobs' CPU shares still takes one CPU job. When a job's app reaches its
        max_concurrent, its project is at its limit for the rest of the pick: it gives no
        more jobs to this resource, and on each later one it ends its turn after one step of
        its pending list, taking one job or dropping one that ended.

        BOINC's pending list of a project on a resource keeps the jobs that ended in the
        simulation until a pick passes them (`dropped`, from `slot_lo` on). Each project's
        count on a resource (`pwf_used`, RSC_PROJECT_WORK_FETCH's sim_nused, which the
        max_concurrent shortfall reads) is set to 0 when that list is not empty, and a GPU
        job adds its CPU share to its project's CPU count while GPUs compute; so that count
        keeps the GPU jobs' CPU shares of a project with no CPU jobs left, pick after pick
        (docs/engine-fidelity.md, "max_concurrent in work fetch")."""
        # the columns are read through `self` (no local views of them): on the compiled core a
        # local view of a column is a copy of its descriptor, made and let go at every pick
        nprojects = self.nprojects
        gpu_cpu = self.gpu_cpu
        for a in range(self.napps):
            self.mc_running[a] = 0
        for pi in range(nprojects):
            self.proj_at_limit[pi] = 0
        n = 0
        self.sim_nused[0] = 0.0
        for r in range(self.nr - 1, -1, -1):
            if r:
                self.sim_nused[r] = 0.0
            limit = self.caps[r]
            lo = self.rsc_lo[r]
            hi = self.rsc_hi[r]
            for s in range(lo, hi):
                if self.slot_lo[s] < self.slot_first[s + 1]:
                    self.pwf_used[r * nprojects + self.slot_proj[s]] = 0.0
            full = False
            for s in range(lo, hi):
                end = self.slot_first[s + 1]
                if self.slot_lo[s] >= end:
                    continue  # its pending list is empty
                pi = self.slot_proj[s]
                pu = r * nprojects + pi
                self.p_used[pu] = 0.0
                for k in range(self.slot_lo[s], end):
                    if self.dropped[k]:
                        continue
                    if self.gone[k]:
                        # the pick passes a job that ended and drops it from the list
                        self.dropped[k] = 1
                        if k == self.slot_lo[s]:
                            lo_k = k + 1
                            while lo_k < end and self.dropped[lo_k]:
                                lo_k += 1
                            self.slot_lo[s] = lo_k
                        if self.proj_at_limit[pi]:
                            break
                        continue
                    self.active[n] = k
                    n += 1
                    # RR_SIM::activate's counts: a GPU job's CPU share counts in the CPU's
                    # while GPUs compute
                    if r:
                        self.p_used[pu] += self.gpu_usage[k]
                        self.sim_nused[r] += self.gpu_usage[k]
                        self.pwf_used[pu] += self.gpu_usage[k]
                        if gpu_cpu:
                            self.sim_nused[0] += self.avg_ncpus[k]
                            self.pwf_used[pi] += self.avg_ncpus[k]
                    else:
                        self.p_used[pu] += self.avg_ncpus[k]
                        self.sim_nused[0] += self.avg_ncpus[k]
                        self.pwf_used[pu] += self.avg_ncpus[k]
                    mc = self.mc_limit[k]
                    if mc:
                        a = self.app[k]
                        self.mc_running[a] += 1
                        if self.mc_running[a] >= mc:
                            self.proj_at_limit[pi] = 1
                            self.result.last_mc_limit[(pi, r)] = self.sim_now - self.now
                    if self.sim_nused[r] >= limit:
                        full = True
                        break
                    if self.proj_at_limit[pi]:
                        break
                if full:
                    break
        self.nactive = n
