"""Scheduling policies, chosen by name; each is one module with one class.

A policy object is built with the emulator and answers its questions:

- `rr(now)`: the round-robin simulation (an `rr_sim.RRResult`);
- `run_list(now, rr, gpu_allowed)`: the jobs to run, as `[(job, why, gpu_instance)]`;
- `choose_fetch(now, rr)`: a `work_fetch.FetchPlan` or None;
- `piggyback(project, now, rr)`: the work request attached to a reporting RPC;
- `handle_reply(project, requests, received, now)`: back-offs after a reply; log sentences;
- `request_scale(project)`: the unit of its requests (1 = seconds of the resource);
- `account(t0, t1)`: bookkeeping over an interval (debts);
- `next_fetch_check(now, rr)` / `reschedule_at(now)`: when to look again (the first instant
  a decision may change; the emulator rounds it up to the next grid step).
"""

from __future__ import annotations

from .boinc5 import Boinc5
from .boinc7 import Boinc7
from .fifo import Fifo
from .wrr import Wrr

# The policies in the order the lab lists them: each one's class, the label of its choice in
# the lab's forms, and the note the lab's run pages give on how it schedules.
_TABLE = (
    (
        Boinc7,
        "REC priority (BOINC 7)",
        "BOINC 7: runs the project that has had the least recent credit (REC) for its share; a job "
        "keeps its CPU for a whole time slice; EDF for jobs in deadline danger.",
    ),
    (
        Boinc5,
        "debts (BOINC 5)",
        "BOINC 5: runs the project with the most short-term debt (CPU time owed to it); a running "
        "job keeps its CPU until its time slice ends; EDF for jobs in deadline danger; asks each "
        "project for the work it alone is short of. GPUs have debts of their own, as in BOINC 6, "
        "and their jobs are scheduled first.",
    ),
    (
        Wrr,
        "weighted round-robin",
        "Weighted round-robin: time slices given to projects in turn, in proportion to their "
        "shares, with no deadline check.",
    ),
    (Fifo, "first in, first out", "First in, first out: jobs run in the order they arrived."),
)
POLICIES = {policy.name: policy for policy, _, _ in _TABLE}
LABELS = {policy.name: label for policy, label, _ in _TABLE}
NOTES = {policy.name: note for policy, _, note in _TABLE}


def get_policy(name: str):
    """The policy class called `name`; ValueError names the known ones otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (expected one of {', '.join(POLICIES)})") from None
