# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The round-robin simulation by scheduling priority (`--compat intended`), over typed records.

RoundRobin (rr_sim.py) under `--compat intended` picks jobs by project priority, which the
projected REC and each pick's charge move, and runs the picked jobs from job end to job end
(reference/client.md §6.4). `ByPriority` runs that simulation over the columns of the queued
jobs that rr_queue.QueuedJobs fills (remaining FLOPs, rates, end tolerances, instances,
credit, project and resource) and over columns of the projects (REC projected, priority,
share, credit rate). One `ByPriority` serves every simulation of a run: its columns are kept
and grown, not made again for each simulation.
rr_priority.pxd gives them and the loops' locals C types, so the compiled core (build.py)
runs this module as C; without a compiler the same source runs as Python, on
`array.array`s, with the same arithmetic in the same order. The jobs' outputs (`rr_finish`,
`rr_miss`), the projects' projected REC and priority, and the `RRResult` are written back as
RoundRobin's own steps wrote them; bench/engine_identity.py checks the figures bit for bit.
The first line of the file turns off Cython's index checks on the compiled core: every
index the loops use is within its column, whose length the queue sets before a simulation.
"""

from __future__ import annotations

import math
from array import array

from .rr_queue import QueuedJobs, doubles, ints
from .state import COBBLESTONE_SCALE

LN2 = math.log(2.0)  # rec.LN2


def _wider(old: array, code: str, n: int, keep: int) -> array:
    """A column of `n` entries, the first `keep` copied from `old`."""
    out = doubles(n) if code == "d" else ints(n)
    if keep:
        out[:keep] = old[:keep]
    return out


class Contests:
    """The picks of one simulation made by priority with other projects in the running
    (rr_sim.order_time reads them): per pick and other project, the priority gap, the chosen
    and the other project's index, the part of each priority that moves with REC, and each
    share_frac."""

    def __init__(self, n: int, gap, chosen, other, moving_c, moving_o, sf_c, sf_o):
        self.n = n
        self.columns = (gap, chosen, other, moving_c, moving_o, sf_c, sf_o)
        self.gap = gap
        self.chosen = chosen
        self.other = other
        self.moving_c = moving_c
        self.moving_o = moving_o
        self.sf_c = sf_c
        self.sf_o = sf_o

    def __len__(self) -> int:
        return self.n

    def __reduce__(self):
        # an emulator pickled between pieces of a run keeps its last simulation's result
        return (Contests, (self.n, *self.columns))

    def time(self, drift: array, rec_sum: float, k: float) -> float:
        """rr_sim.order_time's loop: the seconds before the first pick can flip, given each
        project's REC drift (|REC units per second|, by project index)."""
        t = math.inf
        d = drift
        gap = self.gap
        chosen = self.chosen
        other = self.other
        moving_c = self.moving_c
        moving_o = self.moving_o
        sf_c = self.sf_c
        sf_o = self.sf_o
        for e in range(self.n):
            a = sf_c[e]
            b = sf_o[e]
            # a zero-share project's priority is -1000 - rec_temp / rec_sum (compute_priority)
            speed = (d[chosen[e]] / (a if a != 0.0 else 1.0) + d[other[e]] / (b if b != 0.0 else 1.0)) / rec_sum + k * (
                moving_c[e] + moving_o[e]
            )
            if speed > 0:
                # a tie that can move may break the other way at once (ties go to the first project)
                x = gap[e] / speed
                if x < t:  # min(t, x)
                    t = x
        return t


class ByPriority(QueuedJobs):
    """RoundRobin.run under `--compat intended` over typed records; one per emulator
    (`for_emulator`), `run(rr)` for each `RoundRobin` whose jobs are queued.

    The queued jobs are numbered per resource (GPU types first, then the CPU) and project
    (in index order), each project's jobs in arrival order (QueuedJobs). `active` holds the
    picked jobs in pick order, as RoundRobin's lists do; the instances in use (`sim_nused`,
    per resource, and `p_used`, index r x nprojects + project index) and the projects'
    projected credit rates, REC and priorities move with RoundRobin's updates in its order."""

    def __init__(self, em, static):
        super().__init__(em, static)
        nprojects = self.nprojects
        self.rec_temp = doubles(nprojects)
        self.priority = doubles(nprojects)
        self.share = doubles(nprojects)
        self.share_frac = doubles(nprojects)
        self.credit = doubles(nprojects)
        self.slot_open = ints(self.nr * nprojects)
        self.mc_last = doubles(self.nmc or 1)
        self.mc_slot = ints(self.nmc or 1)
        self.ccapacity = 0
        self.c_gap_a = self.c_moving_c_a = self.c_moving_o_a = self.c_sf_c_a = self.c_sf_o_a = doubles(0)
        self.c_chosen_a = self.c_other_a = ints(0)
        self._grow_contests(64)

    @staticmethod
    def for_emulator(em, static) -> ByPriority:
        """The emulator's one ByPriority, made at its first simulation."""
        sim = em.__dict__.get("_rr_by_priority")
        if sim is None:
            sim = em._rr_by_priority = ByPriority(em, static)
        return sim

    def _grow_contests(self, n: int) -> None:
        """Room for `n` contested picks, keeping those recorded. Each column is an array
        (`*_a`, which the result's copy slices) and a view of it (which the picks write)."""
        keep = self.ccapacity
        self.ccapacity = n
        self.c_gap_a = self.c_gap = _wider(self.c_gap_a, "d", n, keep)
        self.c_moving_c_a = self.c_moving_c = _wider(self.c_moving_c_a, "d", n, keep)
        self.c_moving_o_a = self.c_moving_o = _wider(self.c_moving_o_a, "d", n, keep)
        self.c_sf_c_a = self.c_sf_c = _wider(self.c_sf_c_a, "d", n, keep)
        self.c_sf_o_a = self.c_sf_o = _wider(self.c_sf_o_a, "d", n, keep)
        self.c_chosen_a = self.c_chosen = _wider(self.c_chosen_a, "i", n, keep)
        self.c_other_a = self.c_other = _wider(self.c_other_a, "i", n, keep)

    # ------------------------------------------------------------------ one simulation

    def run(self, rr):
        """Fill `rr.result` from RoundRobin `rr` (its priorities initialised), write the
        jobs' and projects' outputs and return the result."""
        self.load(rr)
        self._load_projects(rr)
        self._simulate()
        return self._finish()

    def _load_projects(self, rr) -> None:
        """Copy the projects' priorities into the columns, with what the simulation reads
        of the emulator."""
        em = rr.em
        for p in rr.projects:
            pi = p.index
            self.rec_temp[pi] = p.rec_temp
            self.priority[pi] = p.priority
            self.share[pi] = p.share
            self.share_frac[pi] = p.share_frac
            self.credit[pi] = 0.0
        for m in range(self.nmc):
            pi, r = self.mc_keys[m]
            self.mc_last[m] = self.result.last_mc_limit[(pi, r)]
            self.mc_slot[m] = self.slot_at[r * self.nprojects + pi]
        self.ncontests = 0
        self.rec_sum = rr.rec_sum
        self.total_peak_flops = em.total_peak_flops
        self.half_life = em.rec_half_life

    def _simulate(self) -> None:
        """RoundRobin.run by priority: pick, then run the picked jobs to the first end,
        integrate the step (max_concurrent, per-project shortfall, shortfall and saturation,
        projected REC), retire the jobs that end and pick again."""
        result = self.result
        nr = self.nr
        caps = self.caps
        sim_nused = self.sim_nused
        left = self.left
        rate = self.rate
        tol = self.tol
        active = self.active
        self.pick()
        for r in range(nr):
            idle = caps[r] - sim_nused[r]
            result.rsc[r].nidle_now = idle if idle > 0.0 else 0.0  # max(0.0, idle)
        while self.nactive:
            nactive = self.nactive
            self.steps += 1
            if self.steps > self.max_steps:
                self.rr.steps = self.steps
                raise self.rr.too_many_steps()
            # min(left / rate): the first of equals
            k = active[0]
            dt = left[k] / rate[k]
            for i in range(1, nactive):
                k = active[i]
                d = left[k] / rate[k]
                if d < dt:
                    dt = d
            for i in range(nactive):
                k = active[i]
                left[k] = left[k] - rate[k] * dt
            if self.nmc:
                self._mc_step(dt)
            if self.detail:
                self._project_shortfall_step(dt)
            self._resource_step(dt)
            self._rec_step(dt)
            self.sim_now += dt
            # the jobs that end, in pick order, are retired in that order and leave the
            # active list, which keeps the others' order
            n = 0
            for i in range(nactive):
                k = active[i]
                if left[k] <= tol[k]:
                    self._retire(k)
                else:
                    active[n] = k
                    n += 1
            if n < nactive:
                self.nactive = n
                self.pick()

    def pick(self) -> None:
        """Fill the idle instances, GPU types first, then the CPU (RR_SIM::pick_jobs_to_run
        by priority): the project of the highest priority, the lowest index among equals, gives
        its first job (with max_concurrent, its first job whose app is under its limit), and
        the pick charges the project's projected REC (adjust_rec_sched)."""
        caps = self.caps
        sim_nused = self.sim_nused
        p_used = self.p_used
        priority = self.priority
        rec_temp = self.rec_temp
        share = self.share
        share_frac = self.share_frac
        credit = self.credit
        slot_left = self.slot_left
        slot_open = self.slot_open
        slot_proj = self.slot_proj
        active = self.active
        gpu_usage = self.gpu_usage
        avg_ncpus = self.avg_ncpus
        peak = self.peak
        nprojects = self.nprojects
        any_mc = self.any_mc
        gpu_cpu = self.gpu_cpu
        rec_sum = self.rec_sum
        total_peak_flops = self.total_peak_flops
        for r in range(self.nr - 1, -1, -1):
            limit = caps[r]
            lo = self.rsc_lo[r]
            hi = self.rsc_hi[r]
            nopen = 0
            for s in range(lo, hi):
                if slot_left[s]:
                    slot_open[s] = 1
                    nopen += 1
                else:
                    slot_open[s] = 0
            if not nopen or sim_nused[r] >= limit:
                continue
            while sim_nused[r] < limit and nopen:
                # the highest priority; the lowest index among equals
                best = -1
                best_pr = 0.0
                for s in range(lo, hi):
                    if slot_open[s]:
                        pr = priority[slot_proj[s]]
                        if best < 0 or pr > best_pr:
                            best = s
                            best_pr = pr
                s = best
                pi = slot_proj[s]
                if any_mc:
                    k = self._next_job(s)
                    if k < 0:
                        slot_open[s] = 0
                        nopen -= 1
                        continue
                    if nopen > 1:
                        self._contest(pi, lo, hi)
                    self._take(s, k)
                    if self.mc_limit[k]:
                        self.mc_running[self.app[k]] += 1
                else:
                    if nopen > 1:
                        self._contest(pi, lo, hi)
                    k = self.slot_head[s]
                    self._take(s, k)
                if not slot_left[s]:
                    slot_open[s] = 0
                    nopen -= 1
                active[self.nactive] = k
                self.nactive += 1
                # RR_SIM::activate's counts
                pu = r * nprojects + pi
                if r:
                    p_used[pu] += gpu_usage[k]
                    sim_nused[r] += gpu_usage[k]
                    if gpu_cpu:
                        sim_nused[0] += avg_ncpus[k]
                else:
                    p_used[pu] += avg_ncpus[k]
                    sim_nused[0] += avg_ncpus[k]
                credit[pi] = credit[pi] + peak[k] * COBBLESTONE_SCALE
                # adjust_rec_sched, then compute_priority
                rec_temp[pi] += peak[k] / total_peak_flops * rec_sum / 24.0
                rec_frac = rec_temp[pi] / rec_sum
                if share[pi] == 0:
                    priority[pi] = -1e3 - rec_frac
                elif share_frac[pi] > 0:
                    priority[pi] = -rec_frac / share_frac[pi]
                else:
                    priority[pi] = -rec_frac

    def _next_job(self, s: int) -> int:
        """The slot's earliest job not taken whose app is under its max_concurrent, or -1."""
        gone = self.gone
        mc_limit = self.mc_limit
        for k in range(self.slot_head[s], self.slot_first[s + 1]):
            if gone[k]:
                continue
            mc = mc_limit[k]
            if not mc or self.mc_running[self.app[k]] < mc:
                return k
        return -1

    def _contest(self, pi: int, lo: int, hi: int) -> None:
        """Record a pick by priority with other projects in the running (rr_sim.order_time
        reads them), one entry per other project."""
        rec_sum = self.rec_sum
        priority = self.priority
        rec_temp = self.rec_temp
        share_frac = self.share_frac
        slot_open = self.slot_open
        slot_proj = self.slot_proj
        sf_c = share_frac[pi]
        pri_c = priority[pi]
        moving_c = rec_temp[pi] / (rec_sum * (sf_c if sf_c != 0.0 else 1.0))
        for s in range(lo, hi):
            if not slot_open[s]:
                continue
            i = slot_proj[s]
            if i == pi:
                continue
            e = self.ncontests
            if e == self.ccapacity:
                self._grow_contests(2 * e)
            sf_o = share_frac[i]
            self.c_gap[e] = pri_c - priority[i]
            self.c_chosen[e] = pi
            self.c_other[e] = i
            self.c_moving_c[e] = moving_c
            self.c_moving_o[e] = rec_temp[i] / (rec_sum * (sf_o if sf_o != 0.0 else 1.0))
            self.c_sf_c[e] = sf_c
            self.c_sf_o[e] = sf_o
            self.ncontests = e + 1

    # ------------------------------------------------------------------ running to the next end

    def _mc_step(self, dt: float) -> None:
        """max_concurrent: when a limit last held a job back, then the
        idle instance-seconds up to the buffer end that each limited project may fill."""
        for m in range(self.nmc):
            s = self.mc_slot[m]
            if s >= 0 and self.slot_left[s] and self._next_job(s) < 0:
                self.mc_last[m] = self.sim_now + dt - self.now
        self._mc_fill(dt)

    def _rec_step(self, dt: float) -> None:
        """Projected REC over a step: each project with active jobs earns their credit, and
        its priority follows (with rr_sim.decay_factors' and rr_sim.decayed's
        arithmetic)."""
        sim_now = self.sim_now
        half_life = self.half_life
        diff = sim_now + dt - sim_now
        if diff <= 0:
            return  # no REC moves, and every charged priority already follows its rec_temp
        w = math.exp(-diff * LN2 / half_life)
        rec_sum = self.rec_sum
        credit = self.credit
        rec_temp = self.rec_temp
        priority = self.priority
        share = self.share
        share_frac = self.share_frac
        one_w = 1.0 - w
        if one_w > 1e-6:
            days = diff / 86400.0
            for pi in range(self.nprojects):
                credit_rate = credit[pi]
                if credit_rate > 0:
                    rec = rec_temp[pi] * w + one_w * (credit_rate * dt / days)
                    rec_temp[pi] = rec
                    if share[pi] == 0:
                        priority[pi] = -1e3 - rec / rec_sum
                    elif share_frac[pi] > 0:
                        priority[pi] = -(rec / rec_sum) / share_frac[pi]
                    else:
                        priority[pi] = -(rec / rec_sum)
        else:
            for pi in range(self.nprojects):
                credit_rate = credit[pi]
                if credit_rate > 0:
                    rec = rec_temp[pi] + LN2 * (credit_rate * dt) * 86400.0 / half_life
                    rec_temp[pi] = rec
                    rec_frac = rec / rec_sum
                    if share[pi] == 0:
                        priority[pi] = -1e3 - rec_frac
                    elif share_frac[pi] > 0:
                        priority[pi] = -rec_frac / share_frac[pi]
                    else:
                        priority[pi] = -rec_frac

    def _retire(self, k: int) -> None:
        """The job `k` ended (QueuedJobs._end), and its projected credit with it."""
        self._end(k)
        pi = self.proj[k]
        self.credit[pi] = self.credit[pi] - self.peak[k] * COBBLESTONE_SCALE

    def _finish(self):
        """Write the last max_concurrent limits into the result, the projected REC and
        priorities into the projects and the contested picks into the result, then the
        figures both simulations write (QueuedJobs._write_back); the result."""
        result = self.result
        for m in range(self.nmc):
            result.last_mc_limit[self.mc_keys[m]] = self.mc_last[m]
        for p in self.rr.projects:
            pi = p.index
            p.rec_temp = self.rec_temp[pi]
            p.priority = self.priority[pi]
        n = self.ncontests
        if n:
            result.contested = Contests(
                n,
                self.c_gap_a[:n],
                self.c_chosen_a[:n],
                self.c_other_a[:n],
                self.c_moving_c_a[:n],
                self.c_moving_o_a[:n],
                self.c_sf_c_a[:n],
                self.c_sf_o_a[:n],
            )
        return self._write_back()
