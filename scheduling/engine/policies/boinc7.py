"""`boinc7`: BOINC 7's REC-era client policy (reference/client.md §6, seed 002).

REC with its half-life and scheduling priority SP(P) = -REC(P)/share(P); the per-type
round-robin simulation; GPU-first job scheduling with EDF for deadline-miss jobs then
priority, each pick charging the project's REC; enforcement with time slices and
checkpoints; work fetch with min/max buffer and per-(project, type) back-off.
"""

from __future__ import annotations

import math

from ..cpu_sched import JUST_AFTER, enforce, first_preemptible_at, make_run_list, queued_jobs_waiting
from ..rr_sim import credit_rates, order_can_change_misses, order_time, rr_simulate
from ..work_fetch import choose_project, handle_reply, job_slice_left, next_check, no_fetch_reason, piggyback

LN2 = math.log(2.0)
INF = math.inf


class Boinc7:
    name = "boinc7"
    use_edf = True
    # enforce_run_list puts jobs in an unfinished time slice first (cpu_sched.enforce)
    unfinished_slice_first = True

    def __init__(self, em):
        self.em = em
        self.edf_check = 0.0  # no deadline miss can appear before this time (reschedule_at)
        # (Emulator.epoch, now, work_fetch.slice_bound) of the planning step in which
        # reschedule_at last found the slice bound of the jobs queued (edf_margin). The
        # emulator's _plan asks next_fetch_check next, with nothing changed in between, and each
        # planning step has its own epoch: that fetch check reuses the bound
        self.slice_at = None

    def rr(self, now):
        return rr_simulate(self.em, now)

    def run_list(self, now, rr, gpu_allowed):
        em = self.em
        return enforce(em, now, make_run_list(em, now, rr, self.use_edf, gpu_allowed), gpu_allowed)

    def choose_fetch(self, now, rr):
        return choose_project(self.em, now, rr)

    def no_fetch_reason(self, now, rr):
        return no_fetch_reason(self.em, now, rr)

    def piggyback(self, p, now, rr):
        return piggyback(self.em, p, now, rr)

    def handle_reply(self, p, requests, received, now):
        return handle_reply(self.em, p, requests, received, now, self.em.rng)

    def request_scale(self, p):
        return 1.0

    def account(self, t0, t1):
        """REC is kept by the emulator for every policy; nothing more here."""

    def next_fetch_check(self, now, rr):
        em = self.em
        at = self.slice_at
        if at is not None and at[0] == em.epoch and at[1] == now:
            return next_check(em, now, rr, at[2])
        return next_check(em, now, rr)

    def reschedule_at(self, now):
        """When a schedule made now could next come out differently (the first such instant;
        the emulator reschedules at the first 60 s grid step at or after it, reference/client.md
        §3, §6.3).

        - While jobs wait, a running job that finished its time slice may be preempted at
          any step as REC moves project priorities, so once a slice is over every step is
          looked at; before that, nothing but EDF can displace a job in its slice.
        - EDF (`edf_check`): EDF picks follow the predicted misses per project and
          resource, which change only when a job's projected finish crosses its deadline -
          work_buf_min. With the simulation's pick order unchanged, a projected finish
          moves later by at most the time that passes (while nothing computes), and earlier
          by at most 1/overall_frac - 1 seconds a second (while everything computes at full
          speed, which the simulation scales by overall_frac), so no count changes before
          the smallest slack of a job on time, or excess of a late job over that rate. The
          pick order follows REC per unit of share, so the check also comes when two
          projects' RECs can cross (`order_margin`), and before any later pick of the
          simulation, made with projected REC and charges, can flip (`rr_sim.order_time`)
          if some other order could change a miss (`rr_sim.order_can_change_misses`).
        Nothing can change while nothing runs and nothing waits."""
        em = self.em
        t = INF
        waiting = queued_jobs_waiting(em)
        running = em.running
        if running and waiting:
            t = max(now, first_preemptible_at(em))
        if self.use_edf:
            rr = em.rr_now()
            if rr is not None:
                margin, bound = edf_margin(em)
                if em.bce:
                    self.slice_at = (em.epoch, now, bound)
                self.edf_check = now + edf_check_margin(em, now, rr, margin)
            if running or waiting:
                # a miss appears only once the slack is below zero
                t = min(t, self.edf_check + JUST_AFTER)
        return t

    def rr_still_valid(self, now, rr):
        """Whether a schedule may reuse `rr`, made earlier with the same jobs: no predicted
        deadline miss can have appeared or gone since (see reschedule_at); the schedule
        then reads only the miss counts, and fresh priorities from REC."""
        return not self.use_edf or now < self.edf_check


def edf_check_margin(em, now: float, rr, margin: float) -> float:
    """Seconds from now before a schedule made with the simulation `rr` may see a predicted
    deadline miss appear or go (Boinc7.reschedule_at): the least of the jobs' `margin`
    (edf_margin) and the time before two projects' REC per unit of share can cross (which
    would reorder the simulation's picks: `order_margin`), and then, if that is more than a
    step and some other order could change a miss, the time before a later pick of the
    simulation can flip (`rr_sim.order_time`)."""
    if margin > 0.0:  # no crossing can come before 0
        # between events each project earns credit at a constant rate R, so REC(t) = R +
        # (REC - R) e^(-ln 2 t / half_life) (§6.1)
        crossing = order_margin(em.projects, credit_rates(em), LN2 / em.rec_half_life)
        if crossing < margin:  # min(margin, crossing)
            margin = crossing
    if margin > em.delta:
        # REC drift may reorder the simulation's later picks before that
        reorder = order_time(em, rr)
        if reorder < margin and order_can_change_misses(em, rr, now):
            margin = reorder
    return margin


def edf_margin(em) -> tuple[float, float]:
    """Seconds before a predicted deadline miss can appear or go, and under bce the slice
    bound of the jobs queued (else 0.0). The seconds: the least slack of the
    jobs on time, or excess of a late job over the rate at which a projected finish can move
    earlier (1/overall_frac - 1 seconds a second, `speedup`); 0 under bce when a job's
    projected finish is within a time-slice step of the simulation (work_fetch.slice_bound)
    of its deadline less the buffer minimum.

    BOINC's simulation picks afresh at every job end (RoundRobin.run_repick): a job ending
    early can let a GPU job with a larger CPU share in first and push a CPU job back, so
    projected finishes move by more than the time that passes. Near a miss's threshold the
    schedule is looked at every step, as BOINC's emulator does.

    One walk of the queued jobs gives the slack, the slice bound (as slice_bound computes
    it) and the least distance from the threshold: a job is within the bound of it if and
    only if the least distance is. policies/boinc7.pxd types it (the jobs as JobStates, the
    numbers in C doubles, with the same operations in the same order)."""
    buf_min = em.work_buf_min
    exact = em.exact_estimates
    near_steps = em.bce
    fracs = [res.overall_frac for res in em.resources]
    speedup = 1.0 / fracs[0] - 1.0
    for r in range(1, len(fracs)):
        s = 1.0 / fracs[r] - 1.0
        if s > speedup:  # max() over the resources
            speedup = s
    inf = INF
    longest = 0.0
    nearest = inf
    margin = inf
    for p in em.projects:
        for j in p.jobs:
            deadline = j.deadline
            finish = j.rr_finish
            slack = deadline - buf_min - finish
            if near_steps:
                distance = abs(slack)
                if distance < nearest:
                    nearest = distance
                # work_fetch.slice_bound's step
                left = job_slice_left(j, fracs, exact)
                if left > longest:
                    longest = left
            if not j.rr_miss:
                m = 0.0 if 0.0 > slack else slack  # max(slack, 0.0)
            elif speedup > 0:
                m = -slack / speedup
            else:
                continue
            if m < margin:  # min(margin, m)
                margin = m
    near = 0.0
    if near_steps:
        near = longest / 10.0
        if not near > 3600.0:
            near = 3600.0  # max(3600.0, longest / 10.0)
        if nearest < near:
            return 0.0, near
    return margin, near


def order_margin(projects, rate: dict, lam: float) -> float:
    """The curves of the projects' REC per unit of share and their crossings: for each
    project with jobs and a share, a + b e^(-lam t), and the first t > 0 at which two of
    them cross (the difference of two such curves changes sign at most once, at a
    closed-form time). policies/boinc7.pxd types it (the projects as ProjectStates, the
    curves' numbers in C doubles, with the same operations in the same order)."""
    ca = []
    cb = []
    for p in projects:
        if p.jobs and p.share > 0:
            share = p.share
            r = rate.get(p, 0.0)
            rec = p.rec
            ca.append(r / share)
            cb.append((rec - r) / share)
    margin = INF
    n = len(ca)
    for i in range(n):
        a1 = ca[i]
        b1 = cb[i]
        for k in range(i + 1, n):
            a = a1 - ca[k]
            b = b1 - cb[k]
            if b != 0 and 0.0 < -a / b < 1.0:
                m = -math.log(-a / b) / lam
                if m < margin:  # min(margin, m)
                    margin = m
    return margin
