"""`fifo`: jobs run to completion in arrival order, GPU jobs first; BOINC 7's work fetch.
A teaching baseline: no time slices, no EDF, no resource-share balancing of the run order."""

from __future__ import annotations

import math

from ..cpu_sched import WHY_FIFO, enforce
from .boinc7 import Boinc7


class Fifo(Boinc7):
    name = "fifo"
    use_edf = False
    unfinished_slice_first = False

    def run_list(self, now, rr, gpu_allowed):
        em = self.em
        jobs = sorted((j for p in em.projects for j in p.jobs), key=lambda j: (j.rsc == 0, not j.started, j.index))
        for j in jobs:
            j.edf = False
        chosen = enforce(em, now, jobs, gpu_allowed, keep_unfinished=False)
        return [(j, WHY_FIFO, inst) for j, _why, inst in chosen]

    def reschedule_at(self, now):
        return math.inf
