"""What a run will cost before it runs: the engine's work estimated from the scenario.

The emulator's time goes into decisions (reference/client.md §3): each one runs the
round-robin simulation over every queued job (§6.4), picks jobs for every instance and asks
each project about work. So the cost is about

    (jobs + decisions) x (queued jobs + instances + projects x PER_PROJECT + OVERHEAD)

with jobs the ones the host gets through in the run, decisions coming from job ends,
time-slice ends and host on/off changes (never more than one per `delta` step), and the
queue holding a work buffer's worth of jobs on every instance. `estimate()` computes those
from the scenario alone; `SECONDS_PER_UNIT` turns them into seconds of one CPU.

The constants are fitted to 27 random scenarios of the kind bench/engine_cost.py draws (1-64
CPUs, 0-4 GPUs, 1-40 projects, jobs of 2 minutes to 30 hours, 6 hours to 2 days), run on a
2-core AMD EPYC at a load average of about 10: the estimate is about the median of the
measured time, but a run can take from a tenth to five times it. That is enough to refuse
what is far over a budget (1,024 CPUs and 40 projects for 100 days: about 16 minutes against
the default budget of 5); the lab's job stops whatever the estimate let through once its own
measured speed puts it over the budget (scheduling/jobs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .scenario import DAY, Scenario

SECONDS_PER_UNIT = 8.1e-7
PER_PROJECT = 100.0
OVERHEAD = 1000.0


@dataclass(frozen=True)
class Estimate:
    """The expected shape of a run: jobs through the host, jobs queued at once, decisions,
    and engine seconds on one CPU (`seconds`)."""

    jobs: float
    queue: float
    decisions: float
    seconds: float


def _job_rates(scenario: Scenario) -> dict[str, float]:
    """Jobs per second each resource gets through: its instances, the share of the time it
    computes, and the projects using it in proportion to their resource shares, each running
    its apps' jobs by weight on the fastest version for the resource (as the stand-in server
    sends them), so one instance finishes 1 / (mean run time x instances a job uses) a second."""
    host = scenario.host
    cpu_on = host.on.frac * host.active.frac
    instances = {"cpu": (scenario.n_usable_cpus, cpu_on)}
    instances.update({g.name: (g.count, cpu_on * host.gpu_active.frac) for g in host.gpus})
    per_project: dict[str, list[tuple[float, float]]] = {r: [] for r in instances}
    for p in scenario.projects:
        for r in instances:
            weights = busy = 0.0
            for app in p.apps:
                versions = [v for v in app.versions if v.resource == r]
                if not versions:
                    continue
                v = max(versions, key=lambda v: v.flops)
                usage = max(v.gpu_usage if v.gpu_type else v.avg_ncpus, 1e-3)
                weight = app.weight if app.weight > 0 else 1.0
                weights += weight
                busy += weight * app.mean_fpops / v.flops * usage  # instance-seconds a job holds
            if weights:
                per_project[r].append((p.resource_share, weights / busy))
    rates = {}
    for r, entries in per_project.items():
        if not entries:
            continue
        n, on = instances[r]
        total = sum(share for share, _ in entries)
        mean = (
            sum(share * rate for share, rate in entries) / total
            if total > 0
            else sum(rate for _, rate in entries) / len(entries)
        )
        rates[r] = n * max(on, 0.01) * mean
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
    size = queue + instances + PER_PROJECT * len(scenario.projects) + OVERHEAD
    return Estimate(jobs=jobs, queue=queue, decisions=decisions, seconds=SECONDS_PER_UNIT * (jobs + decisions) * size)
