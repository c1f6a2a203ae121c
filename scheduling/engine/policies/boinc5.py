"""`boinc5`: the debt-era client policy of seed 001 (reference/debt-era.md).

Wall CPU time and on/active fractions; short- and long-term debt (§3); the weighted
round-robin simulation with total_shortfall and shortfall(P) (§4); EDF for results in
danger, then debt order, with the enforcement rules (§5); overworked projects and
work_request_size exactly as the seed's pseudo-code (§6). The debt era knows only CPUs:
GPU versions are not used.
"""

from __future__ import annotations

import math

from ..cpu_sched import JUST_AFTER, WHY_EDF, WHY_PRIORITY, WHY_UNFINISHED, queued_jobs_waiting
from ..rpc import RETRY_CAP, exponential_backoff
from ..rr_sim import wrr_simulate
from ..state import RUNNING
from ..work_fetch import FetchPlan, next_check

STD_MAX = 86400.0


class Boinc5:
    name = "boinc5"

    def __init__(self, em):
        self.em = em
        self.last_run = 0.0
        self.no_work = {}

    def rr(self, now):
        return wrr_simulate(self.em, now)

    # ------------------------------------------------------------------ debts (§3)

    def account(self, t0, t1):
        em = self.em
        used = {p: p.wall_cpu_interval for p in em.projects}
        total = sum(used.values())
        if total <= 0:
            return
        runnable = [p for p in em.projects if any(j.rsc == 0 for j in p.jobs)]
        share = sum(p.share for p in runnable)
        if runnable and share > 0:
            for p in runnable:
                p.std += total * p.share / share - used[p]
            low = min(p.std for p in runnable)
            for p in runnable:
                p.std = min(p.std - low, STD_MAX)
        for p in em.projects:
            if p not in runnable:
                p.std = 0.0
        potential = [p for p in em.projects if p.rsc_ok[0]]
        share = sum(p.share for p in potential)
        if potential and share > 0:
            for p in potential:
                p.ltd += total * p.share / share - used[p]
            mean = sum(p.ltd for p in em.projects) / len(em.projects)
            for p in em.projects:
                p.ltd -= mean

    # ------------------------------------------------------------------ CPU scheduling (§5)

    def run_list(self, now, rr, gpu_allowed):
        em = self.em
        ncpus = em.n_usable_cpus
        payoff = em.period / ncpus
        runnable = [p for p in em.project_order if any(j.rsc == 0 for j in p.jobs)]
        for p in runnable:
            p.anticipated_debt = p.std
        misses = {p: rr.misses.get((p.index, 0), 0) for p in runnable}
        scheduled: list = []
        taken: set = set()
        used = 0.0

        def free_jobs(p):
            return [j for j in p.jobs if j.rsc == 0 and j not in taken]

        def take(j, why):
            nonlocal used
            taken.add(j)
            scheduled.append((j, why))
            used += j.avg_ncpus
            j.project.anticipated_debt -= payoff

        # step 2: EDF among projects with predicted misses
        while used < ncpus - 1e-9:
            best = None
            for p in runnable:
                if misses[p] <= 0:
                    continue
                js = free_jobs(p)
                if js:
                    j = min(js, key=lambda j: (j.deadline, j.index))
                    if best is None or (j.deadline, p.index) < (best.deadline, best.project.index):
                        best = j
            if best is None:
                break
            misses[best.project] -= 1
            take(best, WHY_EDF)
        # steps 3-5
        while used < ncpus - 1e-9:
            keep = [j for j in em.running if j.rsc == 0 and j not in taken and now - j.run_start < em.period]
            if keep:
                take(min(keep, key=lambda j: j.index), WHY_UNFINISHED)
                continue
            cands = [p for p in runnable if free_jobs(p)]
            if not cands:
                break
            p = max(cands, key=lambda q: (q.anticipated_debt, -q.index))
            js = free_jobs(p)
            running = [j for j in js if j.state == RUNNING]
            j = running[0] if running else min(js, key=lambda j: (j.deadline, j.index))
            take(j, WHY_PRIORITY)
        result = self._enforce(now, scheduled)
        self.last_run = now
        return result

    def _checkpointed_since(self, j, t):
        cp = j.checkpoint_period
        if cp <= 0:
            return True
        k = math.floor((self.em.now - j.run_start) / cp + 1e-9)
        return k >= 1 and j.run_start + k * cp > t

    def _enforce(self, now, scheduled):
        """Enforcement (reference/debt-era.md §5): X scheduled but not running, Y running but
        not scheduled. A result of X in deadline danger preempts the Y result with the least
        work since its checkpoint; a Y result that checkpointed since the last run yields."""
        em = self.em
        want = {j for j, _w in scheduled}
        why = {j: w for j, w in scheduled}
        x = [j for j, _w in scheduled if j.state != RUNNING]
        y = [j for j in em.running if j.rsc == 0 and j not in want]
        run = [j for j in em.running if j.rsc == 0 and j in want]
        for j in x:
            victim = None
            if j.rr_miss and y:
                victim = min(y, key=lambda v: (v.done - v.ckpt_done) / v.flops)
            else:
                ready = [v for v in y if self._checkpointed_since(v, self.last_run)]
                if ready:
                    victim = ready[0]
            if victim is not None:
                y.remove(victim)
                run.append(j)
            elif sum(v.avg_ncpus for v in run + y) + j.avg_ncpus <= em.n_usable_cpus + 1e-9:
                run.append(j)
        chosen = [(j, why.get(j, WHY_UNFINISHED), -1) for j in run]
        chosen += [(j, WHY_UNFINISHED, -1) for j in y]
        return chosen

    def reschedule_at(self, now):
        """At the end of each scheduling period, and when a result kept for want of a
        checkpoint reaches its next one."""
        em = self.em
        if not em.running or not queued_jobs_waiting(em):
            return math.inf
        t = (math.floor(now / em.period) + 1) * em.period
        for j in em.running:
            cp = j.checkpoint_period
            if cp > 0:
                t = min(t, j.run_start + (math.floor((now - j.run_start) / cp) + 1) * cp)
        return t + JUST_AFTER

    # ------------------------------------------------------------------ work fetch (§6)

    def overworked(self, p):
        return p.ltd < -self.em.period

    def work_request_sizes(self, now, rr) -> dict:
        """work_request_size(P), exactly as seed 001's pseudo-code (reference/debt-era.md §6)."""
        em = self.em
        projects = [p for p in em.projects if p.rsc_ok[0]]

        def deferred(p):
            return p.min_rpc_time > now or p.master_fetch_pending

        size = {}
        for p in projects:
            if deferred(p) or self.overworked(p):
                size[p] = 0.0
            else:
                size[p] = rr.project_shortfall[p.index]
        if rr.total_shortfall > 0:
            if all(v == 0 for v in size.values()):
                for p in projects:
                    if deferred(p) or self.overworked(p):
                        continue
                    size[p] = 1.0
            if all(v == 0 for v in size.values()):
                for p in projects:
                    if deferred(p):
                        continue
                    size[p] = 1.0
        asking = [p for p in projects if size[p] > 0]
        if asking:
            share = sum(p.share for p in asking)
            for p in asking:
                frac = p.share / share if share > 0 else 1.0 / len(asking)
                size[p] = rr.total_shortfall * frac
        return size

    def _share_frac(self, p):
        potential = [q for q in self.em.projects if q.rsc_ok[0]]
        total = sum(q.share for q in potential)
        return p.share / total if total > 0 else 1.0

    def choose_fetch(self, now, rr):
        sizes = self.work_request_sizes(now, rr)
        cands = [p for p in self.em.project_order if sizes.get(p, 0) > 0]
        if not cands:
            return None
        p = max(cands, key=lambda q: (q.ltd + rr.project_shortfall[q.index], -q.index))
        secs = sizes[p] / self._share_frac(p)
        text = (
            f"Asked {p.name} for {secs:.0f} project-normalized CPU seconds: work_request_size "
            f"{sizes[p]:.0f} s of total_shortfall {rr.total_shortfall:.0f} s, and the greatest "
            f"long-term debt + shortfall ({p.ltd + rr.project_shortfall[p.index]:.0f} s)."
        )
        return FetchPlan(p, {0: (secs, 0.0)}, "need_work", text)

    def no_fetch_reason(self, now, rr):
        """Why no project is asked (reference/debt-era.md §6): no shortfall, or every project
        with a CPU app deferred or overworked; the sentence as a function (work_fetch)."""
        shortfall = rr.total_shortfall
        if shortfall <= 0:
            return (
                "no shortfall",
            ), lambda: f"No work fetch: total_shortfall is 0 over the {self.em.work_buf_min:.0f} s minimum queue."
        why = []
        for p in self.em.project_order:
            if not p.rsc_ok[0]:
                continue
            if p.master_fetch_pending:
                why.append((p.name, "master fetch pending"))
            elif p.min_rpc_time > now:
                why.append((p.name, "deferred"))
            elif self.overworked(p):
                why.append((p.name, "overworked"))
        return (
            ("blocked", tuple(why)),
            lambda: (
                f"No work fetch: total_shortfall is {shortfall:.0f} s but no project can be asked ("
                + "; ".join(f"{name}: {reason}" for name, reason in why)
                + ")."
            ),
        )

    def piggyback(self, p, now, rr):
        sizes = self.work_request_sizes(now, rr)
        if sizes.get(p, 0) > 0:
            return {0: (sizes[p] / self._share_frac(p), 0.0)}
        return {}

    def request_scale(self, p):
        return 1.0 / self._share_frac(p)

    def handle_reply(self, p, requests, received, now):
        """A project that sent nothing when asked is deferred with the RPC back-off."""
        if not requests:
            return []
        if received.get(0, 0) > 0:
            self.no_work[p] = 0
            return []
        n = self.no_work.get(p, 0) + 1
        self.no_work[p] = n
        delay = exponential_backoff(min(n, RETRY_CAP), self.em.rng)
        p.min_rpc_time = max(p.min_rpc_time, now + delay)
        return [f"{p.name} sent no work: deferring it {delay:.0f} s."]

    def next_fetch_check(self, now, rr):
        return next_check(self.em, now, rr)
