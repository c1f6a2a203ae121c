"""`boinc7`: BOINC 7's REC-era client policy (reference/client.md §6, seed 002).

REC with its half-life and scheduling priority SP(P) = -REC(P)/share(P); the per-type
round-robin simulation; GPU-first job scheduling with EDF for deadline-miss jobs then
priority, each pick charging the project's REC; enforcement with time slices and
checkpoints; work fetch with min/max buffer and per-(project, type) back-off.
"""

from __future__ import annotations

import math

from .. import work_fetch
from ..cpu_sched import enforce, make_run_list, preemptible_at, queued_jobs_waiting
from ..rr_sim import rr_simulate


class Boinc7:
    name = "boinc7"
    use_edf = True

    def __init__(self, em):
        self.em = em

    def rr(self, now):
        return rr_simulate(self.em, now)

    def run_list(self, now, rr, gpu_allowed):
        em = self.em
        return enforce(em, now, make_run_list(em, now, rr, self.use_edf), gpu_allowed)

    def choose_fetch(self, now, rr):
        return work_fetch.choose_project(self.em, now, rr)

    def piggyback(self, p, now, rr):
        return work_fetch.piggyback(self.em, p, now, rr)

    def handle_reply(self, p, requests, received, now):
        return work_fetch.handle_reply(self.em, p, requests, received, now, self.em.rng)

    def request_scale(self, p):
        return 1.0

    def account(self, t0, t1):
        """REC is kept by the emulator for every policy; nothing more here."""

    def next_fetch_check(self, now, rr):
        return work_fetch.next_check(self.em, now, rr)

    def reschedule_at(self, now):
        """The earliest running job to finish its time slice, if jobs are waiting. A job
        kept past its slice is looked at again every twelfth of the period, since project
        priorities drift as REC accrues."""
        em = self.em
        if not em.running or not queued_jobs_waiting(em):
            return math.inf
        t = min(preemptible_at(em, j) for j in em.running)
        if t <= now:
            t = now + max(em.delta, em.period / 12.0)
        return t
