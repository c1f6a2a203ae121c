"""A job's life on the emulated host: made from the state file or a scheduler reply, started
on a CPU slot or a GPU instance, preempted (left in memory or removed, losing the work since
its checkpoint), checkpointed, and finished, ready to report (reference/client.md §3, §6.3).

It mirrors BOINC's client: `CLIENT_STATE::enforce_schedule` (client/cpu_sched.cpp) starting
and preempting jobs, `ACTIVE_TASK::preempt` (reference/client.md §6.3), and
`handle_finished_apps` / `app_finished` (client/cs_apps.cpp), as BOINC's emulator runs them
with the process stubs of client/sim_util.cpp and the job progress of client/sim.cpp.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from boincweb.human import duration, number, sim_time

from .cpu_sched import WHY_EDF
from .records import TimeSlice
from .state import FINISHED, QUEUED, RUNNING, JobState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .scenario import Prefs
    from .state import ProjectState, Resource


def _md5():
    """The MD5 constructor: the interpreter's own module first, as `random` takes its SHA-512,
    since hashlib loads OpenSSL's library, 3.3 MB of a run's peak memory (issue 33); the
    digests are the same."""
    try:
        from _md5 import md5  # type: ignore[import-not-found]  # CPython's own, without stubs
    except ImportError:  # an interpreter built without it
        from hashlib import md5
    return md5


class JobLifecycle:
    """The Emulator's part that starts, stops and ends jobs (a mixin, see HostAvailability)."""

    # Read from the rest of the Emulator (its __init__ and its other parts); declared here for
    # the type checker only, with no value, so they are not class attributes.
    now: float
    bce: bool
    delta: float
    prefs: Prefs
    n_usable_cpus: int
    work_buf_min: float
    pick_table: dict
    keeps_series: bool
    pick_log: dict
    policy_name: str
    resources: list[Resource]
    rsc_index: dict[str, int]
    projects: list[ProjectState]
    state_version: int
    log: Callable[[str, str, str, str], None]
    job_peak_flops: Callable[[JobState], float]
    _update_dcf: Callable[[JobState], None]

    def _init_jobs(self) -> None:
        self.running: list[JobState] = []
        self.all_jobs: list[JobState] = []
        self.cpu_slots: list = [None] * self.n_usable_cpus
        self.job_seq = 0
        self.task_count = 0  # jobs started so far (task_seq)
        self.slices: list[TimeSlice] = []
        self._starts_now = (-1.0, 0)  # (instant, jobs started at it), for the decision log

    def _version_for(self, app, resource: str | None):
        usable = [v for v in app.versions if v.resource in self.rsc_index]
        if resource is not None:
            usable = [v for v in usable if v.resource == resource] or usable
        if not usable:
            return None
        return max(usable, key=lambda v: v.flops)

    def new_job(
        self,
        p,
        app,
        version,
        size: float,
        fpops_est: float,
        received: float,
        deadline: float,
        name: str | None = None,
        initial: bool = False,
    ) -> JobState:
        p.job_counter += 1
        self.job_seq += 1
        cp = 0.0 if self.bce else app.checkpoint_period
        j = JobState(
            name or f"{p.name}_{app.name}_{p.job_counter}",
            p,
            app,
            version,
            self.rsc_index[version.resource],
            size,
            fpops_est,
            received,
            deadline,
            self.job_seq,
            initial,
            cp,
        )
        j.peak_flops = float(self.job_peak_flops(j))
        p.jobs.append(j)
        p.jobs_version += 1
        self.all_jobs.append(j)
        self.state_version += 1
        return j

    def _add_initial_jobs(self) -> None:
        initial = [(p, ij) for p in self.projects for ij in p.spec.jobs]
        if self.bce:
            # BOINC sorts the results it reads by arrival, then by the MD5 of their names
            # (CLIENT_STATE::sort_results, arrived_first): the order the round-robin
            # simulation queues them in and the run list breaks ties by
            md5 = _md5()
            initial.sort(key=lambda pj: (pj[1].received, md5(pj[1].name.encode()).hexdigest()))
        for p, ij in initial:
            app = p.spec.app(ij.app)
            v = self._version_for(app, ij.resource)
            if v is None:
                continue
            size = ij.fpops_est if self.bce else ij.fpops
            j = self.new_job(p, app, v, size, ij.fpops_est, ij.received, ij.deadline, ij.name, True)
            j.done = j.ckpt_done = float(ij.flops_done)
            j.flops_left = size - j.done
            j.started = ij.flops_done > 0
            if j.started:
                self.task_count += 1
                j.task_seq = self.task_count
            p.jobs_version += 1

    def _start(self, j, why: str, gpu_instance: int) -> None:
        p = j.project
        j.state = RUNNING
        p.jobs_version += 1
        resumed = j.started
        if not resumed:
            self.task_count += 1
            j.task_seq = self.task_count
        j.started = True
        j.run_start = self.now
        j.slice_start = self.now
        j.slice_why = why
        if why == WHY_EDF:
            j.once_ran_edf = True
        if j.rsc == 0:
            need = max(1, round(j.avg_ncpus))
            free = [i for i, s in enumerate(self.cpu_slots) if s is None]
            for i in free[:need]:
                self.cpu_slots[i] = j
            j.instance = free[0] if free else -1
        else:
            j.instance = gpu_instance
        self.running.append(j)
        res = self.resources[j.rsc]
        at, n = self._starts_now
        n = n + 1 if at == self.now else 1
        self._starts_now = (self.now, n)
        if self.keeps_series:
            self.log(
                "schedule",
                p.name,
                j.name,
                f"{'Resumed' if resumed else 'Started'} {j.name} of {p.name} on {res.name} #{j.instance} "
                f"because {self._start_reason(j, why, n)}.",
            )

    def _start_reason(self, j, why: str, n: int) -> str:
        """Why a job started, with the values the policy compared (the decision log)."""
        p = j.project
        if why == "edf":
            text = "it is in deadline danger (EDF)"
            if not math.isfinite(j.rr_finish):
                return text
            slack = j.deadline - j.rr_finish
            due = sim_time(j.deadline)
            when = (
                f"{duration(-slack)} after its deadline {due}"
                if slack < 0
                else f"{duration(slack)} before its deadline {due}"
            )
            if self.policy_name != "boinc5":
                # BOINC 7 counts a miss when the finish falls within the minimum buffer of it
                when += f", with a minimum buffer of {duration(self.work_buf_min)}"
            return f"{text}: the round-robin simulation has it finish at {sim_time(j.rr_finish)}, {when}"
        if why == "unfinished_time_slice":
            return f"its time slice is not over (it started at {sim_time(j.run_start)})"
        if why == "fifo":
            return "it is the oldest job"
        if why != "priority":
            return why
        debt = self.policy_name == "boinc5"  # reference/debt-era.md §5 step 5
        key = j.rsc if j.rsc in self.pick_table else -1
        began = dict(self.pick_table.get(key, []))
        # each pick lowered its project's value: replay those before this job's pick
        now = dict(began)
        picked: dict = {}
        for name, v in self.pick_log.get(key, [])[: j.pick_seq]:
            now[name] = v
            picked[name] = picked.get(name, 0) + 1
        # a project whose every job was already picked was not in the running
        jobs = {q.name: sum(1 for x in q.jobs if key < 0 or x.rsc == key) for q in self.projects}
        done = [name for name in now if name != p.name and picked.get(name, 0) >= jobs.get(name, 0)]
        fmt: Callable[[float], str] = duration if debt else number
        if debt:
            rsc = "" if j.rsc == 0 else self.resources[j.rsc].name + " "
            what = f"the most {rsc}short-term debt (time owed to it)"
        else:
            what = "the highest scheduling priority"
        if not math.isfinite(j.pick_value) or p.name not in now:
            return f"{p.name} had {what}"
        now[p.name] = j.pick_value
        text = f"{p.name} had {what} when picked: {fmt(j.pick_value)}"
        others = [f"{name} {fmt(v)}" for name, v in now.items() if name != p.name and name not in done]
        if others:
            text += f" against {', '.join(others)}"
        if done:
            text += f" ({', '.join(done)}: no other job to run)"
        lowered = [f"{name} {fmt(v)}" for name, v in began.items() if fmt(v) != fmt(now[name])]
        if lowered:
            text += (
                f" (the schedule began with {', '.join(lowered)}; each job it picked lowered its project's "
                f"{'anticipated debt' if debt else 'priority'})"
            )
        if n > 1:
            text += f"; job {n} started at this instant, on another free {'CPU' if j.rsc == 0 else 'device'}"
        return text

    def _preempt(self, j, why: str, force_remove: bool = False) -> None:
        """ACTIVE_TASK::preempt (§6.3): GPU jobs always leave memory; a job that never
        checkpointed stays; otherwise leave_apps_in_memory decides. Leaving memory loses the
        work since the checkpoint and costs the app's resume time (`--compat intended`)."""
        p = j.project
        self._close_slice(j, self.now)
        self._release(j)
        j.state = QUEUED
        p.jobs_version += 1
        never_checkpointed = j.checkpoint_period > 0 and j.ckpt_done <= 0
        remove = force_remove or j.rsc != 0 or (not never_checkpointed and not self.prefs.leave_apps_in_memory)
        lost = 0.0
        if remove and not self.bce:
            lost = j.done - j.ckpt_done
            if lost > 0:
                p.flops_lost += lost
                j.done = j.ckpt_done
                j.flops_left = j.size - j.done
                self.state_version += 1
            j.resume_left = float(j.app.resume_cost) if j.done > 0 else 0.0
            j.in_memory = False
        else:
            j.in_memory = True
        if not self.keeps_series:
            return
        where = (
            "left in memory"
            if j.in_memory
            else (
                f"removed from memory, losing {lost / 1e9:.1f} GFLOP since its checkpoint"
                if lost > 0
                else "removed from memory"
            )
        )
        self.log("preempt", p.name, j.name, f"Preempted {j.name} of {p.name} ({why}); {where}.")

    def _release(self, j) -> None:
        if j in self.running:
            self.running.remove(j)
        if j.rsc == 0:
            for i, s in enumerate(self.cpu_slots):
                if s is j:
                    self.cpu_slots[i] = None
        j.instance = -1

    def _close_slice(self, j, end: float) -> None:
        if end > j.slice_start:
            self.slices.append(
                TimeSlice(
                    self.resources[j.rsc].name, j.instance, j.name, j.project.name, j.slice_start, end, j.slice_why
                )
            )

    def _checkpoint(self, j, t0, t1, done0, wait, rate) -> None:
        cp = j.checkpoint_period
        if cp <= 0:
            j.ckpt_done = j.done
            return
        k = math.floor((t1 - j.run_start) / cp + 1e-9)
        tk = j.run_start + k * cp
        if k >= 1 and tk > t0:
            j.ckpt_done = done0 + rate * max(0.0, tk - t0 - wait)

    def abort(self, j, why: str) -> None:
        """The project aborts a job the client holds (a scheduler reply's <result_abort>,
        reference/server.md §3.6): it stops and leaves the queue; its work is wasted, and it
        is not reported as done."""
        p = j.project
        if j not in p.jobs:
            return
        if j.state == RUNNING:
            self._close_slice(j, self.now)
            self._release(j)
        p.jobs.remove(j)
        p.jobs_version += 1
        j.state = FINISHED
        p.flops_wasted += j.peak_flop_count
        self.state_version += 1
        self.must_schedule = True
        self.log("finish", p.name, j.name, f"{p.name} aborted {j.name} ({why}).")

    def _finish(self, j, tc: float) -> None:
        """A job ends: it becomes ready to report (§3 app_finished)."""
        p = j.project
        self._close_slice(j, tc)
        self._release(j)
        p.jobs.remove(j)
        p.jobs_version += 1
        j.state = FINISHED
        # BOINC's emulator notices the end at the step that closes the interval it falls in
        # and stamps that step (app_finished: completed_time = now), which the report rule
        # counts from (docs/engine-fidelity.md)
        j.completed_time = math.ceil(tc / self.delta - 1e-9) * self.delta if self.bce else tc
        p.ready.append(j)
        p.jobs_completed += 1
        self._update_dcf(j)
        self.state_version += 1
        self.must_schedule = True
        if self.keeps_series:
            self.log(
                "finish", p.name, j.name, f"{j.name} of {p.name} finished at {sim_time(tc)} and is ready to report."
            )
