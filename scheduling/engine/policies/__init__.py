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

POLICIES = {"boinc7": Boinc7, "boinc5": Boinc5, "wrr": Wrr, "fifo": Fifo}


def get_policy(name: str):
    """The policy class called `name`; ValueError names the known ones otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (expected one of {', '.join(POLICIES)})") from None
