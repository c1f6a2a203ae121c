"""Lab presets: one scenario for every worked example in the seeds, named after its seed.

Each preset says what to look for when it runs, in words for someone who has never seen
BOINC. The P(C, D, R) ones are written in seed 001's notation and read by the engine's own
reader, so the preset and an import of the same text give the same scenario.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from scheduling.engine.readers import read_pcdr
from scheduling.engine.scenario import (
    App,
    AppVersion,
    Availability,
    GpuType,
    Host,
    InitialJob,
    Prefs,
    Project,
    Scenario,
    SchedulerUrl,
)

HOUR = 3600.0
DAY = 86400.0
GFLOPS = 1e9


@dataclass(frozen=True)
class Preset:
    slug: str
    seed: str
    title: str
    look_for: str
    build: Callable[[], Scenario]
    policies: tuple[str, str] = ("boinc5", "boinc7")
    duration: float = 2 * DAY

    def scenario(self) -> Scenario:
        return dataclasses.replace(self.build(), name=f"seed {self.seed}: {self.title}", description=self.look_for)


# seed 001's "Scenario 1" line (reference/debt-era.md §8) and what the lab adds to it: the
# seed gives no buffer, and the default 0.1-day minimum would queue more of P1's tasks than
# fit in their one-hour deadline, so the buffer stays below it (6 minutes + 24 minutes); the
# checkpoint period and the resume cost are the "several minutes" of the seed's Einstein@home
# remark. scenarios/scenario1.txt holds the same text.
SCENARIO_1 = """\
# seed 001, "Scenario 1" (reference/debt-era.md §8)
P1(0.1, 1, .5)
P2(1, 24, .25)
P3(1, 24, .25)
NCPUS = 2
leave_in_memory = false
cpu_scheduling_period = 1
# lab additions, in hours: a buffer below P1's 1-hour deadline, checkpoints, restart cost
min_queue = 0.1
work_buf_additional = 0.4
checkpoint_period = 0.25
resume_cost = 0.05
"""

# the seed's counterfactual: "if we went strictly by debt, we'd end up switching between them
# every 6 minutes": the same scenario with a 6-minute scheduling period
SCENARIO_1_STRICT = SCENARIO_1.replace("cpu_scheduling_period = 1\n", "cpu_scheduling_period = 0.1\n")

LONG_AND_SHORT = """\
# seed 001: a long-deadline project beside a short-deadline one
P1(1000, 2000, .5)
P2(1, 10, .5)
NCPUS = 4
"""


def _cpu_app(name: str, hours: float, deadline_hours: float, flops: float = GFLOPS) -> App:
    return App(
        name=name,
        versions=(AppVersion(avg_ncpus=1.0, flops=flops),),
        latency_bound=deadline_hours * HOUR,
        fpops_est=hours * HOUR * flops,
    )


def _wrr_example() -> Scenario:
    # seed 001's round-robin example: A (share 2) holds A1 and A2, B (share 1) holds B1, on
    # two CPUs. All three share the CPUs until A2 ends at hour 4; A1 ends at hour 8.
    a = _cpu_app("A_app", 20 / 3, 48)
    b = _cpu_app("B_app", 10, 48)
    job: dict[str, Any] = dict(deadline=48 * HOUR, resource="cpu")
    return Scenario(
        host=Host(ncpus=2, cpu_flops=GFLOPS),
        projects=(
            Project(
                "A",
                2,
                (a,),
                jobs=(
                    InitialJob("A1", "A_app", fpops=20 / 3 * HOUR * GFLOPS, fpops_est=20 / 3 * HOUR * GFLOPS, **job),
                    InitialJob("A2", "A_app", fpops=8 / 3 * HOUR * GFLOPS, fpops_est=8 / 3 * HOUR * GFLOPS, **job),
                ),
            ),
            Project(
                "B",
                1,
                (b,),
                jobs=(InitialJob("B1", "B_app", fpops=10 * HOUR * GFLOPS, fpops_est=10 * HOUR * GFLOPS, **job),),
            ),
        ),
        prefs=Prefs(work_buf_min_days=0.1, work_buf_additional_days=0.25),
    )


def _rpc_backoff() -> Scenario:
    # seed 000: one project answers reliably, the other's schedulers are mostly down, so the
    # client backs off exponentially, tries the second URL, and re-reads the master file.
    reliable = _cpu_app("steady_app", 2, 72)
    flaky = _cpu_app("flaky_app", 2, 72)
    return Scenario(
        host=Host(ncpus=2, cpu_flops=GFLOPS),
        projects=(
            Project("Steady", 100, (reliable,)),
            Project(
                "Flaky",
                100,
                (flaky,),
                available=Availability(0.4, 4 * HOUR),
                scheduler_urls=(
                    SchedulerUrl("https://flaky.example/cgi", Availability(0.3, 2 * HOUR)),
                    SchedulerUrl("https://mirror.flaky.example/cgi", Availability(0.6, 2 * HOUR)),
                ),
            ),
        ),
        prefs=Prefs(work_buf_min_days=0.2, work_buf_additional_days=0.3),
    )


def _cpu_and_gpu() -> Scenario:
    # seed 002 (and BOINC's sim_scenario.php example): 4 CPUs of 2 GFLOPS and one NVIDIA GPU
    # of 100 GFLOPS, with a CPU-only, a GPU-only and a CPU+GPU project.
    cpu = AppVersion(avg_ncpus=1.0, flops=2 * GFLOPS)
    gpu = AppVersion(avg_ncpus=0.2, flops=60 * GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0, plan_class="cuda")
    return Scenario(
        host=Host(
            ncpus=4,
            cpu_flops=2 * GFLOPS,
            gpus=(GpuType("NVIDIA", 1, 100 * GFLOPS),),
            gpu_active=Availability(0.7, 3 * HOUR),
        ),
        projects=(
            Project("CpuOnly", 100, (App("cpu_app", (cpu,), latency_bound=3 * DAY, fpops_est=4 * HOUR * 2 * GFLOPS),)),
            Project("GpuOnly", 100, (App("gpu_app", (gpu,), latency_bound=2 * DAY, fpops_est=HOUR * 60 * GFLOPS),)),
            Project(
                "Both",
                100,
                (
                    App("both_cpu", (cpu,), latency_bound=2 * DAY, fpops_est=3 * HOUR * 2 * GFLOPS),
                    App("both_gpu", (gpu,), latency_bound=1 * DAY, fpops_est=HOUR * 60 * GFLOPS),
                ),
            ),
        ),
        prefs=Prefs(work_buf_min_days=0.2, work_buf_additional_days=0.3),
    )


def _tight_deadlines() -> Scenario:
    # seed 002: the round-robin simulation finds a deadline miss and the EDF pass runs the
    # job in danger first; the buffer chart shows saturated time against min and max buffer.
    return Scenario(
        host=Host(ncpus=2, cpu_flops=GFLOPS, on=Availability(0.8, 4 * HOUR)),
        projects=(
            Project("Relaxed", 300, (_cpu_app("relaxed_app", 6, 10 * 24),)),
            Project("Urgent", 100, (_cpu_app("urgent_app", 5, 12),)),
        ),
        prefs=Prefs(work_buf_min_days=0.25, work_buf_additional_days=0.5),
    )


PRESETS: tuple[Preset, ...] = (
    Preset(
        "seed-001-scenario-1",
        "001",
        "Scenario 1: short tasks beside time-sliced ones",
        "Two CPUs, one-hour time slices. P1 (half the share) sends 6-minute tasks due in an "
        "hour; P2 and P3 (a quarter each) send 1-hour tasks due in a day. Under boinc5 one CPU "
        "keeps running P1 while the other runs P2's and P3's tasks in turns, each task to its "
        "end, the seed's picture: the client asks each project for its own shortfall, so P1 "
        "always has a task. Under boinc7 P1's tasks come in batches that run on both CPUs at once; once "
        "a batch is done, P2's and P3's 1-hour tasks hold both CPUs, because boinc7 asks for "
        "work only when the whole queue falls below the 6-minute minimum buffer. P1 then gets "
        "about a third of the CPU time instead of half (see the share violation). Neither "
        "policy cuts a P2 or P3 task short: compare the preset “Scenario 1 switched strictly "
        "by debt” to see what that would cost.",
        lambda: read_pcdr(SCENARIO_1),
        duration=DAY,
    ),
    Preset(
        "seed-001-scenario-1-strict",
        "001",
        "Scenario 1 switched strictly by debt",
        "Scenario 1 with a 6-minute time slice instead of one hour: the seed's warning that "
        "switching P2 and P3 strictly by debt would swap them every few minutes. Each swap "
        "takes the task out of memory, so it loses the work done since its last checkpoint "
        "(every 15 minutes) and pays a 3-minute restart: watch the short P2 and P3 bars on the "
        "Gantt, the preemptions in the decision log and the CPU-hours thrown away, under both "
        "policies.",
        lambda: read_pcdr(SCENARIO_1_STRICT),
        duration=DAY,
    ),
    Preset(
        "seed-001-long-and-short",
        "001",
        "a 1000-hour project beside a 1-hour one",
        "Four CPUs. P1's tasks take 1000 hours with a 2000-hour deadline, P2's take one hour "
        "with a 10-hour deadline, equal shares. Watch how each policy keeps both projects "
        "supplied and whether P2's short deadlines force EDF runs (marked in the Gantt).",
        lambda: read_pcdr(LONG_AND_SHORT),
        duration=4 * DAY,
    ),
    Preset(
        "seed-001-wrr-example",
        "001",
        "weighted round-robin, shares 2 : 1 on two CPUs",
        "Project A (share 2) starts with jobs A1 and A2, B (share 1) with B1. Under round-robin "
        "all three share the two CPUs until A2 ends at hour 4, then A can use only one CPU "
        "until A1 ends at hour 8.",
        _wrr_example,
        policies=("wrr", "boinc7"),
        duration=DAY,
    ),
    Preset(
        "seed-000-rpc-backoff",
        "000",
        "scheduler RPC retries and exponential back-off",
        "Flaky's two schedulers answer less than half the time. Watch the RPC markers on the "
        "buffer chart: failed RPCs, the growing back-off between tries, the switch to the "
        "second scheduler URL and the master-file fetch, while Steady keeps the CPUs busy.",
        _rpc_backoff,
        duration=3 * DAY,
    ),
    Preset(
        "seed-002-cpu-and-gpu",
        "002",
        "CPU and GPU projects, REC priority",
        "Four CPUs and one NVIDIA GPU that is suspended now and then (shaded). CpuOnly, "
        "GpuOnly and Both get equal shares of the host's peak FLOPS: watch the REC chart, "
        "the GPU lane, and how Both's GPU jobs compete with GpuOnly's.",
        _cpu_and_gpu,
    ),
    Preset(
        "seed-002-tight-deadlines",
        "002",
        "deadline danger, EDF and the buffer",
        "Urgent's 5-hour tasks are due 12 hours after they arrive on a host that is on 80% "
        "of the time. The round-robin simulation predicts misses, so EDF runs them first "
        "(marked in the Gantt) despite Relaxed's larger share.",
        _tight_deadlines,
    ),
)

BY_SLUG = {p.slug: p for p in PRESETS}
