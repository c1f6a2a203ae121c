"""Engine hosts: volunteer computers of a world driven by the client engine.

A world's simple hosts (world.simulation.SimHost) run one job per instance in arrival order and
ask to fill their buffers. An engine host is a run of the client engine (scheduling/engine)
on a host description, a lab preset or a client_state.xml, with the world's project attached
to it: the engine decides what runs (its policy, boinc7 or boinc5), when to ask which project
for how much work, when to report and how to back off (reference/client.md §3, §6), and its
RPCs to the world's project go to the back end's real scheduler
(``backend.daemons.scheduler.handle_request``, reference/server.md §3.4–§3.6) through
``WorldServer``, an implementation of the engine's server interface
(scheduling/engine/server.py). Its other projects, if its description has any, keep the
engine's emulated server. So the RPC load on the server comes out of the client's policy.

The engine stays free of Django: this module is the adapter. It turns the engine's RPC
(requested seconds and instances per resource, the finished jobs reported, the jobs in
progress, the sticky files, the host's figures) into a ``SchedulerRequest`` and the reply
(jobs with their app versions, sizes and deadlines, ``request_delay``, messages, aborts,
files to delete) into engine jobs.

Engine hosts are there from the start to the end: churn (hosts joining late and leaving for
good) is the simple hosts'. Their on and off periods, computing suspensions and GPU suspensions
are their engine's, drawn from their description (reference/client.md §2). Of the preferences
a volunteer edits in the prefs form they take up the work buffer (``Emulator.change_buffer``);
their CPU limits stay their description's.

Times: the engine's seconds from the start of its run are the world's simulated seconds; the
back end sees ``start_time`` plus them. A job's real size is the server's estimate
(``rsc_fpops_est``) scaled by how far the speed the server told (the app version's flops)
is from the host's true speed (its benchmark on CPUs, its peak on GPUs), since the engine
computes a job at the told speed.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from backend.daemons.sched_types import (
    GpuRequest,
    HostInfo,
    ReportedFile,
    ReportedResult,
    SchedulerRequest,
    StickyFile,
    TimeStats,
)
from backend.models import ClientState, GpuType
from scheduling import engine
from scheduling.engine.scenario import App, AppVersion, Availability, Host, Prefs, Project, Scenario
from scheduling.engine.scenario import GpuType as EngineGpu
from scheduling.engine.server import ServerReply
from scheduling.engine.state import FINISHED, JobState, ProjectState
from scheduling.presets import BY_SLUG

if TYPE_CHECKING:
    from scheduling.engine.emulator import Emulator
    from world.simulation import Simulation

# The policies an engine host may run: the client's current one and the debt-era one.
ENGINE_POLICIES = ("boinc7", "boinc5")
# The engine's decision step, as in the lab (seconds).
ENGINE_DELTA = 60.0
# Engine GPU names (scenario GpuType names, readers._COPROC_TAGS) -> the back end's GpuType.
GPU_TYPES = {"nvidia": GpuType.NVIDIA, "ati": GpuType.ATI, "amd": GpuType.ATI, "intel_gpu": GpuType.INTEL}
GPU_TYPES.update({"intel": GpuType.INTEL, "apple_gpu": GpuType.APPLE})


@dataclass(frozen=True)
class EngineClass:
    """One class of a world's engine hosts (``WorldSettings.engine_hosts``).

    ``count`` hosts run ``policy``. Their host is ``preset`` (a lab preset's slug: its host,
    preferences and projects), or ``client_state`` (a path to a client_state.xml, or a
    directory holding one, with global_prefs.xml beside it), or ``scenario`` (a scenario in
    the engine's JSON form, readers.scenario_to_dict: a lab scenario attached to the world,
    named ``scenario_name``), or, with none, one drawn as the world draws a simple host.
    ``other_projects`` keeps the description's own projects, served by the engine's emulated
    server, beside the world's; ``resource_share`` is the world project's share on these hosts.
    """

    count: int
    policy: str = "boinc7"
    preset: str = ""
    client_state: str = ""
    other_projects: bool = True
    resource_share: float = 100.0
    scenario: dict[str, Any] | None = None
    scenario_name: str = ""

    @classmethod
    def from_dict(cls, values: object) -> Self:
        if not isinstance(values, dict):
            raise ValueError(f"an engine host class is a mapping of its settings, not {values!r}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown engine host setting(s): {', '.join(unknown)}")
        if "count" not in values:
            raise ValueError("an engine host class needs a count")
        made = cls(**values)
        made.check()
        return made

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"an engine host class's count must be a whole number, 1 or more, not {self.count!r}")
        if self.policy not in ENGINE_POLICIES:
            raise ValueError(f"engine hosts run one of {', '.join(ENGINE_POLICIES)}, not {self.policy!r}")
        if sum(bool(x) for x in (self.preset, self.client_state, self.scenario)) > 1:
            raise ValueError("an engine host class takes one of a preset, a client_state and a scenario")
        if self.scenario is not None:
            if not isinstance(self.scenario, dict):
                raise ValueError("an engine host class's scenario is the engine's JSON form of one, a mapping")
            try:
                engine.read_json(json.dumps(self.scenario))
            except engine.ScenarioError as exc:
                raise ValueError(f"the engine host class's scenario: {exc}") from None
        if self.preset and self.preset not in BY_SLUG:
            raise ValueError(f"no lab preset {self.preset!r}; the presets are {', '.join(sorted(BY_SLUG))}")
        if self.client_state and not Path(self.client_state).exists():
            raise ValueError(f"no client_state.xml at {self.client_state!r}")
        if not (isinstance(self.resource_share, (int, float)) and 0 < self.resource_share < math.inf):
            raise ValueError(f"resource_share must be a positive number, not {self.resource_share!r}")

    def description(self) -> Scenario | None:
        """The host description of the class (None: drawn per host by the world)."""
        if self.preset:
            return BY_SLUG[self.preset].scenario()
        if self.client_state:
            return engine.load_scenario(self.client_state)
        if self.scenario:
            return replace(engine.read_json(json.dumps(self.scenario)), name=self.scenario_name or "a lab scenario")
        return None


@dataclass
class EngineJob:
    """What the world knows of a job it sent an engine host: its workunit, its output file and
    the fate drawn for it (ok, error, wrong, lost), as a simple host's Job."""

    wu_name: str
    output_name: str
    fate: str


@dataclass
class EngineHost:
    """One engine host of a world: its Host row, its engine run and its files."""

    index: int  # in the world's host numbering, after the simple hosts
    host_id: int
    user_id: int
    name: str
    policy: str
    project: str  # the world project's name in the engine
    em: Emulator
    error_rate: float = 0.0
    wrong_rate: float = 0.0
    no_reply_rate: float = 0.0
    rpc_seqno: int = 0
    files: dict[str, int] = field(default_factory=dict)  # sticky files held: name -> bytes
    jobs: dict[str, EngineJob] = field(default_factory=dict)  # the world's jobs it holds, by result name
    aborted: list[str] = field(default_factory=list)  # aborted jobs not yet reported
    rng: random.Random = field(default_factory=random.Random)  # its jobs' fates
    next_at: float = 0.0  # when the world next advances it (its entry on the world's heap)
    prefs_mod_time: int = 0  # the Host row's prefs last taken up

    @property
    def scenario(self) -> Scenario:
        return self.em.scenario

    def world_project(self) -> ProjectState:
        return next(p for p in self.em.projects if p.name == self.project)

    @property
    def active(self) -> bool:
        """Whether the host is on (BOINC running) now."""
        return bool(self.em.on)

    def peak_flops(self) -> float:
        """The host's peak FLOPS on its CPUs and GPUs (to size the world's workload)."""
        host = self.scenario.host
        return host.ncpus * host.cpu_flops + sum(g.count * g.peak_flops for g in host.gpus)


def world_app(settings: Any, app_name: str, host: Host) -> App:
    """The world's app as the engine knows it on `host`: a CPU version at the host's speed and,
    on a host with an NVIDIA GPU, the GPU version (the world's "cuda" version: a tenth of a CPU
    and one GPU), with the world's deadline and job size. The server's replies bring the
    versions its jobs really use (``WorldServer.job``)."""
    versions = [AppVersion(avg_ncpus=1.0, flops=host.cpu_flops)]
    for g in host.gpus:
        if GPU_TYPES.get(g.name.lower()) == GpuType.NVIDIA:
            versions.append(
                AppVersion(avg_ncpus=0.1, flops=g.peak_flops, gpu_type=g.name, gpu_usage=1.0, plan_class="cuda")
            )
            break
    return App(
        app_name,
        tuple(versions),
        latency_bound=float(settings.delay_bound),
        fpops_est=settings.job_gflop * 1e9,
    )


def engine_scenario(
    settings: Any, eclass: EngineClass, project: str, app_name: str, drawn: Host, name: str
) -> Scenario:
    """The engine host's scenario: its description (or the drawn host, with the world's buffer
    preferences) with the world's project attached."""
    described = eclass.description()
    attached = Project(
        project,
        resource_share=eclass.resource_share,
        apps=(world_app(settings, app_name, drawn if described is None else described.host),),
    )
    if described is None:
        return Scenario(
            host=drawn,
            projects=(attached,),
            prefs=Prefs(
                work_buf_min_days=settings.work_buf_min_days,
                work_buf_additional_days=settings.work_buf_additional_days,
            ),
            name=name,
            description=f"a drawn host attached to {project}",
        )
    others = tuple(p for p in described.projects if p.name != project) if eclass.other_projects else ()
    return Scenario(
        host=described.host,
        projects=(*others, attached),
        prefs=described.prefs,
        name=name,
        description=f"{described.name}, attached to {project}",
    )


def drawn_host(ncpus: int, fpops: float, gpu_peak: float, on_frac: float, mean_on_period: float) -> Host:
    """A host drawn as the world draws a simple one (its CPUs, speed, GPU and on-fraction)."""
    gpus = (EngineGpu("NVIDIA", 1, gpu_peak),) if gpu_peak > 0 else ()
    return Host(ncpus=ncpus, cpu_flops=fpops, gpus=gpus, on=Availability(frac=on_frac, mean_up=mean_on_period))


class WorldServer:
    """The world project's scheduler as an engine host's server (scheduling/engine/server.py):
    each RPC is a request to the back end's scheduler. ``world`` is set by the world before it
    advances the host, and is not kept when the world's state is stored."""

    def __init__(self, host: EngineHost | None = None) -> None:
        self.host = host
        self.world: Simulation | None = None
        # engine app versions made from replies, by (app, resource, avg_ncpus, flops, gpu_usage, plan class)
        self.versions: dict[tuple[Any, ...], AppVersion] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["world"] = None
        return state

    def rpc(self, em: Emulator, p: ProjectState, requests: dict, reported: list[JobState]) -> ServerReply | None:
        world, host = self.world, self.host
        assert world is not None and host is not None, "the world sets itself before it advances its hosts"
        request = self.request(em, host, p, requests, reported)
        asked = request.cpu_req_secs > 0 or any(g.req_secs > 0 for g in request.gpu_requests)
        reply = world.call_scheduler(host.index, host.rpc_seqno, request, asked=asked)
        if reply is None:
            return None
        acked = set(reply.result_acks)
        world.counters.jobs_reported += len(acked)
        host.aborted = [name for name in host.aborted if name not in acked]
        for j in reported:
            host.jobs.pop(j.name, None)
        for name in reply.delete_file_infos:
            host.files.pop(name, None)
        by_name = {j.name: j for j in p.jobs}
        for name in reply.result_aborts + reply.result_abort_if_not_started:
            job = by_name.get(name)
            if job is None or job.state == FINISHED or (name not in reply.result_aborts and job.started):
                continue
            em.abort(job, "the project no longer needs it")
            host.jobs.pop(name, None)
            host.aborted.append(name)
        jobs = [self.job(em, host, p, result, world) for result in reply.results]
        return ServerReply(jobs, reply.request_delay, [m.text for m in reply.messages])

    def request(
        self, em: Emulator, host: EngineHost, p: ProjectState, requests: dict, reported: list[JobState]
    ) -> SchedulerRequest:
        """The engine's RPC as the client's request (reference/protocol.md §4.2)."""
        world = self.world
        assert world is not None
        scenario = em.scenario
        rr = em.rr()
        cpu_secs, cpu_inst = requests.get(0, (0.0, 0.0))
        gpus = []
        for r, res in enumerate(em.resources):
            if r == 0:
                continue
            secs, inst = requests.get(r, (0.0, 0.0))
            gpu = scenario.host.gpus[r - 1]
            gpu_type = GPU_TYPES.get(res.name.lower())
            if gpu_type is None:
                continue  # a GPU the back end has no type for asks for nothing there
            gpus.append(GpuRequest(gpu_type, res.ninstances, gpu.peak_flops, secs, inst, rr.rsc[r].busy_time))
        host.rpc_seqno += 1
        stats = scenario.host
        return SchedulerRequest(
            hostid=host.host_id,
            userid=host.user_id,
            rpc_seqno=host.rpc_seqno,
            platform_name=world.platform,
            host_info=HostInfo(domain_name=host.name, p_ncpus=stats.ncpus, p_fpops=stats.cpu_flops, os_name="Linux"),
            time_stats=TimeStats(
                on_frac=stats.on.frac,
                connected_frac=stats.connected.frac,
                active_frac=stats.active.frac,
                gpu_active_frac=stats.gpu_active.frac,
            ),
            # the client's work_req_seconds is its CPU request (work_fetch.cpp)
            work_req_seconds=cpu_secs,
            cpu_req_secs=cpu_secs,
            cpu_req_instances=cpu_inst,
            estimated_delay=rr.rsc[0].busy_time,
            gpu_requests=gpus,
            results=[r for r in (self.report(host, j, world) for j in reported) if r is not None]
            + [ReportedResult(name, client_state=ClientState.ABORTED, exit_status=-221) for name in host.aborted],
            file_infos=[StickyFile(name, nbytes) for name, nbytes in sorted(host.files.items())],
            other_results=[j.name for j in p.jobs],
        )

    def report(self, host: EngineHost, j: JobState, world: Simulation) -> ReportedResult | None:
        """A finished job as the client reports it; None for one the host lost (no reply)."""
        known = host.jobs.get(j.name)
        if known is None:
            return None
        if known.fate == "lost":
            world.counters.jobs_lost += 1
            return None
        if known.fate == "error":
            return ReportedResult(
                j.name,
                client_state=ClientState.COMPUTE_ERROR,
                exit_status=1,
                final_elapsed_time=j.elapsed,
                final_cpu_time=j.elapsed,
                stderr_out="simulated crash",
            )
        data = world.output_bytes(host.index, known.wu_name, j.name, known.fate)
        return ReportedResult(
            j.name,
            final_elapsed_time=j.elapsed,
            final_cpu_time=j.elapsed,
            output_files=[ReportedFile(known.output_name, data=data)],
        )

    def job(self, em: Emulator, host: EngineHost, p: ProjectState, result: Any, world: Simulation) -> JobState:
        """A job of the reply made in the engine: its app and version as the server sent them,
        its deadline, and a real size for the host's true speed."""
        world.download(host.files, result)
        fate = world.draw_fate(host.rng, host.no_reply_rate, host.error_rate, host.wrong_rate)
        host.jobs[result.name] = EngineJob(result.wu_name, result.output_files[0].name, fate)
        world.counters.jobs_received += 1
        app = p.spec.app(result.workunit.app_name) or p.spec.apps[0]
        sent = result.app_version
        gpu = "" if result.resource == "cpu" else result.resource
        rsc = next((r.name for r in em.resources if GPU_TYPES.get(r.name.lower()) == gpu), None) if gpu else None
        key = (app.name, rsc, sent.avg_ncpus, sent.flops, sent.gpu_usage, sent.plan_class)
        version = self.versions.get(key)
        if version is None:
            version = self.versions[key] = AppVersion(
                avg_ncpus=max(sent.avg_ncpus, 0.0) if rsc else max(sent.avg_ncpus, 1e-3),
                flops=sent.flops if sent.flops > 0 else em.cpu_flops,
                gpu_type=rsc,
                gpu_usage=sent.gpu_usage if rsc else 0.0,
                plan_class=sent.plan_class,
            )
        host_spec = em.scenario.host
        if rsc:
            true_flops = next(g.peak_flops for g in host_spec.gpus if g.name == rsc) * max(version.gpu_usage, 1e-9)
        else:
            true_flops = host_spec.cpu_flops * max(version.avg_ncpus, 1.0)
        est = result.workunit.rsc_fpops_est
        size = est * version.flops / true_flops
        deadline = float(result.report_deadline - world.settings.start_time)
        return em.new_job(p, app, version, size, est, em.now, deadline, name=result.name)


def engine_figures(hosts: list[EngineHost]) -> dict[str, Any]:
    """What a world's engine hosts did, for its summary: per side (the world's project, and
    their other projects together) the scheduler RPCs, the failed ones, the jobs received, the
    deadlines met and missed, and the work done (TFLOP); {} without engine hosts."""
    if not hosts:
        return {}
    keys = ("rpcs", "rpc_failures", "jobs_received", "deadlines_met", "deadlines_missed")
    sides: dict[str, dict[str, float]] = {side: dict.fromkeys((*keys, "tflop_used"), 0) for side in ("world", "others")}
    for host in hosts:
        for p in host.em.projects:
            side = sides["world" if p.name == host.project else "others"]
            for key in keys:
                side[key] += getattr(p, key)
            side["tflop_used"] += p.flops_used / 1e12
    for side in sides.values():
        side["tflop_used"] = round(side["tflop_used"], 3)
    return {"hosts": len(hosts), **sides}
