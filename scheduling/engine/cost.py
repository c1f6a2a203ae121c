"""What a run will cost before it runs: the engine's work estimated from the scenario.

The emulator's time goes into decisions (reference/client.md §3): each one runs the
round-robin simulation over every queued job (§6.4), picks jobs for every instance and asks
each project about work. So the cost is about

    decisions x (queued jobs + instances + projects)

with decisions coming from job ends, time-slice ends and host on/off changes, never more than
one per `delta` step, and the queue holding a work buffer's worth of jobs on every instance.
`estimate()` computes those from the scenario alone; `SECONDS_PER_UNIT` turns them into
seconds of one CPU, calibrated by `bench/engine_cost.py` against measured runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scenario import DAY, Scenario

# seconds of engine time per unit of work (decision x queue entry), and the fixed cost of a
# decision beside the queue, in queue entries; bench/engine_cost.py measures both
SECONDS_PER_UNIT = 2.0e-6
DECISION_OVERHEAD = 40.0
SECONDS_PER_JOB = 2.0e-4  # making, serving and recording one job


@dataclass(frozen=True)
class Estimate:
    """The expected shape of a run: jobs through the host, jobs queued at once, decisions,
    and engine seconds on one CPU (`seconds`)."""

    jobs: float
    queue: float
    decisions: float
    seconds: float


def _job_rates(scenario: Scenario) -> dict[str, float]:
    """Jobs per second each resource gets through while computing: its instances times the
    share-weighted rate of each project's jobs on it (an app's jobs by weight, each on the
    fastest version for the resource, as the stand-in server sends them)."""
    instances = {"cpu": scenario.n_usable_cpus}
    instances.update({g.name: g.count for g in scenario.host.gpus})
    per_project: dict[str, list[tuple[float, float]]] = {r: [] for r in instances}
    for p in scenario.projects:
        for r in instances:
            weights = rate = 0.0
            for app in p.apps:
                versions = [v for v in app.versions if v.resource == r]
                if not versions:
                    continue
                v = max(versions, key=lambda v: v.flops)
                usage = v.gpu_usage if v.gpu_type else v.avg_ncpus
                seconds = app.mean_fpops / v.flops
                weight = app.weight if app.weight > 0 else 1.0
                weights += weight
                rate += weight / (seconds * max(usage, 1e-3))
            if weights:
                per_project[r].append((p.resource_share, rate / weights))
    rates = {}
    for r, entries in per_project.items():
        if not entries:
            continue
        total = sum(share for share, _ in entries)
        if total > 0:
            rates[r] = instances[r] * sum(share * rate for share, rate in entries) / total
        else:
            rates[r] = instances[r] * sum(rate for _, rate in entries) / len(entries)
    return rates


def _host_changes(scenario: Scenario, duration: float) -> float:
    """On/off changes of the host's processes over the run: two per up-and-down cycle."""
    host = scenario.host
    changes = 0.0
    for a in (host.on, host.connected, host.active, host.gpu_active):
        if 0.0 < a.frac < 1.0:
            changes += 2.0 * duration * a.frac / a.mean_up
    return changes


def estimate(scenario: Scenario, duration: float, delta: float = 60.0) -> Estimate:
    """The cost of running `scenario` for `duration` seconds on a `delta`-second step."""
    rates = _job_rates(scenario)
    total_rate = sum(rates.values())
    instances = scenario.n_usable_cpus + sum(g.count for g in scenario.host.gpus)
    initial = sum(len(p.jobs) for p in scenario.projects)
    prefs = scenario.prefs
    buffer = (prefs.work_buf_min_days + prefs.work_buf_additional_days) * DAY
    jobs = duration * total_rate + initial
    queue = total_rate * buffer + instances + initial
    period = max(prefs.cpu_scheduling_period_minutes * 60.0, delta)
    slices = duration * instances / period if len(scenario.projects) > 1 else 0.0
    decisions = min(jobs + slices + _host_changes(scenario, duration) + duration / 3600.0, duration / delta)
    decisions = max(decisions, 1.0)
    seconds = (SECONDS_PER_UNIT * decisions * (queue + instances + len(scenario.projects) + DECISION_OVERHEAD)
               + SECONDS_PER_JOB * jobs)
    return Estimate(jobs=jobs, queue=queue, decisions=decisions, seconds=seconds)
