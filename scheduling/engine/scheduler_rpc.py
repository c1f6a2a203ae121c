"""The emulated client's scheduler RPCs: at a decision instant at most one of a master-file
fetch, a report-results RPC with a piggybacked work request, or a work-fetch RPC; whether the
project's schedulers can be reached; and the reporting of finished results
(reference/client.md §3, §6.5–§6.7, seed 000).

It mirrors BOINC's client: `scheduler_rpc_poll` and `find_project_with_overdue_results`
(client/cs_scheduler.cpp, and the emulator's version in client/sim.cpp), the work request of
client/work_fetch.cpp (`piggyback_work_request`, `choose_project`), the back-off of
client/scheduler_op.cpp (rpc.py), and the emulated server's reply (`simulate_rpc`,
client/sim.cpp; server.py).
"""

from __future__ import annotations

from collections.abc import Callable

from boincweb.human import number

from . import rpc
from .records import RpcEvent
from .rpc import project_with_overdue_results
from .server import STAND_IN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .draws import GlibcRandom, PyRandom
    from .rr_sim import RRResult
    from .server import Server
    from .state import ProjectState, Resource


class SchedulerRpc:
    """The Emulator's part that talks to projects' schedulers (a mixin, see
    HostAvailability). The work-fetch choices themselves are the policy's."""

    # Read from the rest of the Emulator (its __init__ and its other parts); declared here for
    # the type checker only, with no value, so they are not class attributes.
    now: float
    bce: bool
    rng: PyRandom | GlibcRandom
    policy: Any
    resources: list[Resource]
    project_order: list[ProjectState]
    log: Callable[[str, str, str, str], None]
    rr: Callable[[], RRResult]

    def _init_rpc(self, servers: dict[str, Server] | None = None) -> None:
        # the scheduler of each project by name; the stand-in server for the others
        self.servers: dict[str, Server] = dict(servers or {})
        self.jobs_sent = 0
        self.nrpcs = 0
        self.rpc_events: list[RpcEvent] = []
        self.rpc_this_instant = False
        self.no_fetch_key = None  # the last "no work fetch" reason logged

    def _rpc_poll(self) -> bool:
        """scheduler_rpc_poll (§3): master fetches, then a report-results RPC with a
        piggybacked work request, else a work-fetch RPC. One RPC per instant (rpc_poll)."""
        return rpc_poll(self)

    def _piggyback_text(self, p, requests: dict) -> str:
        """The fetch sentence of a reporting RPC (piggyback_work_request, §6.5)."""
        if not requests:
            return (
                f"Reporting to {p.name} without a work request: no processor type is below "
                f"the maximum buffer for which {p.name} is the project to ask."
            )
        asked = ", ".join(
            f"{self.resources[r].name} {s:.0f} s / {number(i)} inst" for r, (s, i) in sorted(requests.items())
        )
        return f"Asked {p.name} for work with the results it is sent: {asked}."

    def _reachable(self, p) -> tuple[bool, str]:
        """Try the project's schedulers in order (seed 000); downtime blocks them all."""
        now = self.now
        if self.bce:
            # BOINC's emulator samples availability at each attempt over the time since the
            # last one, with one change at most (simulate_rpc, RANDOM_PROCESS::sample)
            dt = now - p.last_rpc_time if p.last_rpc_time is not None else 0.0
            p.last_rpc_time = now
            up = p.available.sample(dt) and not p.down(now)
        else:
            up = p.available.advance(now) and not p.down(now)
        if not p.urls:
            return up, p.spec.master_url or p.name
        for url, proc in p.urls:
            if up and proc.advance(now):
                return True, url
        return False, p.urls[-1][0]

    def _master_fetch(self, p) -> None:
        ok, url = self._reachable(p)
        if ok:
            rpc.master_fetch_succeeded(p, self.now)
            text = f"Fetched the master file of {p.name}; RPC back-off cleared."
            backoff = 0.0
        else:
            backoff, note = rpc.project_rpc_backoff(p, self.now, self.rng, bce=self.bce)
            text = f"Master file fetch of {p.name} failed; backing off {backoff:.0f} s.{note}"
        self.rpc_events.append(
            RpcEvent(self.now, p.name, p.spec.master_url or url, "master_fetch", ok, {}, {}, 0, backoff, text)
        )
        self.log("rpc", p.name, "", text)

    def _rpc(self, p, reason: str, requests: dict, why: str) -> bool:
        now = self.now
        self.rpc_this_instant = True
        named = {self.resources[r].name: [round(s, 3), round(i, 3)] for r, (s, i) in requests.items()}
        ok, url = self._reachable(p)
        if not ok:
            return self._rpc_failed(p, reason, named, url, "project down")
        reply = self.servers.get(p.name, STAND_IN).rpc(self, p, requests, list(p.ready))
        if reply is None:
            return self._rpc_failed(p, reason, named, url, "the scheduler refused the request")
        reported = self._report(p)
        jobs = reply.jobs
        received: dict = {}
        for j in jobs:
            received[j.rsc] = received.get(j.rsc, 0) + 1
        rpc.rpc_succeeded(p, now)
        if reply.request_delay > 0:
            # handle_scheduler_reply: the project's <request_delay> holds its next RPC back
            p.min_rpc_time = now + reply.request_delay
        notes = self.policy.handle_reply(p, requests, received, now)
        p.rpcs += 1
        p.jobs_received += len(jobs)
        self.nrpcs += 1
        self.jobs_sent += len(jobs)
        got = {self.resources[r].name: n for r, n in received.items()}
        text = (
            f"RPC to {p.name} ({why or reason.replace('_', ' ')}): reported {reported}, got "
            + (", ".join(f"{n} {name}" for name, n in got.items()) or "no")
            + " jobs."
        )
        self.rpc_events.append(RpcEvent(now, p.name, url, reason, True, named, got, reported, 0.0, text))
        self.log("rpc", p.name, "", text)
        for message in reply.messages:
            self.log("rpc", p.name, "", f"Message from {p.name}: {message}")
        if reply.request_delay > 0:
            self.log("backoff", p.name, "", f"{p.name} asked for no RPC for {reply.request_delay:.0f} s.")
        for note in notes:
            self.log("backoff", p.name, "", note)
        if jobs:
            self.must_schedule = True
        return bool(jobs)

    def _rpc_failed(self, p, reason: str, named: dict, url: str, why: str) -> bool:
        """An RPC that got no reply: the project backs off (§6.6)."""
        now = self.now
        p.rpc_failures += 1
        backoff, note = rpc.project_rpc_backoff(p, now, self.rng, bce=self.bce)
        text = (
            f"RPC to {p.name} failed ({why}), failure {p.nrpc_failures or rpc.MASTER_FETCH_PERIOD}; "
            f"backing off {backoff:.0f} s.{note}"
        )
        self.rpc_events.append(RpcEvent(now, p.name, url, reason, False, named, {}, 0, backoff, text))
        self.log("rpc", p.name, "", text)
        return False

    def _report(self, p) -> int:
        """Report every ready result; late ones waste their peak FLOPs (§3, §5)."""
        n = 0
        for j in p.ready:
            n += 1
            if self.now > j.deadline:
                p.deadlines_missed += 1
                p.flops_wasted += j.peak_flop_count
            else:
                p.deadlines_met += 1
        p.ready = []
        return n


def rpc_poll(em) -> bool:
    """scheduler_rpc_poll (§3) for the Emulator `em` (SchedulerRpc._rpc_poll): master fetches,
    then a report-results RPC with a piggybacked work request, else a work-fetch RPC; one RPC
    per instant. Every decision instant polls, so scheduler_rpc.pxd types it: the emulator as
    an EmulatorState, the projects as ProjectStates (state.pxd)."""
    now = em.now
    p: ProjectState | None
    for p in em.project_order:
        if p.master_fetch_pending and p.min_rpc_time <= now:
            em._master_fetch(p)
            em.rpc_this_instant = True
            return False
    if em.bce:
        # the first due result in the client's result order names the project
        p = project_with_overdue_results(em, now)
    else:
        # the first project in order with a result that must be reported
        p = None
        for q in em.project_order:
            if rpc.must_report(em, q, now):
                p = q
                break
    if p is not None:
        rr = em.rr()
        requests = em.policy.piggyback(p, now, rr)
        em.log("fetch", p.name, "", em._piggyback_text(p, requests))
        em.no_fetch_key = None
        return em._rpc(p, "results_due", requests, f"{p.name} has results to report")
    rr = em.rr()
    plan = em.policy.choose_fetch(now, rr)
    if plan is None:
        # one sentence each time the reason changes, not at every check
        key, sentence = em.policy.no_fetch_reason(now, rr)
        if key != em.no_fetch_key:
            em.no_fetch_key = key
            em.log("fetch", "", "", sentence())
        return False
    em.no_fetch_key = None
    em.log("fetch", plan.project.name, "", plan.text)
    return em._rpc(plan.project, plan.reason, plan.requests, "")
