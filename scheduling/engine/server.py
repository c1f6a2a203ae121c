"""The servers the emulated client talks to (reference/client.md §3, simulate_rpc).

A project's scheduler is reached through a `Server`: given the client's RPC (the project, the
work requested per resource, the finished jobs it reports) it returns a `ServerReply` (the new
jobs, the request delay, the messages), or None when the RPC fails. `StandInServer` is the
emulated project of BOINC's emulator (`serve`); a caller may give a run other servers per
project (`Emulator(servers=...)`), such as a real scheduler behind an adapter, with the engine
itself unchanged. The engine makes the jobs a server sends with `Emulator.new_job`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .records import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from .state import JobState, ProjectState

    # a type only: what a caller of `start(servers=...)` gives
    class Server(Protocol):
        """A project's scheduler, as the emulated client sees it."""

        def rpc(self, em, p: ProjectState, requests: dict, reported: list[JobState]) -> ServerReply | None:
            """Answer one RPC of project `p` at `em.now`: `requests` maps a resource index to
            (requested seconds, requested instances); `reported` are the finished jobs the client
            reports. None: the RPC failed (the client backs off as from an unreachable project)."""
            ...


MAX_JOBS_PER_RPC = 500
# BOINC's emulator sends jobs until the request is met, with no count limit (simulate_rpc);
# --compat bce keeps a bound only against runaway requests of tiny jobs
BCE_MAX_JOBS_PER_RPC = 20_000


def _job_size(em, app) -> tuple[float, float]:
    """(real size, estimate). BOINC's emulator runs every job for exactly fpops_est and tells
    the client a draw from the size distribution (§9.3); the intended model is the reverse."""
    mean = app.mean_fpops
    draw = em.rng.normal(mean, app.fpops_std_dev) if app.fpops_std_dev > 0 else mean
    draw = max(draw, mean * 1e-3)
    if em.bce:
        return app.fpops_est, draw
    return draw, app.fpops_est


def serve(em, p, requests: dict, rr, scale: float = 1.0) -> list:
    """Send jobs while a requested resource still has req_secs > 0 or req_instances > 0.

    An app is drawn by weight, its fastest version that needs work is used, and the job is
    accepted if the resource's busy time plus its runtime fits the latency bound; a refused
    version is not used again in this RPC. `scale` converts the job's time to the request's
    units (the debt era asks in project-normalized time, reference/debt-era.md §7).
    """
    if em.existing_jobs_only or not requests:
        return []
    req = {r: [secs, inst] for r, (secs, inst) in requests.items()}
    delay = {r: rr.rsc[r].busy_time for r in req}
    frac = max(em.scenario.host.on.frac * em.scenario.host.active.frac, 0.01)
    dont_use: set = set()
    jobs: list[JobState] = []
    limit = BCE_MAX_JOBS_PER_RPC if em.bce else MAX_JOBS_PER_RPC
    while len(jobs) < limit:
        options = []
        for app in p.spec.apps:
            best = None
            for v in app.versions:
                r = em.rsc_index.get(v.resource)
                if r is None or r not in req or (app.name, v) in dont_use:
                    continue
                if req[r][0] <= 0 and req[r][1] <= 0:
                    continue
                if best is None or v.flops > best.flops:
                    best = v
            if best is not None:
                options.append((app, best))
        if not options:
            break
        total = sum(app.weight for app, _v in options)
        if em.bce:
            # sim.cpp choose_app: one drand(), less each app's share of the weight in turn
            x = em.rng.random()
            for app, v in options:
                x -= app.weight / total if total > 0 else math.nan
                if x <= 0:
                    break
        elif total > 0:
            x = em.rng.random() * total
            for app, v in options:
                x -= app.weight
                if x < 0:
                    break
        else:
            app, v = options[0]
        r = em.rsc_index[v.resource]
        if em.bce:
            # BOINC's emulator makes the job, with its drawn estimate, before the check, and
            # checks that estimate (sim.cpp make_job, simulate_rpc)
            size, est_fpops = _job_size(em, app)
            et = est_fpops / v.flops
        else:
            et = app.fpops_est / v.flops
        if delay[r] + et > app.latency_bound:
            dont_use.add((app.name, v))
            continue
        if not em.bce:
            size, est_fpops = _job_size(em, app)
        j = em.new_job(p, app, v, size, est_fpops, em.now, em.now + app.latency_bound)
        jobs.append(j)
        est = est_fpops / v.flops / frac * scale
        # BOINC's emulator charges a GPU job's CPU share to the CPU request too
        # (sim.cpp decrement_request); the intended server counts it on its own resource only
        charged = ((0, v.avg_ncpus), (r, v.gpu_usage)) if r and em.bce else ((r, v.gpu_usage if r else v.avg_ncpus),)
        for rc, n in charged:
            if rc not in req:
                continue
            req[rc][0] -= est * n
            req[rc][1] -= n
            ninst = em.n_usable_cpus if rc == 0 else em.resources[rc].ninstances
            delay[rc] += est * n / ninst
    return jobs


class ServerReply(NamedTuple):
    """A scheduler's reply as the client reads it (reference/protocol.md §4.3): the jobs,
    already made with `Emulator.new_job`; `request_delay`, the seconds before the client may
    ask again (0: none); the messages the project sent, shown in the client's log."""

    jobs: list
    request_delay: float = 0.0
    messages: Sequence[str] = ()


class StandInServer:
    """The emulated project of BOINC's emulator: jobs drawn from the scenario's apps (`serve`);
    it never fails once reached and never asks for a delay."""

    def rpc(self, em, p: ProjectState, requests: dict, reported: list[JobState]) -> ServerReply:
        return ServerReply(serve(em, p, requests, em.rr(), em.policy.request_scale(p)))


STAND_IN = StandInServer()
