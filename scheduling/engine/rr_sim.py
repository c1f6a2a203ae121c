"""Round-robin simulations of the queued jobs.

- `RoundRobin` (`rr_simulate`): BOINC 7's per-processor-type FIFO round-robin simulation
  (reference/client.md §6.4, seed 002): shortfall, idle instances now, saturated time,
  deadline misses per job and per project, and the busy time of the deadline-missing jobs.
- `wrr_simulate`: the debt era's weighted round-robin simulation of the CPU
  (reference/debt-era.md §4, seed 001): total_shortfall and shortfall per project.

Both take the emulator (for the resources, projects and buffer preferences) and `now`, and
write `rr_finish` / `rr_miss` on the jobs. Each step of a simulation ends at least one job, so
a simulation that takes more than MAX_STEPS_PER_JOB steps per job has numbers out of range
(a job of infinite size, say) and raises EngineLimitError instead of running on.
"""

from __future__ import annotations

import math
from array import array

from .rec import LN2, priority_init
from .rr_priority import ByPriority
from .rr_queue import IDLE_EPS
from .rr_repick import Repick
from .state import COBBLESTONE_SCALE, EngineLimitError, gpu_allowed


class RscSim:
    """Per-resource outputs of a simulation."""

    __slots__ = ("shortfall", "nidle_now", "saturated_time", "busy_time", "sim_nused")

    def __init__(self):
        self.shortfall = 0.0
        self.nidle_now = 0.0
        self.saturated_time = 0.0
        self.busy_time = 0.0
        self.sim_nused = 0.0

    def __reduce__(self):
        return (_new_rsc_sim, (), {name: getattr(self, name) for name in RscSim.__slots__})

    def __setstate__(self, state) -> None:
        _set_slots(self, state)


class RRResult:
    """Outputs of a simulation at `time`.

    `misses` and `nused_total` are keyed by (project index, resource index);
    `project_shortfall` is per project index, `total_shortfall` the CPU's (debt era);
    `project_rsc_shortfall` (BOINC 7, with `detail`) is keyed like `misses`.
    """

    __slots__ = (
        "time",
        "rsc",
        "misses",
        "nused_total",
        "project_shortfall",
        "total_shortfall",
        "project_rsc_shortfall",
        "mc_shortfall",
        "last_mc_limit",
        "contested",
        "rec_sum",
        "gpu_cpu",
    )

    def __init__(self, time: float, nrsc: int, nprojects: int):
        self.time = time
        self.rsc = [RscSim() for _ in range(nrsc)]
        self.misses: dict[tuple[int, int], int] = {}
        self.nused_total: dict[tuple[int, int], float] = {}
        self.project_shortfall = [0.0] * nprojects
        self.total_shortfall = 0.0
        self.project_rsc_shortfall: dict[tuple[int, int], float] = {}
        # projects with max_concurrent (rr_sim.project_min_mc; §6.4, §6.5), on every resource,
        # keyed like misses: the instance-seconds up to the buffer end that the project could
        # use under its limit and does not (mc_shortfall), and the last simulated time (from
        # now) at which a limit held its jobs back
        self.mc_shortfall: dict[tuple[int, int], float] = {}
        self.last_mc_limit: dict[tuple[int, int], float] = {}
        # picks by priority with another project in the running (see order_time):
        # (priority gap, chosen index, other index, the part of each priority that moves
        # with REC, chosen share_frac, other share_frac)
        self.contested: list[tuple] = []
        self.rec_sum = 1.0
        self.gpu_cpu = True  # whether GPU jobs' CPU shares were counted (RoundRobin.gpu_cpu)

    def __reduce__(self):
        return (_new_result, (), {name: getattr(self, name) for name in RRResult.__slots__})

    def __setstate__(self, state) -> None:
        self.gpu_cpu = True  # as read from a simulation pickled before it was kept
        _set_slots(self, state)


# RscSim and RRResult are C types on the compiled core (rr_sim.pxd), as JobState is: the
# emulator keeps its last simulation, so they are pickled as their attributes, and either
# core reads what the other pickled, or what a plain class with __slots__ pickled before


def _set_slots(obj, state) -> None:
    if isinstance(state, tuple):  # (None, slots), as a plain class with __slots__ was pickled
        state = state[1]
    for name, value in state.items():
        setattr(obj, name, value)


def _new_rsc_sim() -> RscSim:
    return RscSim.__new__(RscSim)


def _new_result() -> RRResult:
    return RRResult.__new__(RRResult)


def credit_rates(em) -> dict:
    """Credits per day each project earns with the jobs running now: the constant rate R
    toward which its REC moves between events (§6.1). Projects running nothing are absent."""
    per_day = 86400.0 * em.prefs.cpu_usage_limit / 100.0 * em.cpu_flops * COBBLESTONE_SCALE
    rate: dict = {}
    for j in em.running:
        if j.rate <= 0:
            continue
        secs = j.avg_ncpus * (em.cpu_scale if j.rsc == 0 else 1.0)
        if j.rsc:
            secs += j.gpu_usage * em.resources[j.rsc].relative_speed
        rate[j.project] = rate.get(j.project, 0.0) + secs * per_day
    return rate


def rec_drift(em) -> dict:
    """How fast each project's REC moves now, in REC units per second (signed). Between
    events a project earns credit at a constant rate R (credits per day), so REC moves
    exponentially toward R, at ln 2 / half_life x (R - REC) per second now and ever more
    slowly after (§6.1)."""
    lam = math.log(2.0) / em.rec_half_life
    rate = credit_rates(em)
    return {p: lam * (rate.get(p, 0.0) - p.rec) for p in em.projects}


def order_time(em, rr) -> float:
    """Seconds from now before any pick of the simulation `rr` between projects by priority
    can come out the other way, with the jobs running now.

    A pick's priority is -(a + c x rec_sum) / (rec_sum x share_frac): `a` is the project's
    REC, decayed in the simulation, plus the credit it projects (both at least 0), and
    `c x rec_sum` the simulation's charges (adjust_rec_sched). The charges' part does not
    move with rec_sum, so as REC drifts a priority moves by at most |drift| / (rec_sum x
    share_frac) + |priority| x |rec_sum's drift| / rec_sum per second; rec_sum itself moves
    exponentially toward the sum of the credit rates (rec_drift)."""
    if not rr.contested:
        return math.inf
    drift = rec_drift(em)
    projects = em.projects
    rec_sum = rr.rec_sum
    k = abs(sum(drift[p] for p in projects if p.jobs and p.share > 0)) / rec_sum
    return rr.contested.time(array("d", [abs(drift[p]) for p in projects]), rec_sum, k)


def order_can_change_misses(em, rr, now: float) -> bool:
    """Whether some other order of the simulation's picks could change a deadline miss.

    Whatever the order, a resource's jobs are all done by the list-scheduling bound now +
    (instance-seconds of work) / instances + the longest job, and no job ends before its own
    run time from now; a job on time past the first bound, or late before the second, is what
    a reorder could flip. max_concurrent can idle instances with work waiting, which breaks
    the bound, so then the answer is yes."""
    exact = em.exact_estimates
    buf_min = em.work_buf_min
    nr = len(em.resources)
    work = [0.0] * nr
    longest = [0.0] * nr
    jobs = []
    fracs = [res.overall_frac for res in em.resources]
    for p in em.projects:
        for j in p.jobs:
            if j.app.max_concurrent:
                return True
            r = j.rsc
            dur = j.est_flops_remaining(exact) / (j.flops * fracs[r])
            jobs.append((j, dur))
            work[0] += j.avg_ncpus * dur
            if r:
                work[r] += j.gpu_usage * dur
            longest[r] = max(longest[r], dur)
            longest[0] = max(longest[0], dur)
    end = [now + work[r] / (em.n_usable_cpus if r == 0 else em.resources[r].ninstances) + longest[r] for r in range(nr)]
    for j, dur in jobs:
        due = j.deadline - buf_min
        if (due >= now + dur) if j.rr_miss else (due < end[j.rsc]):
            return True
    return False


def _jobs(n: int) -> str:
    return f"{n} queued job" + ("" if n == 1 else "s")


# Each step of the simulation ends at least one job; a job whose remainder rounds to a few ulps
# of its size may take another. Far more than that means the numbers are out of range.
MAX_STEPS_PER_JOB = 64


def project_min_mc(spec) -> int:
    """APP_CONFIGS's project_min_mc (lib/cc_config.cpp, reference/client.md §6.5): the
    smallest max_concurrent app_config.xml gives the project (readers.read_app_config), 0
    when the project has no limit (then it has no max_concurrent in work fetch). A project
    whose scenario does not say (JSON, P(C, D, R), hand-made) takes the smallest of its
    apps' own limits, as if an app_config.xml gave them."""
    if spec.app_config_min_mc:
        return spec.app_config_min_mc
    return min((a.max_concurrent for a in spec.apps if a.max_concurrent), default=0)


class _Static:
    """What the simulations of one run share and never changes during it: the resources,
    their instances and the instances a simulation fills, whether it runs under bce, the
    max_concurrent caps per (project, resource), each project's fair share of the instances
    (for `detail`).

    `mc_cap` is RSC_PROJECT_WORK_FETCH::rr_init's mc_max_could_use (work_fetch.cpp): for a
    project with max_concurrent (`project_min_mc`), on every resource, its smallest limit
    times the largest usage of any of its app versions, at least 1 (a version of that GPU
    type counts its GPU usage, every other version its CPU share), at most the resource's
    instances (docs/engine-fidelity.md, "max_concurrent in work fetch")."""

    __slots__ = ("nr", "ninstances", "bce", "caps", "mc_cap", "any_mc", "fair", "gpus_first")

    def __init__(self, em):
        rscs = em.resources
        nr = len(rscs)
        self.nr = nr
        self.ninstances = [rscs[r].ninstances for r in range(nr)]
        self.bce = bool(em.bce)
        self.gpus_first = tuple(range(nr - 1, -1, -1))  # pick's order of the resources
        self.caps = [em.n_usable_cpus if r == 0 else rscs[r].ninstances for r in range(nr)]
        mc_cap: dict = {}  # (project, resource) -> instances the project could use
        for p in em.projects:
            min_mc = project_min_mc(p.spec)
            if not min_mc:
                continue
            versions = [(em.rsc_index.get(v.resource), v) for app in p.spec.apps for v in app.versions]
            for r in range(nr):
                x = 1.0
                for vr, v in versions:
                    usage = v.gpu_usage if r and vr == r else v.avg_ncpus
                    if usage > x:
                        x = usage
                mc_cap[(p.index, r)] = min(min_mc * x, float(self.caps[r]))
        self.mc_cap = mc_cap
        self.any_mc = any(app.max_concurrent for p in em.projects for app in p.spec.apps)
        self.fair = []
        for r in range(nr):
            able = [p for p in em.projects if p.rsc_ok[r] and p.share > 0]
            total = sum(p.share for p in able)
            self.fair.append({p.index: p.share / total * self.caps[r] for p in able} if total > 0 else {})

    def __setstate__(self, state) -> None:
        self.nr = -1  # a _Static pickled before it kept nr, ninstances and bce: _static makes it again
        _set_slots(self, state)


def _static(em) -> _Static:
    static = em.__dict__.get("_rr_static")
    if static is None or static.nr < 0:
        static = em._rr_static = _Static(em)
    return static


def decay_factors(t0: float, t1: float, half_life: float) -> tuple[float, float]:
    """The parts of rec.update_average(t1, t0, work, half_life, avg, t0) that do not depend
    on the project: (diff, weight of the old average). Every project a step of the simulation
    charges shares them, so the step computes them once (`decayed`)."""
    diff = t1 - t0
    if diff <= 0:
        return diff, 1.0
    return diff, math.exp(-diff * LN2 / half_life)


def decayed(avg: float, work: float, diff: float, w: float, half_life: float) -> float:
    """rec.update_average's new average from `decay_factors`, with the same arithmetic
    (tests/scheduling/test_rr_sim.py checks the two agree bit for bit)."""
    if diff <= 0:
        return avg
    if 1.0 - w > 1e-6:
        return avg * w + (1.0 - w) * (work / (diff / 86400.0))
    return avg + LN2 * work * 86400.0 / half_life


class RoundRobin:
    """RR_SIM::simulate (reference/client.md §6.4): one simulation of the queued jobs at `now`.

    The jobs of each resource wait in per-project FIFO queues (rr_queue.QueuedJobs' slots,
    filled when the simulation runs). A pick fills the
    instances, GPU types first, taking projects by scheduling priority (re-ordered after each
    pick and as the projected REC grows), or, under `--compat bce`, in BOINC's emulator's
    pointer order, which is the reverse of the file order and never changes
    (reference/client.md §9.1). A step then runs the picked jobs to the next job end,
    integrating shortfall, saturation, max_concurrent shortfall and projected REC over the
    step; the jobs that ended retire (deadline misses, busy time) and the next pick fills what
    they left. With `detail`, each project's shortfall per resource is also integrated: how
    far its simulated use falls below its share of the instances up to the buffer end. The
    picks and steps run over typed records of the queues: `ByPriority` (rr_priority.py) by
    priority, `Repick` (rr_repick.py) under bce.

    `run()` returns the `RRResult` and writes `rr_finish` / `rr_miss` on every job.
    """

    def __init__(self, em, now: float, detail: bool = False):
        self.em = em
        self.now = now
        self.detail = detail
        static = _static(em)
        self.static = static
        self.caps = static.caps
        self.nr = nr = static.nr
        self.projects = projects = em.projects
        self.result = result = RRResult(now, nr, len(projects))
        self.buf_end = now + em.work_buf_total
        self.by_priority = not static.bce
        # RR_SIM::activate: while GPU computing is suspended a GPU job's CPU share is not
        # counted, so that the CPU buffer looks as empty as it is (docs/engine-fidelity.md)
        self.gpu_cpu = result.gpu_cpu = gpu_allowed(self.em)
        self.mc_cap = static.mc_cap
        for key in self.mc_cap:
            result.mc_shortfall[key] = 0.0
            result.last_mc_limit[key] = 0.0
        self.busy = [[0.0] * n for n in static.ninstances]
        self.sim_now = now
        self.rec_sum = 1.0
        self.steps = 0
        njobs = 0
        for p in projects:
            njobs += len(p.jobs)
        self.max_steps = MAX_STEPS_PER_JOB * (njobs + 1)
        if self.by_priority:
            rec_sum = priority_init(projects, lambda p: bool(p.jobs) and p.share > 0)
            self.rec_sum = rec_sum
            result.rec_sum = rec_sum

    def run(self) -> RRResult:
        """Queue the jobs (rr_queue.QueuedJobs.load, RR_SIM::init_pending_lists), pick, then
        step from job end to job end: run the picked jobs to the first end, integrate the step
        (shortfall, saturation, max_concurrent, projected REC), retire the jobs that end and
        pick again. `ByPriority` (rr_priority.py) runs it over typed records; under
        `--compat bce`, `run_repick`."""
        if not self.by_priority:
            return self.run_repick()
        return ByPriority.for_emulator(self.em, self.static).run(self)

    def run_repick(self) -> RRResult:
        """RR_SIM::simulate as BOINC's client has it now (rr_sim.cpp), under `--compat bce`.

        Each iteration picks the running set afresh (pick_jobs_to_run): the GPU types first,
        then the CPU, projects in the emulator's pointer order (reverse file order), each
        project's unfinished jobs in arrival order, until the resource is saturated; so a job
        the simulation started can be left out of a later set when GPU jobs with larger CPU
        shares take the CPUs first, and it waits with its work half done. Then the job with
        the shortest time to its end ends alone (a tie ends at the next iteration, after a
        fresh pick); when that is more than an hour away, the simulation takes a time-slice
        step of an hour, or a tenth of the time beyond ten hours, and ends no job
        (docs/engine-fidelity.md, "The round-robin simulation picks afresh").
        `Repick` (rr_repick.py) runs it over typed records of the queued jobs."""
        sim = Repick.for_emulator(self.em, self.static)
        sim.load(self)
        return sim.run()

    def too_many_steps(self) -> EngineLimitError:
        """The error of a simulation past its bound of steps (MAX_STEPS_PER_JOB per job)."""
        return EngineLimitError(
            f"the round-robin simulation at {self.now:.0f} s took more than {self.max_steps} steps "
            f"for {_jobs(self.max_steps // MAX_STEPS_PER_JOB - 1)}: job sizes or processor speeds "
            f"are out of range (a job would never end)"
        )

    def tail(self) -> None:
        """After the last job: every instance idle up to the buffer end (the max_concurrent
        shortfall's tail is QueuedJobs._write_back's); the busy times."""
        result = self.result
        sim_now = self.sim_now
        buf_end = self.buf_end
        caps = self.caps
        if sim_now < buf_end:
            for r in range(self.nr):
                cap = caps[r]
                rs = result.rsc[r]
                rs.shortfall += cap * (buf_end - sim_now)
                if self.detail:
                    shortfall = result.project_rsc_shortfall
                    for pi, f in self.static.fair[r].items():
                        key = (pi, r)
                        shortfall[key] = shortfall.get(key, 0.0) + f * (buf_end - sim_now)
        for r in range(self.nr):
            busy = self.busy[r]
            # min(busy): the first of the least, with min()'s comparisons
            least = 0.0
            for i in range(len(busy)):
                x = busy[i]
                if i == 0 or x < least:
                    least = x
            result.rsc[r].busy_time = least
        result.total_shortfall = result.rsc[0].shortfall


def rr_simulate(em, now: float, detail: bool = False) -> RRResult:
    """RR_SIM::simulate (reference/client.md §6.4): `RoundRobin(em, now, detail).run()`."""
    return RoundRobin(em, now, detail).run()


def wrr_simulate(em, now: float) -> RRResult:
    """The debt era's weighted round-robin simulation of the CPU (reference/debt-era.md §4).

    Each project's CPU share is its fraction of the resource shares of the projects that
    still have results, split equally among its results; a result never gets more than one
    CPU, and what a project cannot use goes to the others. Over the horizon min_queue
    (`work_buf_min`), total_shortfall integrates idle CPUs and shortfall(P) integrates how
    far P's use falls below its share of all CPUs, share(P)/sum of shares x NCPUS.
    Deadline misses use the plain report deadline.

    BOINC 6 (the 6.10 client's rr_simulation with its per-type RSC_WORK_FETCH) simulated
    each GPU type the same way beside the CPU: its instances shared by the projects with
    GPU jobs, a job holding at most its gpu_usage of them; the type's idle instance-seconds
    are its shortfall (`rsc[r].shortfall`), each project's by its share of the instances in
    `project_rsc_shortfall[(p, r)]`, misses in `misses[(p, r)]`.
    """
    projects = em.projects
    result = RRResult(now, len(em.resources), len(projects))
    ncpus = em.n_usable_cpus
    frac = em.resources[0].overall_frac
    horizon = now + em.work_buf_min
    left: dict = {}
    by_project: dict = {}
    for p in projects:
        for j in p.jobs:
            if j.rsc != 0:
                continue
            j.rr_miss = False
            j.rr_finish = now
            left[j] = j.est_flops_remaining(em.exact_estimates)
            by_project.setdefault(p, []).append(j)
            key = (p.index, 0)
            result.nused_total[key] = result.nused_total.get(key, 0.0) + j.avg_ncpus
    share_sum = sum(p.share for p in projects)
    fair = {p: (p.share / share_sum * ncpus if share_sum > 0 else ncpus / len(projects)) for p in projects}
    sim_now = now
    first = True
    steps = 0
    njobs = len(left)
    max_steps = MAX_STEPS_PER_JOB * (njobs + 1)
    while True:
        steps += 1
        if steps > max_steps:
            raise EngineLimitError(
                f"the weighted round-robin simulation at {now:.0f} s took more than {max_steps} steps for "
                f"{_jobs(njobs)}: job sizes or processor speeds are out of range (a job would never end)"
            )
        live = {p: [j for j in js if j in left] for p, js in by_project.items()}
        live = {p: js for p, js in live.items() if js}
        cpus = _wrr_allocation(live, ncpus)
        used = {p: sum(cpus[j] for j in js) for p, js in live.items()}
        busy_cpus = sum(used.values())
        if first:
            result.rsc[0].nidle_now = max(0.0, ncpus - busy_cpus)
            first = False
        if live:
            dt = min(left[j] / (cpus[j] * j.flops * frac) for js in live.values() for j in js if cpus[j] > 0)
        else:
            dt = math.inf
        span = max(0.0, min(sim_now + dt, horizon) - sim_now)
        if span > 0:
            result.total_shortfall += max(0.0, ncpus - busy_cpus) * span
            for p in projects:
                result.project_shortfall[p.index] += max(0.0, fair[p] - used.get(p, 0.0)) * span
        if busy_cpus >= ncpus - IDLE_EPS and live:
            result.rsc[0].saturated_time = sim_now + dt - now
        if not live:
            break
        for js in live.values():
            for j in js:
                if cpus[j] > 0:
                    left[j] -= cpus[j] * j.flops * frac * dt
        sim_now += dt
        for js in live.values():
            for j in js:
                if left[j] <= 1e-9 * (j.size + 1.0):
                    del left[j]
                    j.rr_finish = sim_now
                    if sim_now > j.deadline:
                        j.rr_miss = True
                        key = (j.project.index, 0)
                        result.misses[key] = result.misses.get(key, 0) + 1
    result.rsc[0].shortfall = result.total_shortfall
    for r in range(1, len(em.resources)):
        _wrr_simulate_gpu(em, now, r, result)
    return result


def _wrr_simulate_gpu(em, now: float, r: int, result: RRResult) -> None:
    """wrr_simulate for the GPU type `r`: the same weighted round-robin over its instances
    among the projects with a version for it (reference/debt-era.md §4, per type as in
    BOINC 6)."""
    res = em.resources[r]
    ninst = float(res.ninstances)
    frac = res.overall_frac
    horizon = now + em.work_buf_min
    left: dict = {}
    by_project: dict = {}
    for p in em.projects:
        for j in p.jobs:
            if j.rsc != r:
                continue
            j.rr_miss = False
            j.rr_finish = now
            left[j] = j.est_flops_remaining(em.exact_estimates)
            by_project.setdefault(p, []).append(j)
            key = (p.index, r)
            result.nused_total[key] = result.nused_total.get(key, 0.0) + j.gpu_usage
    eligible = [p for p in em.projects if p.rsc_ok[r]]
    share_sum = sum(p.share for p in eligible)
    fair = {p: (p.share / share_sum * ninst if share_sum > 0 else ninst / len(eligible)) for p in eligible}
    rs = result.rsc[r]
    sim_now = now
    first = True
    steps = 0
    max_steps = MAX_STEPS_PER_JOB * (len(left) + 1)
    while True:
        steps += 1
        if steps > max_steps:
            raise EngineLimitError(
                f"the weighted round-robin simulation of {res.name} at {now:.0f} s took more than "
                f"{max_steps} steps for {_jobs(len(left))}: job sizes or processor speeds are out of range"
            )
        live = {p: [j for j in js if j in left] for p, js in by_project.items()}
        live = {p: js for p, js in live.items() if js}
        inst = _wrr_allocation(live, ninst, cap=_gpu_cap)
        used = {p: sum(inst[j] for j in js) for p, js in live.items()}
        busy = sum(used.values())
        if first:
            rs.nidle_now = max(0.0, ninst - busy)
            first = False
        # a job at its full gpu_usage computes at its version's speed
        speed = {j: inst[j] / _gpu_cap(j) * j.flops * frac for js in live.values() for j in js}
        if live:
            dt = min(left[j] / speed[j] for js in live.values() for j in js if inst[j] > 0)
        else:
            dt = math.inf
        span = max(0.0, min(sim_now + dt, horizon) - sim_now)
        if span > 0:
            rs.shortfall += max(0.0, ninst - busy) * span
            for p in eligible:
                key = (p.index, r)
                result.project_rsc_shortfall[key] = (
                    result.project_rsc_shortfall.get(key, 0.0) + max(0.0, fair[p] - used.get(p, 0.0)) * span
                )
        if busy >= ninst - IDLE_EPS and live:
            rs.saturated_time = sim_now + dt - now
        if not live:
            break
        for js in live.values():
            for j in js:
                if inst[j] > 0:
                    left[j] -= speed[j] * dt
        sim_now += dt
        for js in live.values():
            for j in js:
                if left[j] <= 1e-9 * (j.size + 1.0):
                    del left[j]
                    j.rr_finish = sim_now
                    if sim_now > j.deadline:
                        j.rr_miss = True
                        key = (j.project.index, r)
                        result.misses[key] = result.misses.get(key, 0) + 1


def _gpu_cap(j) -> float:
    """The instances a GPU job can hold: its gpu_usage (one when the version states none)."""
    return j.gpu_usage if j.gpu_usage > 0 else 1.0


def _wrr_allocation(live: dict, ncpus: float, cap=None) -> dict:
    """CPUs per result: shares among projects with results, equal within a project, at most
    one CPU per result (or `cap(result)` instances of a GPU), what a project cannot use
    redistributed to the others."""
    alloc = {j: 0.0 for js in live.values() for j in js}
    open_jobs = {p: list(js) for p, js in live.items()}
    remaining = float(ncpus)
    while remaining > IDLE_EPS and open_jobs:
        weights = {p: p.share for p in open_jobs}
        total = sum(weights.values())
        if total <= 0:
            weights = {p: 1.0 for p in open_jobs}
            total = float(len(open_jobs))
        given = 0.0
        for p, js in list(open_jobs.items()):
            grant = remaining * weights[p] / total / len(js)
            for j in list(js):
                most = 1.0 if cap is None else cap(j)
                g = min(grant, most - alloc[j])
                alloc[j] += g
                given += g
                if alloc[j] >= most - IDLE_EPS:
                    alloc[j] = most
                    js.remove(j)
            if not js:
                del open_jobs[p]
        remaining -= given
        if given <= IDLE_EPS:
            break
    return alloc
