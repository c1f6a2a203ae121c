"""Immutable output records of a run; all plain values, JSON-serialisable through `to_dict()`.

Times are seconds since the start of the run; FLOPs are floating-point operations (peak
FLOPs where reference/client.md §5 says so); resources are "cpu" or a GPU type name
("NVIDIA", "ATI", "intel_gpu").
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple
else:

    class _RecordType(type):
        """Makes each class written `class X(NamedTuple)` here a `collections.namedtuple` of
        its annotated fields, in order, with their defaults, its docstring and its methods:
        what `typing.NamedTuple` makes, without importing `typing` or evaluating the
        annotations (each an expression compiled at import there, about 25 M instructions of
        `python -m scheduling.engine`'s start-up with the `typing` module; issue 33).
        Type checkers see `typing.NamedTuple`."""

        def __new__(mcls, name, bases, namespace):
            if not bases:
                return super().__new__(mcls, name, bases, namespace)
            fields = tuple(namespace.get("__annotations__", ()))
            defaults = [namespace[f] for f in fields if f in namespace]
            made = collections.namedtuple(name, fields, defaults=defaults, module=namespace["__module__"])
            for key, value in namespace.items():
                if key not in fields and key not in ("__annotations__", "__module__", "__qualname__"):
                    setattr(made, key, value)
            made.__qualname__ = namespace.get("__qualname__", name)
            return made

    class NamedTuple(metaclass=_RecordType):
        """The base of the engine's records (`_RecordType`)."""


class TimeSlice(NamedTuple):
    """A job running on one instance of a resource from `start` to `end`.

    `why` is "edf" (deadline danger: EDF pass), "priority" (picked by project priority or
    debt), "unfinished_time_slice" (kept because its time slice was not over), or "fifo".
    `instance` is the CPU slot or the GPU device index.
    """

    resource: str
    instance: int
    job: str
    project: str
    start: float
    end: float
    why: str


class RecSample(NamedTuple):
    """A project's REC (credits/day, reference/client.md §6.1), scheduling priority and debts.

    `short_term_debt` / `long_term_debt` are the debt-era values (reference/debt-era.md §3),
    the short-term one less its mean over the runnable projects (as BOINC 6 kept it),
    0 under the REC-era policies.
    """

    time: float
    project: str
    rec: float
    priority: float
    short_term_debt: float
    long_term_debt: float


class BufferSample(NamedTuple):
    """A resource's round-robin simulation outputs against the buffer (reference/client.md §6.4)."""

    time: float
    resource: str
    saturated_time: float
    shortfall: float
    nidle_now: float
    busy_time: float
    work_buf_min: float
    work_buf_total: float


class RpcEvent(NamedTuple):
    """One scheduler RPC attempt (seed 000, reference/client.md §3, §6.5-6.7).

    `reason` is "need_work", "results_due" or "master_fetch"; `requests` maps a resource to
    `[req_secs, req_instances]`; `jobs_received` maps a resource to a count; `reported` is
    the number of results reported; `backoff` the RPC back-off chosen on failure (seconds).
    """

    time: float
    project: str
    url: str
    reason: str
    ok: bool
    requests: dict
    jobs_received: dict
    reported: int
    backoff: float
    message: str


class Decision(NamedTuple):
    """One scheduling or fetch decision explained in one sentence."""

    time: float
    kind: str
    project: str
    job: str
    text: str


class HostPeriod(NamedTuple):
    """A period from `start` to `end` when the host could not do something (reference/client.md §2).

    The host's on / connected / active / gpu_active processes (§2, §3 step 1) give four
    states, each a separate series of periods that never overlap themselves:

    - "off": the client is not running (`on` down); nothing computes or contacts a server;
    - "not_active": the client runs but computing is suspended (`active` down);
    - "gpu_suspended": computing is allowed but GPU computing is not (`gpu_active` down);
    - "disconnected": the client runs but has no network (`connected` down): no RPCs.

    While the host is off it is only "off": the other states are the client's own, and
    the client is not running. Changes take effect on the decision grid, when the emulator
    applies them.
    """

    start: float
    end: float
    state: str


class Figures(NamedTuple):
    """The five figures of merit of reference/client.md §5."""

    wasted_fraction: float
    idle_fraction: float
    share_violation: float
    monotony: float
    rpcs_per_job: float


class ProjectResult(NamedTuple):
    """Per-project totals: peak FLOPs used and wasted (§5), deadlines, jobs, RPCs.

    `flops_lost` is computing thrown away by preemption (work since the last checkpoint).
    """

    name: str
    resource_share: float
    flops_used: float
    flops_wasted: float
    flops_lost: float
    deadlines_met: int
    deadlines_missed: int
    jobs_completed: int
    jobs_received: int
    rpcs: int
    rpc_failures: int
    rec: float


class RecordChunk(NamedTuple):
    """The records a run produced since the previous chunk, handed out while it goes.

    `time` is the simulated time reached. `slices`, `rec`, `buffers`, `rpcs`, `decisions`
    and `host_periods` hold the records completed since the previous chunk: the chunks'
    series put end to end give the run's, with slices and host periods in the order they
    ended (RunResult sorts those two by start). `open_slices` and `open_host_periods` are
    the slices running and the host periods going on at `time`, cut at `time`; they are
    not part of the series and come again, whole, in the chunk in which they end. `last`
    is True for the chunk sent at the end of the run, after which nothing is open.
    """

    time: float
    slices: tuple[TimeSlice, ...]
    rec: tuple[RecSample, ...]
    buffers: tuple[BufferSample, ...]
    rpcs: tuple[RpcEvent, ...]
    decisions: tuple[Decision, ...]
    host_periods: tuple[HostPeriod, ...]
    open_slices: tuple[TimeSlice, ...]
    open_host_periods: tuple[HostPeriod, ...]
    last: bool

    def to_dict(self) -> dict:
        """Each series as a list of objects named by the record fields, as RunResult.to_dict()."""
        data: dict[str, Any] = {"time": self.time, "last": self.last}
        for name in CHUNK_SERIES:
            data[name] = [r._asdict() for r in getattr(self, name)]
        return data


class Discarded(list):
    """A series that a run made with `series=False` does not keep: what is appended is dropped,
    so the series stays empty (emulator.Emulator)."""

    __slots__ = ()

    def append(self, item) -> None:
        pass


CHUNK_SERIES = ("slices", "rec", "buffers", "rpcs", "decisions", "host_periods", "open_slices", "open_host_periods")


class RunResult(NamedTuple):
    """Everything a run produced, immutable. `to_dict()` gives the JSON form."""

    scenario: str
    policy: str
    seed: int
    compat: str
    duration: float
    delta: float
    cpu_seconds: float
    figures: Figures
    projects: tuple[ProjectResult, ...]
    resources: dict
    slices: tuple[TimeSlice, ...] = ()
    rec: tuple[RecSample, ...] = ()
    buffers: tuple[BufferSample, ...] = ()
    rpcs: tuple[RpcEvent, ...] = ()
    decisions: tuple[Decision, ...] = ()
    host_periods: tuple[HostPeriod, ...] = ()
    events: int = 0
    flops_total: float = 0.0

    def results_dat_line(self) -> str:
        """BOINC's results.dat line: `wf %f if %f sv %f m %f r %f` (reference/client.md §4)."""
        f = self.figures
        return (
            f"wf {f.wasted_fraction:f} if {f.idle_fraction:f} sv {f.share_violation:f} "
            f"m {f.monotony:f} r {f.rpcs_per_job:f}"
        )

    def summary(self) -> dict:
        """The `simulate --json` object of DESIGN.md without the long series."""
        return {
            "figures": self.figures._asdict(),
            "projects": [p._asdict() for p in self.projects],
            "duration": self.duration,
            "policy": self.policy,
            "seed": self.seed,
            "compat": self.compat,
            "delta": self.delta,
            "scenario": self.scenario,
            "cpu_seconds": self.cpu_seconds,
            "events": self.events,
            "resources": self.resources,
        }

    def to_dict(self) -> dict:
        """The summary plus every series, each a list of objects named by the record fields."""
        data = self.summary()
        data["slices"] = [s._asdict() for s in self.slices]
        data["rec"] = [s._asdict() for s in self.rec]
        data["buffers"] = [s._asdict() for s in self.buffers]
        data["rpcs"] = [s._asdict() for s in self.rpcs]
        data["decisions"] = [s._asdict() for s in self.decisions]
        data["host_periods"] = [s._asdict() for s in self.host_periods]
        return data
