"""The host's availability in the emulator: its on, connected, active and GPU-active
processes (reference/client.md §2 `<time_stats>`, §3 step 1), their changes as events, and
the periods the records show.

It mirrors BOINC's client emulator: `RANDOM_PROCESS` in client/sim_util.cpp, the sampling of
the processes and of gpu_suspend_reason in client/sim.cpp `simulate()`, and the accounting of
each step with the state sampled at its end (`ACTIVE_TASK_SET::poll`, client/sim.cpp).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .events import EV_ACCT, EV_HOST
from .records import HostPeriod
from .state import gpu_allowed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .state import JobState, RandomProcess

HOST_PROCESSES = ("on", "connected", "active", "gpu_active")
# the order in which BOINC's emulator samples them within a step (sim.cpp simulate())
HOST_SAMPLE_ORDER = {"on": -4, "active": -3, "gpu_active": -2, "connected": -1}
HOST_STATES = ("off", "not_active", "gpu_suspended", "disconnected")  # records.HostPeriod
# under --compat bce a process's clock runs only while these are up (sim.cpp simulate())
HOST_CLOCK_GATES = {"connected": ("on",), "active": ("on",), "gpu_active": ("on", "active")}


class HostAvailability:
    """The Emulator's part that follows the host's processes (a mixin: one object, so the
    state stays plain attributes of the Emulator). `host_proc` (the RandomProcess of each of
    HOST_PROCESSES) is made by Emulator.__init__, which owns the order of draws from `rng`."""

    # Read from the rest of the Emulator (its __init__ and its other parts); declared here for
    # the type checker only, with no value, so they are not class attributes.
    now: float
    bce: bool
    delta: float
    duration: float
    events: int
    host_proc: dict[str, RandomProcess]
    running: list[JobState]
    grid: Callable[[float], float]
    _push: Callable[..., None]
    _rates: Callable[[], None]
    _preempt: Callable[..., None]

    def _init_host(self) -> None:
        self.on = self.host_proc["on"].up
        self.connected = self.host_proc["connected"].up
        self.active = self.host_proc["active"].up
        self.gpu_active = self.host_proc["gpu_active"].up
        # under --compat bce: the processes whose clocks are stopped, with the time left to
        # their next change, and a generation per process that retires its pending events
        self.host_paused: dict[str, float] = {}
        self.host_gen = {name: 0 for name in HOST_PROCESSES}
        # BOINC's emulator's view of GPU computing (gpu_suspend_reason): set at the end of
        # each decision pass of a step the host is on, read by the next pass (_gpu_allowed)
        self.gpu_seen = True
        self.gpu_recheck = False
        # whether GPUs compute in the coming interval; BOINC's emulator accounts each step
        # with the host state sampled at its end (_account_change)
        self.gpu_acct = self.on and self.active and self.gpu_active
        # whether the host is on at the end of the coming step: BOINC's emulator credits REC
        # for a step only at a schedule at its end (adjust_rec), which an off host skips
        self.rec_acct = self.on
        self.host_periods: list[HostPeriod] = []
        self.host_down_since: dict[str, float] = {s: 0.0 for s in self._host_states()}

    def _host_states(self) -> set[str]:
        """The HostPeriod states the host is in now (records.HostPeriod; reference/client.md
        §3 step 1: while off, the client is in no other state)."""
        if not self.on:
            return {"off"}
        states = set()
        if not self.active:
            states.add("not_active")
        elif not self.gpu_active:
            states.add("gpu_suspended")
        if not self.connected:
            states.add("disconnected")
        return states

    def _note_host_states(self) -> None:
        """Close the periods of states the host left and open those it entered."""
        now = self.now
        states = self._host_states()
        since = self.host_down_since
        for state in HOST_STATES:
            if state in since and state not in states:
                start = since.pop(state)
                if now > start:
                    self.host_periods.append(HostPeriod(start, now, state))
            elif state in states and state not in since:
                since[state] = now

    def _push_host(self, proc, name: str, restart: bool = False) -> None:
        """The event of the process's next change, on the grid. BOINC's emulator samples the
        host's state at the start of a step and then accounts the step that just ended with
        it (sim.cpp simulate(), ACTIVE_TASK_SET::poll), so under `--compat bce` the GPUs'
        progress and active time follow a change one step before the decisions do."""
        key = (name, self.host_gen[name])
        if self.bce:
            # RANDOM_PROCESS::sample takes a step off the time left before it looks, so the
            # change falls on the step in whose interval the period ends, not the step after;
            # never before the next step, but at the run's start and when the clock restarts:
            # the restarted process is sampled later in this step than the one that restarted
            # it (HOST_SAMPLE_ORDER), so a change already due falls on this step
            # (docs/engine-fidelity.md)
            t = proc.change_step()
            if restart:
                t = max(t, self.now)
            elif self.events or self.now > 0.0:
                t = max(t, self.now + self.delta)
            # changes at one step in the order BOINC's emulator samples the processes, which
            # is the order of their draws (sim.cpp simulate())
            self._push(t, EV_HOST, key, HOST_SAMPLE_ORDER[name])
        else:
            t = self.grid(proc.next_change)
            self._push(t, EV_HOST, key)
        if self.bce and name != "connected" and 0.0 < t < self.duration and t - self.delta >= self.now:
            # a change due at the end of the run or later is in no record (HostPeriod), so
            # the run's last step is accounted in the state the records show. A restarted
            # clock's change in this very step was already in the lookahead of the process
            # that restarted it (_up_after_restart)
            self._push(t - self.delta, EV_ACCT, key)

    def _gate_host_clocks(self, push_events: bool = True) -> None:
        """Stop or restart the clocks of the active, connected and GPU-active processes.

        BOINC's emulator samples the active and connected processes only in steps where the
        host is on, and the GPU-active process only where it is also active (sim.cpp
        simulate(), RANDOM_PROCESS::sample): their periods are measured in on-time (active
        on-time), so none of them changes while the host is off, and a period broken by an
        off period goes on where it stopped (`--compat bce`, docs/engine-fidelity.md)."""
        for name, gates in HOST_CLOCK_GATES.items():
            proc = self.host_proc[name]
            if not 0.0 < proc.frac < 1.0:
                continue
            running = all(getattr(self, g) for g in gates)
            if not running and name not in self.host_paused:
                if proc.owed:
                    # the change that the accounting lookahead made (_account_change) is
                    # one BOINC's emulator makes only when it samples the process, which it
                    # no longer does: the period stays undrawn until the clock restarts
                    proc.up = not proc.up
                    proc.owed = False
                self.host_paused[name] = proc.next_change - self.now
                proc.next_change = math.inf
                self.host_gen[name] += 1
            elif running and name in self.host_paused:
                proc.next_change = self.now + self.host_paused.pop(name)
                self.host_gen[name] += 1
                if push_events:
                    self._push_host(proc, name, restart=True)

    def _account_change(self, key) -> None:
        """The host state that accounts the coming step (see _push_host)."""
        name, gen = key
        if gen != self.host_gen[name]:
            return  # the process's clock was stopped or restarted since
        self.host_proc[name].advance(self.now + self.delta)
        procs = self.host_proc
        on = procs["on"].up
        active = self._up_after_restart("active", on)
        gpu_active = self._up_after_restart("gpu_active", on and active)
        self.gpu_acct = on and active and gpu_active
        self.rec_acct = on
        self._rates()

    def _up_after_restart(self, name: str, gates_up: bool) -> bool:
        """The state of a gated process at the end of the coming step: a stopped clock that
        restarts then with less than a step left changes in that step (_gate_host_clocks),
        and the step is accounted in that state."""
        proc = self.host_proc[name]
        paused = self.host_paused.get(name)
        if paused is not None and gates_up and paused < self.delta:
            return not proc.up
        return proc.up

    def _host_change(self, key) -> None:
        name, gen = key
        proc = self.host_proc[name]
        if gen == self.host_gen[name]:
            proc.advance(self.now)
            if self.bce:
                proc.settle()  # draws the next period now, in BOINC's order of draws
            if proc.next_change < math.inf:
                self._push_host(proc, name)
        elif getattr(self, name) == proc.up:
            return  # the process's clock was stopped or restarted since, with no change due
        # else its accounting event (_account_change) made the change before the clock
        # stopped: the state follows it now, with no next event until the clock restarts
        old = (self.on, self.active, self.gpu_active)
        setattr(self, name, proc.up)
        if self.bce and name in ("on", "active"):
            self._gate_host_clocks()
        if not self.bce:
            self.gpu_acct = self.on and self.active and self.gpu_active
        self._note_host_states()
        new = (self.on, self.active, self.gpu_active)
        if old == new:
            return
        cpu_ok = self.on and self.active
        gpu_ok = cpu_ok and self.gpu_active
        for j in list(self.running):
            if self.bce:
                # BOINC's emulator keeps CPU jobs computing while off (§9.4); a GPU job stops
                # computing with the GPUs (gpu_acct) and leaves its device at the first
                # schedule that sees them suspended (_gpu_allowed)
                stop = False
            elif j.rsc:
                stop = not gpu_ok
            else:
                stop = not cpu_ok
            if stop:
                why = (
                    "the host was turned off"
                    if not self.on
                    else ("computing was suspended" if not self.active else "GPU computing was suspended")
                )
                self._preempt(j, why, force_remove=not self.on)
        self._rates()
        self.must_schedule = True

    def _gpu_allowed(self) -> bool:
        """Whether a schedule made now may run GPU jobs (state.gpu_allowed)."""
        return gpu_allowed(self)
