"""`boinc5`: the debt-era client policy of seed 001 (reference/debt-era.md), with GPUs as
BOINC 6's debt-era client (6.10) scheduled them.

Wall CPU time and on/active fractions; short- and long-term debt (§3); the weighted
round-robin simulation with total_shortfall and shortfall(P) (§4); EDF for results in
danger, then debt order, with the enforcement rules (§5); overworked projects and
work_request_size exactly as the seed's pseudo-code (§6).

GPUs: BOINC 6 kept a short- and a long-term debt per processor type and project
(RSC_PROJECT_WORK_FETCH), accounted the same way over the projects runnable on that type
(instance-seconds instead of CPU seconds), simulated each type's round-robin beside the
CPU's, scheduled GPU jobs before CPU jobs (EDF for GPU jobs in danger, then the project
with the most GPU debt), and asked for GPU work from the project with the most long-term
GPU debt while the GPU type had a shortfall.

Short-term debt is normalized as seed 001 says (the smallest runnable one at 0, capped at one
day, `STD_MAX`); it is recorded and quoted less its mean over the runnable projects, as BOINC 6
kept it, so a project owed nothing more than the others reads 0 instead of climbing towards
the cap. The shift is common to the runnable projects, so the order the scheduler reads, and
every decision, is that of the seed's rule.
"""

from __future__ import annotations

import math

from ..cpu_sched import (
    JUST_AFTER,
    WHY_EDF,
    WHY_PRIORITY,
    WHY_UNFINISHED,
    _reserve_gpu,
    assign_coprocs,
    queued_jobs_waiting,
)
from ..rpc import RETRY_CAP, exponential_backoff
from ..rr_sim import wrr_simulate
from ..state import RUNNING
from ..work_fetch import FetchPlan, next_check

STD_MAX = 86400.0


def _set_std(p, v: float) -> None:
    p.std = v


def _set_rsc_std(p, r: int, v: float) -> None:
    p.rsc_std[r] = v


def _update_std(runnable, total: float, used: dict, projects, get, put) -> None:
    """Short-term debt over one accounting interval (reference/debt-era.md §3): each runnable
    project is owed its share of the `total` time used and charged what it used; then the
    debts are normalized so the smallest is 0 and capped at STD_MAX. A project with nothing
    runnable owes and is owed nothing."""
    share = sum(p.share for p in runnable)
    if runnable and share > 0:
        for p in runnable:
            put(p, get(p) + total * p.share / share - used[p])
        low = min(get(p) for p in runnable)
        for p in runnable:
            put(p, min(get(p) - low, STD_MAX))
    for p in projects:
        if p not in runnable:
            put(p, 0.0)


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


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
        runnable = [p for p in em.projects if any(j.rsc == 0 for j in p.jobs)]
        if total > 0:
            _update_std(runnable, total, used, em.projects, lambda p: p.std, _set_std)
            potential = [p for p in em.projects if p.rsc_ok[0]]
            share = sum(p.share for p in potential)
            if potential and share > 0:
                for p in potential:
                    p.ltd += total * p.share / share - used[p]
                mean = sum(p.ltd for p in em.projects) / len(em.projects)
                for p in em.projects:
                    p.ltd -= mean
        # shown (and quoted by the decision log) as BOINC 6 kept it: mean 0 over the runnable
        # projects; a shift common to them all, so the order the scheduler reads is the same
        shift = _mean(p.std for p in runnable)
        for p in em.projects:
            p.std_shown = p.std - shift if p in runnable else 0.0
        for r in range(1, len(em.resources)):
            used = {p: p.wall_rsc_interval[r] for p in em.projects}
            total = sum(used.values())
            if total <= 0:
                continue
            runnable = [p for p in em.projects if any(j.rsc == r for j in p.jobs)]
            _update_std(
                runnable, total, used, em.projects, lambda p, r=r: p.rsc_std[r], lambda p, v, r=r: _set_rsc_std(p, r, v)
            )
            potential = [p for p in em.projects if p.rsc_ok[r]]
            share = sum(p.share for p in potential)
            if potential and share > 0:
                for p in potential:
                    p.rsc_ltd[r] += total * p.share / share - used[p]
                mean = sum(p.rsc_ltd[r] for p in potential) / len(potential)
                for p in potential:
                    p.rsc_ltd[r] -= mean

    # ------------------------------------------------------------------ CPU scheduling (§5)

    def run_list(self, now, rr, gpu_allowed):
        em = self.em
        gpu = self._gpu_run_list(now, rr) if gpu_allowed else []
        # the GPU jobs, placed first, hold their CPUs (reference/client.md §6.3)
        gpu_cpus = sum(j.avg_ncpus for j, _w, _d in gpu)
        ncpus = em.n_usable_cpus
        payoff = em.period / ncpus
        runnable = [p for p in em.project_order if any(j.rsc == 0 for j in p.jobs)]
        for p in runnable:
            p.anticipated_debt = p.std
        # the decision log quotes debts less their mean over the runnable projects (as shown)
        shift = _mean(p.std for p in runnable)
        em.pick_table[0] = [(p.name, p.std - shift) for p in runnable]
        pick_log: list = []
        em.pick_log[0] = pick_log
        misses = {p: rr.misses.get((p.index, 0), 0) for p in runnable}
        scheduled: list = []
        taken: set = set()
        used = gpu_cpus

        def free_jobs(p):
            return [j for j in p.jobs if j.rsc == 0 and j not in taken]

        def take(j, why):
            nonlocal used
            taken.add(j)
            j.pick_value = j.project.anticipated_debt - shift
            j.pick_seq = len(pick_log)
            scheduled.append((j, why))
            used += j.avg_ncpus
            j.project.anticipated_debt -= payoff
            pick_log.append((j.project.name, j.project.anticipated_debt - shift))

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
        result = gpu + self._enforce(now, scheduled, gpu_cpus)
        self.last_run = now
        return result

    def _gpu_run_list(self, now, rr) -> list:
        """GPU jobs first, each GPU type on its own, as BOINC 6 did: EDF for the jobs the
        round-robin simulation sees miss their deadline, then a running job within its time
        slice keeps its device, then the project with the most short-term debt for the type
        (lowered by the period over the type's instances per pick). The devices go to the
        picks in order (cpu_sched.assign_coprocs); a GPU job is always removed from memory
        when preempted (reference/client.md §6.3)."""
        em = self.em
        out: list = []
        # a GPU job runs only while the CPUs the GPU jobs use stay within one more than the
        # host has (reference/client.md §6.3, the rule BOINC's clients keep for GPU jobs)
        cpu = [0.0]
        for r in range(1, len(em.resources)):
            res = em.resources[r]
            payoff = em.period / max(1, res.ninstances)
            runnable = [p for p in em.project_order if any(j.rsc == r for j in p.jobs)]
            if not runnable:
                continue
            for p in runnable:
                p.rsc_anticipated_debt[r] = p.rsc_std[r]
            shift = _mean(p.rsc_std[r] for p in runnable)
            em.pick_table[r] = [(p.name, p.rsc_std[r] - shift) for p in runnable]
            em.pick_log[r] = []
            misses = {p: rr.misses.get((p.index, r), 0) for p in runnable}
            usage = [0.0] * res.ninstances
            picks: list = []
            taken: set = set()

            def free_jobs(p, r=r, taken=taken):
                return [j for j in p.jobs if j.rsc == r and j not in taken]

            def fits(j, usage=usage):
                if cpu[0] + j.avg_ncpus > em.n_usable_cpus + 1 + 1e-9:
                    return False
                return _reserve_gpu(usage, j.gpu_usage)

            def take(j, why, r=r, payoff=payoff, taken=taken, picks=picks, log=em.pick_log[r], shift=shift):
                taken.add(j)
                j.pick_value = j.project.rsc_anticipated_debt[r] - shift
                j.pick_seq = len(log)
                j.edf = why == WHY_EDF
                picks.append((j, why))
                cpu[0] += j.avg_ncpus
                j.project.rsc_anticipated_debt[r] -= payoff
                log.append((j.project.name, j.project.rsc_anticipated_debt[r] - shift))

            while min(usage) < 1.0 - 1e-9:
                edf = [p for p in runnable if misses[p] > 0 and free_jobs(p)]
                if not edf:
                    break
                j = min(
                    (min(free_jobs(p), key=lambda j: (j.deadline, j.index)) for p in edf),
                    key=lambda j: (j.deadline, j.project.index),
                )
                misses[j.project] -= 1
                taken.add(j)
                if fits(j):
                    taken.discard(j)
                    take(j, WHY_EDF)
            for j in sorted(em.running, key=lambda j: j.index):
                if j.rsc == r and j not in taken and now - j.run_start < em.period and fits(j):
                    take(j, WHY_UNFINISHED)
            while min(usage) < 1.0 - 1e-9:
                cands = [p for p in runnable if free_jobs(p)]
                if not cands:
                    break
                p = max(cands, key=lambda q: (q.rsc_anticipated_debt[r], -q.index))
                js = free_jobs(p)
                running = [j for j in js if j.state == RUNNING]
                j = running[0] if running else min(js, key=lambda j: (j.deadline, j.index))
                if fits(j):
                    take(j, WHY_PRIORITY)
                else:
                    taken.add(j)
            devices = assign_coprocs(em, [j for j, _w in picks])
            out += [(j, why, devices[j]) for j, why in picks if j in devices]
        return out

    def _checkpointed_since(self, j, t):
        cp = j.checkpoint_period
        if cp <= 0:
            return True
        k = math.floor((self.em.now - j.run_start) / cp + 1e-9)
        return k >= 1 and j.run_start + k * cp > t

    def _enforce(self, now, scheduled, gpu_cpus=0.0):
        """Enforcement (reference/debt-era.md §5): X scheduled but not running, Y running but
        not scheduled. A result of X in deadline danger preempts the Y result with the least
        work since its checkpoint; a Y result that checkpointed since the last run yields.
        ``gpu_cpus`` is what the GPU jobs placed first use: where a Y result would overcommit
        the CPUs beside them, it yields at once, those checkpointed first, then the one with
        the least work since its checkpoint."""
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
            elif gpu_cpus + sum(v.avg_ncpus for v in run + y) + j.avg_ncpus <= em.n_usable_cpus + 1e-9:
                run.append(j)
        while y and gpu_cpus > 0 and gpu_cpus + sum(v.avg_ncpus for v in run + y) > em.n_usable_cpus + 1e-9:
            ready = [v for v in y if self._checkpointed_since(v, self.last_run)]
            y.remove(ready[0] if ready else min(y, key=lambda v: (v.done - v.ckpt_done) / v.flops))
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
        frac = p.share / total if total > 0 else 1.0
        # a project with no CPU version is not among them: its requests are plain seconds
        return frac if p.rsc_ok[0] and frac > 0 else 1.0

    def _gpu_fetch(self, now, rr, idle_only: bool):
        """BOINC 6's fetch for a GPU type: a type with an idle instance now (or, with
        `idle_only` off, any shortfall over the minimum queue) asks the project with a
        version for it, neither deferred nor overworked on it (long-term GPU debt below
        -period), with the greatest long-term GPU debt + its GPU shortfall."""
        em = self.em
        for r in range(1, len(em.resources)):
            rs = rr.rsc[r]
            if rs.shortfall <= 0 or (idle_only and rs.nidle_now <= 0):
                continue
            cands = [
                p
                for p in em.project_order
                if p.rsc_ok[r] and p.min_rpc_time <= now and not p.master_fetch_pending and p.rsc_ltd[r] >= -em.period
            ]
            if not cands:
                continue
            p = max(cands, key=lambda q: (q.rsc_ltd[r] + rr.project_rsc_shortfall.get((q.index, r), 0.0), -q.index))
            frac = self._share_frac(p)
            requests = {r: (rs.shortfall / frac, rs.nidle_now)}
            size = self.work_request_sizes(now, rr).get(p, 0.0)
            if size > 0:
                requests[0] = (size / frac, 0.0)
            name = em.resources[r].name
            text = (
                f"Asked {p.name} for {rs.shortfall:.0f} s of {name} work ({name} shortfall over the "
                f"{em.work_buf_min:.0f} s minimum queue): it has the greatest long-term {name} debt + "
                f"shortfall ({p.rsc_ltd[r] + rr.project_rsc_shortfall.get((p.index, r), 0.0):.0f} s)."
            )
            return FetchPlan(p, requests, "need_work", text)
        return None

    def choose_fetch(self, now, rr):
        gpu = self._gpu_fetch(now, rr, idle_only=True)
        if gpu is not None:
            return gpu
        sizes = self.work_request_sizes(now, rr)
        cands = [p for p in self.em.project_order if sizes.get(p, 0) > 0]
        if not cands:
            return self._gpu_fetch(now, rr, idle_only=False)
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
        out = {}
        if sizes.get(p, 0) > 0:
            out[0] = (sizes[p] / self._share_frac(p), 0.0)
        for r in range(1, len(self.em.resources)):
            rs = rr.rsc[r]
            if p.rsc_ok[r] and rs.shortfall > 0 and p.rsc_ltd[r] >= -self.em.period:
                out[r] = (rs.shortfall / self._share_frac(p), rs.nidle_now)
        return out

    def request_scale(self, p):
        return 1.0 / self._share_frac(p)

    def handle_reply(self, p, requests, received, now):
        """A project that sent nothing when asked is deferred with the RPC back-off."""
        if not requests:
            return []
        if any(v > 0 for v in received.values()):
            self.no_work[p] = 0
            return []
        n = self.no_work.get(p, 0) + 1
        self.no_work[p] = n
        delay = exponential_backoff(min(n, RETRY_CAP), self.em.rng)
        p.min_rpc_time = max(p.min_rpc_time, now + delay)
        return [f"{p.name} sent no work: deferring it {delay:.0f} s."]

    def next_fetch_check(self, now, rr):
        return next_check(self.em, now, rr)
