"""The emulator's accounting of time passing: each running job's FLOPS for the coming
interval (cpu_scale), the work, peak FLOPs, elapsed time, REC and idle time of an interval in
which nothing but job progress changes, the duration correction factor of a finished job, and
the series the run records (reference/client.md §3, §5, §6.1, §6.3).

It mirrors BOINC's client emulator: the FLOP accounting of `ACTIVE_TASK_SET::poll`
(client/sim.cpp), `update_rec` / `adjust_rec` (client/cpu_sched.cpp) with
`WORK_FETCH::accumulate_inst_sec` (client/work_fetch.cpp), and
`PROJECT::update_duration_correction_factor` (reference/client.md §6.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .rec import update_average
from .records import BufferSample, HostPeriod, RecordChunk, RecSample, TimeSlice
from .state import COBBLESTONE_SCALE, FINISHED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .records import Decision, RpcEvent
    from .rr_sim import RRResult
    from .scenario import Prefs
    from .state import JobState, ProjectState, Resource

# the share of a job's size below which what is left is rounding, not work (_advance)
FINISH_EPS = 1e-12


class Accounting:
    """The Emulator's part that accounts time passing and keeps the records (a mixin, see
    HostAvailability)."""

    # Read from the rest of the Emulator (its __init__ and its other parts); declared here for
    # the type checker only, with no value, so they are not class attributes.
    now: float
    bce: bool
    delta: float
    prefs: Prefs
    cpu_flops: float
    n_usable_cpus: int
    work_buf_min: float
    work_buf_total: float
    rec_half_life: float
    sample_interval: float
    resources: list[Resource]
    projects: list[ProjectState]
    running: list[JobState]
    all_jobs: list[JobState]
    on: bool
    active: bool
    gpu_acct: bool
    rec_acct: bool
    slices: list[TimeSlice]
    decisions: list[Decision]
    rpc_events: list[RpcEvent]
    host_periods: list[HostPeriod]
    host_down_since: dict[str, float]
    keeps_series: bool
    policy: Any
    _rr_cache: tuple[tuple[float, int], RRResult] | None
    _checkpoint: Callable[..., None]
    _finish: Callable[[JobState, float], None]

    def _init_accounting(self) -> None:
        self.cpu_scale = 1.0
        self._rates_of: tuple | None = None  # what the running jobs' rates were set for (set_rates)
        # credits per instance-second of each resource (REC, adjust_rec)
        limit = self.prefs.cpu_usage_limit / 100.0
        self.credit_scale = [limit * self.cpu_flops * res.relative_speed * COBBLESTONE_SCALE for res in self.resources]
        self.flops_used = 0.0
        self.active_time = 0.0
        self.gpu_active_time = 0.0
        self.rec_samples: list[RecSample] = []
        self.buffer_samples: list[BufferSample] = []
        self.last_sample = -math.inf
        self.sent: dict[str, int] = {}  # series name -> how many of its records earlier chunks carried
        # under --compat bce: when REC was last adjusted (rec_interval_start) and, per
        # project, the credit of the steps since then (_bce_rec)
        self.rec_start = 0.0
        self.rec_pending: dict = {}

    def _rates(self) -> None:
        """Set every running job's FLOPS for the coming interval (cpu_scale, §3): set_rates."""
        set_rates(self)

    def _advance(self, t1: float) -> None:
        """Account the interval [now, t1] in which nothing changes but job progress
        (advance_interval)."""
        advance_interval(self, t1)

    def _update_dcf(self, j) -> None:
        """update_duration_correction_factor (reference/client.md §6.3)."""
        p = j.project
        est_unc = j.fpops_est / j.flops
        est = est_unc * p.dcf
        if est_unc <= 0 or est <= 0:
            return
        raw = j.elapsed / est_unc
        adj = j.elapsed / est
        if adj > 1.1:
            p.dcf = raw
        elif adj < 0.1:
            p.dcf = 0.99 * p.dcf + 0.01 * raw
        else:
            p.dcf = 0.9 * p.dcf + 0.1 * raw
        p.dcf = min(max(p.dcf, 0.01), 100.0)

    def _sample(self) -> None:
        if self.now - self.last_sample < self.sample_interval:
            return
        self.last_sample = self.now
        if not self.keeps_series:
            return
        for p in self.projects:
            self.rec_samples.append(RecSample(self.now, p.name, p.rec, p.priority, p.std_shown, p.ltd))
        if self._rr_cache is not None:
            rr = self._rr_cache[1]
            for r, res in enumerate(self.resources):
                rs = rr.rsc[r]
                self.buffer_samples.append(
                    BufferSample(
                        self.now,
                        res.name,
                        rs.saturated_time,
                        rs.shortfall,
                        rs.nidle_now,
                        rs.busy_time,
                        self.work_buf_min,
                        self.work_buf_total,
                    )
                )

    def take_chunk(self, *, forget: bool = False) -> RecordChunk:
        """The records made since the previous chunk, with the slices and host periods still
        open cut at now: for a caller that drives the run itself (engine.start) and stores its
        records as it goes. `forget` then drops them, and the finished jobs, from the run, so
        a long run kept between instants (pickled) stays small; its result() then holds only
        the records made after."""
        chunk = self._chunk(False)
        if forget:
            for name in ("slices", "rec_samples", "buffer_samples", "rpc_events", "decisions", "host_periods"):
                getattr(self, name).clear()
            self.sent = {}
            self.all_jobs = [j for j in self.all_jobs if j.state != FINISHED]
        return chunk

    def _chunk(self, last: bool) -> RecordChunk:
        """The records since the previous chunk, and what is still open now (RecordChunk)."""
        now = self.now
        series: dict[str, tuple] = {}
        for name, records in (
            ("slices", self.slices),
            ("rec", self.rec_samples),
            ("buffers", self.buffer_samples),
            ("rpcs", self.rpc_events),
            ("decisions", self.decisions),
            ("host_periods", self.host_periods),
        ):
            start = self.sent.get(name, 0)
            series[name] = tuple(records[start:])
            self.sent[name] = len(records)
        # at the end every running slice has been closed into self.slices
        open_slices = (
            ()
            if last
            else tuple(
                TimeSlice(
                    self.resources[j.rsc].name, j.instance, j.name, j.project.name, j.slice_start, now, j.slice_why
                )
                for j in self.running
                if now > j.slice_start
            )
        )
        open_periods = tuple(
            HostPeriod(start, now, state) for state, start in self.host_down_since.items() if now > start
        )
        return RecordChunk(now, open_slices=open_slices, open_host_periods=open_periods, last=last, **series)


def set_rates(em) -> None:
    """Accounting._rates: every running job's FLOPS for the coming interval, and cpu_scale
    (§3). The rates follow from the running jobs, in their order, and from whether CPUs and
    GPUs compute, and nothing else sets them: when those are as at the last call
    (`_rates_of`), the rates and cpu_scale it set still hold. accounting.pxd types the
    emulator as an EmulatorState (state.pxd)."""
    cpu_on = em.on and em.active or em.bce
    gpu_on = em.gpu_acct
    running = em.running
    last = em._rates_of
    if last is not None and last[0] == cpu_on and last[1] == gpu_on and last[2] == running:
        return
    em.cpu_scale = job_rates(running, cpu_on, gpu_on, em.n_usable_cpus, em.bce)
    em._rates_of = (cpu_on, gpu_on, list(running))


def advance_interval(em, t1: float) -> None:
    """Accounting._advance: account the interval [now, t1] in which nothing changes but job
    progress. accounting.pxd types the emulator as an EmulatorState (state.pxd) and the
    interval's times as C doubles."""
    t0 = em.now
    dt = t1 - t0
    # the emulator's settings this walk reads more than once
    bce = em.bce
    delta = em.delta
    can_compute = em.on and em.active
    if bce:
        em.active_time += dt
    elif can_compute:
        em.active_time += dt
    if em.gpu_acct:
        em.gpu_active_time += dt
    finished: list[tuple[float, JobState]] = []
    executing: set[ProjectState] = set()
    usage: list[tuple[ProjectState, int, float, float]] = []  # (project, resource, instances, seconds from t0) for REC
    cpu_flops = em.cpu_flops
    scale = em.cpu_scale if em.running else 1.0
    resources = em.resources
    flops_used = em.flops_used
    flops_used = advance_jobs(
        em, em.running, t0, dt, bce, scale, cpu_flops, resources, flops_used, finished, executing, usage
    )
    em.flops_used = flops_used
    # REC is updated once per step in BOINC's emulator: the interval's credit is spread
    # evenly over it, which is exact while every job runs throughout. A job ending inside
    # the interval makes the credit uneven, so the last grid step before the first end is
    # accounted on its own, as a fixed step would (reference/client.md §6.1).
    split = t0
    if finished and not bce:
        split = max(t0, math.floor(min([tc for tc, _j in finished]) / delta) * delta)
    before: dict[tuple[ProjectState, int], float] = {}
    for p, r, n, run_time in usage:
        if split > t0:
            head = min(run_time, split - t0)
            key = (p, r)
            before[key] = before.get(key, 0.0) + head * n
            run_time -= head
        p.secs_this_interval[r] += run_time * n
    k = max(1, round(dt / delta))
    d = dt / k
    limit = em.prefs.cpu_usage_limit / 100.0
    extra = {}
    if bce and finished:
        # app_finished adds the instance-seconds since the last REC adjustment of the
        # first job that handle_finished_apps finds ended (the oldest task), and the
        # adjust_rec that follows counts it again with every scheduled job
        # (cs_apps.cpp; docs/engine-fidelity.md)
        first = min([j for _tc, j in finished], key=_task_order)
        elapsed = delta if em.on and dt >= delta else t1 - em.rec_start
        speed = resources[first.rsc].relative_speed
        secs = first.avg_ncpus * elapsed * cpu_flops + (
            first.gpu_usage * elapsed * speed * cpu_flops if first.rsc else 0.0
        )
        extra[first.project] = secs * limit * COBBLESTONE_SCALE
    account_projects(
        em,
        em.projects,
        executing,
        dt,
        k,
        d,
        split,
        t0,
        t1,
        before,
        extra,
        bool(finished),
        em.credit_scale,
        bce,
        em.rec_half_life,
    )
    if bce and (em.rec_acct or finished):
        em.rec_start = t1
    elif bce and em.on and dt >= delta:
        em.rec_start = t1 - delta
    em.policy.account(t0, t1)
    reset_wall_intervals(em.projects)
    em.now = t1
    if bce:
        # BOINC's emulator finds every job that ended in the step at once and handles them
        # in the order of their tasks (handle_finished_apps walks the active tasks, made at
        # each job's first start), which is the order their ends update the duration
        # correction factor in (docs/engine-fidelity.md, "Jobs that end in one step")
        finished.sort(key=_finished_task_order)
    else:
        finished.sort(key=_finished_time)
    for tc, j in finished:
        em._finish(j, tc)


def _finished_task_order(x) -> int:
    return x[1].task_seq


def _finished_time(x) -> float:
    return x[0]


def job_rates(running, cpu_on, gpu_on, n, bce=False):
    """Accounting._rates: set every running job's FLOPS for the coming interval and return
    cpu_scale (§3). accounting.pxd types the jobs as JobStates (state.pxd).

    Under bce the CPU shares are summed as BOINC's emulator sums them (ACTIVE_TASK_SET::poll,
    sim.cpp): the CPU jobs' and the GPU jobs' apart, each in the order of the tasks, and then
    added, since cpu_scale's last bits move the jobs' ends (docs/engine-fidelity.md, "FLOPs
    left, step by step")."""
    usage = 0.0
    gpu_cpu = 0.0
    if bce:
        cpu_cpu = 0.0
        for j in running if _in_task_order(running) else sorted(running, key=_task_order):
            if j.rsc == 0:
                cpu_cpu += j.avg_ncpus
            elif gpu_on:
                gpu_cpu += j.avg_ncpus
        usage = cpu_cpu + gpu_cpu
    else:
        for j in running:
            if j.rsc == 0:
                usage += j.avg_ncpus
            elif gpu_on:
                usage += j.avg_ncpus
                gpu_cpu += j.avg_ncpus
    scale = 1.0
    if usage > n and usage - gpu_cpu > 0:
        scale = max(0.0, (n - gpu_cpu) / (usage - gpu_cpu))
    for j in running:
        if j.rsc == 0:
            j.rate = j.flops * scale if cpu_on else 0.0
        else:
            j.rate = j.flops if gpu_on else 0.0
    return scale


def _task_order(j):
    return j.task_seq


def _in_task_order(running) -> bool:
    """Whether the running jobs are already in the order of their tasks, as they mostly are
    (a job joins the list when it starts): then job_rates walks them as they are instead of
    sorting them, which is the same order."""
    last = None
    for j in running:
        seq = j.task_seq
        if last is not None and seq < last:
            return False
        last = seq
    return True


def advance_jobs(acct, running, t0, dt, bce, scale, cpu_flops, resources, flops_used, finished, executing, usage):
    """Accounting._advance's walk of the running jobs over [t0, t0 + dt]: their progress,
    checkpoints, peak FLOPs and elapsed time, the jobs that end (appended to `finished`), the
    projects that compute (added to `executing`) and the instance-seconds for REC (appended to
    `usage` for advance_interval, which splits them at a job's end; under bce, where the
    interval is never split, added straight to the projects' secs_this_interval, in the same
    order); returns the host's FLOPs used. accounting.pxd types the jobs as JobStates
    (state.pxd), whose attributes it reads from their C structure."""
    for j in running:
        rate = j.rate
        if rate <= 0:
            if bce:
                # BOINC's emulator adds a step to the elapsed time of every executing
                # task at the end of each step, computing or not (sim.cpp simulate()):
                # a GPU job held while the GPUs are suspended or the host is off
                # (docs/engine-fidelity.md, "Elapsed time of a job that does not compute")
                j.elapsed += dt
                if j.rsc:
                    # and REC counts the instance-seconds of every scheduled job
                    # (adjust_rec, accumulate_inst_sec), computing or not
                    secs = j.project.secs_this_interval
                    secs[j.rsc] += dt * j.gpu_usage
                    secs[0] += dt * j.avg_ncpus
            continue
        p = j.project
        executing.add(p)
        wait = min(j.resume_left, dt)
        j.resume_left -= wait
        work = rate * (dt - wait)
        run_time = dt
        charged = dt  # the time its peak FLOPs and elapsed time are counted for
        done0 = j.done
        size = j.size
        if bce:
            # BOINC's emulator takes each step's work off the job's FLOPs left, one step at a
            # time (sim_flops_left -= diff x flops, ACTIVE_TASK_SET::poll), and the job ends in
            # the step that takes it to 0 or below: sums of steps, not rate x time, whose
            # last bits decide near-ties of the round-robin simulation's job ends
            # (docs/engine-fidelity.md, "FLOPs left, step by step")
            left = j.flops_left
            step = acct.delta
            n = int(dt / step + 0.5)
            if n < 1 or n * step != dt:
                left -= rate * dt
            else:
                per_step = step * rate
                for _i in range(n):
                    left -= per_step
                    if left <= 0.0:
                        break
            j.flops_left = left
            if left <= 0.0:
                run_time = min(dt, max(0.0, size - done0) / rate)
                work = size - done0
                finished.append((t0 + run_time, j))
                j.left_at_end = left
            elif done0 + work > size:
                work = size - done0
        elif done0 + work >= size - FINISH_EPS * size:
            # a remainder of a few ulps (the sum of the steps' work) is no work left: the
            # job ends in this interval and leaves the next one's cpu_scale
            run_time = min(dt, wait + max(0.0, size - done0) / rate)
            work = size - done0
            finished.append((t0 + run_time, j))
            if bce:
                j.left_at_end = -rate * (dt - run_time)
            if not bce:
                charged = run_time
            # else BOINC's emulator charges the whole step in which the job ends: the
            # interval ends with that step (grid), and ACTIVE_TASK_SET::poll adds
            # diff x app_peak_flops and diff of elapsed time for the step before it
            # finds the job done (docs/engine-fidelity.md)
        j.done = done0 + work
        if not bce:
            j.flops_left = size - j.done
        p.flops_computed += work
        if j.checkpoint_period <= 0:
            j.ckpt_done = j.done  # continuous checkpoints (_checkpoint)
        else:
            acct._checkpoint(j, t0, t0 + run_time, done0, wait, rate)
        if j.rsc:
            # BOINC's emulator scales the CPU part of every job's peak FLOPs by cpu_scale,
            # GPU jobs' too (app_peak_flops in ACTIVE_TASK_SET::poll, sim.cpp)
            ncpus = j.avg_ncpus * scale if bce else j.avg_ncpus
            peak = (ncpus + j.gpu_usage * resources[j.rsc].relative_speed) * cpu_flops
            # REC counts a scheduled job over the whole step under bce (adjust_rec)
            if bce:
                secs = p.secs_this_interval
                secs[j.rsc] += dt * j.gpu_usage
                secs[0] += dt * j.avg_ncpus
            else:
                usage.append((p, j.rsc, j.gpu_usage, run_time))
                usage.append((p, 0, j.avg_ncpus, run_time))
            p.wall_rsc_interval[j.rsc] += run_time * j.gpu_usage
        else:
            peak = j.avg_ncpus * scale * cpu_flops
            # BOINC counts a CPU job's instance-seconds for REC at its full CPU count
            # (accumulate_inst_sec); intended counts the CPU time it got
            if bce:
                p.secs_this_interval[0] += dt * j.avg_ncpus
            else:
                usage.append((p, 0, j.avg_ncpus * scale, run_time))
            p.wall_cpu_interval += run_time * j.avg_ncpus
        pf = charged * peak
        j.peak_flop_count += pf
        p.flops_used += pf
        flops_used += pf
        j.elapsed += charged * (2.0 if bce else 1.0)
    return flops_used


def job_ends(running, now):
    """The instants the running jobs that compute end at their rates (Emulator._plan).
    accounting.pxd types the jobs as JobStates (state.pxd)."""
    return [now + j.resume_left + j.flops_left / j.rate for j in running if j.rate > 0]


def account_projects(
    acct, projects, executing, dt, k, d, split, t0, t1, before, extra, any_finished, credit_scale, bce, half_life
):
    """Accounting._advance's walk of the projects over [t0, t1] (dt long, k grid steps of d):
    their idle time, the credit of their instance-seconds this interval (secs_this_interval,
    then zeroed) and their REC (under bce, Accounting._bce_rec's). accounting.pxd gives the
    credit's sums and the loop over the resources C types, with the same operations in the
    same order."""
    splitting = split > t0
    if bce:
        delta = acct.delta
        on = acct.on
        rec_acct = acct.rec_acct
        rec_pending = acct.rec_pending
        start = acct.rec_start
    for p in projects:
        if p in executing:
            p.idle_time = 0.0
        elif dt > 0:
            i0 = p.idle_time
            # sum over the k steps of d x (idle time after the step)^2 (§5 monotony)
            p.idle_time_sumsq += d * (k * i0 * i0 + i0 * d * k * (k + 1) + d * d * k * (k + 1) * (2 * k + 1) / 6.0)
            p.idle_time += dt
        credit = 0.0
        head = 0.0
        secs_this_interval = p.secs_this_interval
        for r in range(len(secs_this_interval)):
            secs = secs_this_interval[r]
            scale_r = credit_scale[r]
            if secs:
                credit += secs * scale_r
                secs_this_interval[r] = 0.0
            if splitting:
                head += before.get((p, r), 0.0) * scale_r
        if bce:
            bce_rec(
                acct,
                p,
                credit,
                t0,
                t1,
                any_finished,
                extra.get(p, 0.0),
                delta,
                on,
                rec_acct,
                rec_pending,
                start,
                half_life,
            )
            continue
        if splitting:
            p.rec, p.rec_time = update_average(split, t0, head, half_life, p.rec, p.rec_time)
            p.rec, p.rec_time = update_average(t1, split, credit, half_life, p.rec, p.rec_time)
        elif dt > 0:
            p.rec, p.rec_time = update_average(t1, t0, credit, half_life, p.rec, p.rec_time)


def reset_wall_intervals(projects) -> None:
    """Zero every project's wall time of the interval, CPU and GPU types (Accounting._advance)."""
    for p in projects:
        p.wall_cpu_interval = 0.0
        wall = p.wall_rsc_interval
        for r in range(1, len(wall)):
            wall[r] = 0.0


def bce_rec(acct, p, credit, t0, t1, finished, extra, delta, on, rec_acct, rec_pending, start, half_life) -> None:
    """REC as BOINC's emulator adjusts it (adjust_rec, cpu_sched.cpp; reference/client.md
    §9.4): at the schedule of every step the host is on and when a job ends, crediting the
    scheduled jobs over the time since the last adjustment, but dropping that time, with
    no update (so no decay either), when it is more than two steps long. Off, the host
    makes no schedule: the step before it goes off is credited only if a job ends at a
    step within two steps of it, and REC decays over the whole gap at its next update
    (update_average). `credit` is the project's credit over [t0, t1], at a constant rate;
    `delta`, `on`, `rec_acct`, `rec_pending`, `start` (rec_start) and `half_life` are the
    emulator's (`acct`'s), read once per interval by account_projects."""
    pending = rec_pending.get(p, 0.0)
    span = t1 - t0
    rate = credit / span if span > 0 else 0.0
    if on and span > delta:
        # the steps inside the interval are on: each adjusts REC at its schedule
        inner_end = t1 - delta
        first_end = t0 + delta
        if first_end - start > 2 * delta + 1e-6:
            # the first inner step's adjustment drops what came before it
            rec_span(p, first_end, inner_end, rate, 0.0, delta, half_life)
        else:
            rec_span(p, t0, inner_end, rate, pending, delta, half_life)
        pending = 0.0
        start = inner_end
        credit = rate * delta
    if not (rec_acct or finished):
        rec_pending[p] = pending + credit
        return
    rec_pending[p] = 0.0
    if t1 - start > 2 * delta + 1e-6:
        return  # the gap is dropped: no credit and no decay (adjust_rec)
    p.rec, p.rec_time = update_average(t1, start, pending + credit + extra, half_life, p.rec, p.rec_time)


def rec_span(p, a, b, rate, first, delta, half_life) -> None:
    """REC updated at every step from `a` to `b` for credit at `rate` per second, plus
    `first` in the first step. Steps of a constant rate compose into one update, except
    the first after a gap in the updates, which update_average spreads over the whole
    gap: that one is made alone."""
    if b <= a:
        return
    if p.rec_time != a and b - a > delta + 1e-6:
        p.rec, p.rec_time = update_average(a + delta, a, first + rate * delta, half_life, p.rec, p.rec_time)
        a += delta
        first = 0.0
    p.rec, p.rec_time = update_average(b, a, first + rate * (b - a), half_life, p.rec, p.rec_time)
