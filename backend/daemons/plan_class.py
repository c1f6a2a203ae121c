"""Plan classes: BOINC's plan_class_spec.xml, read and checked against a host (reference/server.md
§3.4, sched/plan_class_spec.cpp PLAN_CLASS_SPEC::parse and ::check).

A project describes its app versions' needs by a plan class: the CPU features a version needs,
how many threads a multi-threaded (``mt``) version may use, which GPU it runs on with what GPU
RAM, driver, compute capability and CUDA version, how much of a GPU it takes (``ngpus``) and of a
CPU (``cpu_frac``). ``read_plan_class_spec`` reads the file into ``PlanClassSpec`` rows with
BOINC's element names and defaults; ``PlanClassSpec.check`` says whether a host can run a
version of the class and, when it can, how (``HostUsage``: the processor type, CPUs and GPUs
used, peak and projected FLOPS), as PLAN_CLASS_SPEC::check does.

Not modelled (the check refuses a class that asks for them, so nothing is sent that BOINC would
refuse): OpenCL, CAL, VirtualBox, WSL and Docker requirements, OS, CPU vendor and model
regular expressions, project-preference tags, workunit id and batch ranges. ``user_id`` and
``infeasible_random`` are honoured.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    from backend.daemons.sched_types import GpuRequest

MEGA = 1024 * 1024.0
# Our GpuType values (backend.models.GpuType) for plan_class_spec.xml's <gpu_type>.
GPU_TYPES = {"nvidia": "NVIDIA", "amd": "ATI", "ati": "ATI", "intel_gpu": "intel_gpu", "apple_gpu": "apple_gpu"}
CPU = "cpu"
NEWER_CLIENT = "A newer BOINC may be required for some tasks."


# BOINC's names of the GPU types in messages (lib/coproc.cpp proc_type_name)
GPU_NAMES = {"NVIDIA": "NVIDIA GPU", "ATI": "AMD/ATI GPU", "intel_gpu": "Intel GPU", "apple_gpu": "Apple GPU"}


def plan_class_proc_type(plan_class: str) -> str:
    """The processor type BOINC reads off a plan class's name alone ("cpu" or a GpuType
    value), as its feeder does to say which resources the project has apps for
    (sched_util_basic.cpp plan_class_to_proc_type)."""
    for word, proc_type in (
        ("cuda", "NVIDIA"),
        ("nvidia", "NVIDIA"),
        ("ati", "ATI"),
        ("amd", "ATI"),
        ("intel_gpu", "intel_gpu"),
        ("apple_gpu", "apple_gpu"),
    ):
        if word in plan_class:
            return proc_type
    return CPU


@dataclass
class GpuRequirements:
    """The lowest and highest GPU RAM and driver version asked for by the plan classes of one
    GPU type checked in a request, for the messages that tell a volunteer what their GPU lacks
    (sched_customize.h GPU_REQUIREMENTS; reference/server.md §3.4).

    ``update`` keeps BOINC's arithmetic exactly: each call passes one figure and 0 for the
    other, and a 0 counts as a figure (it lowers the minimum), so a class asking for both
    RAM and a driver leaves the lowest RAM at 0 and the order of the checks matters."""

    min_ram: float = 0.0
    opt_ram: float = 0.0
    min_driver_version: int = 0
    opt_driver_version: int = 0

    def update(self, version: int, ram: float) -> None:
        if not self.min_driver_version or version < self.min_driver_version:
            self.min_driver_version = version
        self.opt_driver_version = max(self.opt_driver_version, version)
        if not self.min_ram or ram < self.min_ram:
            self.min_ram = ram
        self.opt_ram = max(self.opt_ram, ram)

    def note(self, spec: PlanClassSpec) -> None:
        """What checking ``spec`` on a host with a GPU of its type adds: its GPU RAM, then
        (NVIDIA and AMD only) its driver version (PLAN_CLASS_SPEC::check)."""
        if spec.min_gpu_ram_mb:
            self.update(0, spec.min_gpu_ram_mb * MEGA)
        if spec.min_driver_version and spec.proc_type in ("NVIDIA", "ATI"):
            self.update(abs(spec.min_driver_version), 0)

    def messages(self, gpu_name: str, ram: float, version: int, client_version: int) -> list[tuple[str, str]]:
        """(text, priority) of what a GPU with ``ram`` bytes and driver ``version`` (0:
        unknown) lacks (sched_send.cpp send_gpu_property_messages): too little RAM (low),
        else a driver older than every class's (notice) or than some class's (low). The
        driver texts are translatable (``client_version``: major × 10000 + minor × 100 +
        release)."""
        if ram < self.min_ram:
            return [
                (
                    f"A minimum of {int(self.min_ram / MEGA)} MB (preferably {int(self.opt_ram / MEGA)} MB) "
                    f"of video RAM is needed to process tasks using your computer's {gpu_name}",
                    "low",
                )
            ]
        if version and version < self.min_driver_version:
            text = translatable(
                "Upgrade to the latest driver to process tasks using your computer's GPU", client_version
            )
            return [(f"{gpu_name}: {text}", "notice")]
        if version and version < self.opt_driver_version:
            text = translatable(
                "Upgrade to the latest driver to use all of this project's GPU applications", client_version
            )
            return [(f"{gpu_name}: {text}", "low")]
        return []


def translatable(text: str, client_version: int) -> str:
    """A message the client translates, marked as BOINC's scheduler marks it (lib/sched_msgs.h
    ``_()``); clients older than 6.12 get it unmarked (sched_types.cpp USER_MESSAGE,
    ``strip_translation``)."""
    return text if client_version < 61200 else f'_("{text}")'


class RandomSource(Protocol):
    """What ``check`` draws from: a random.Random, or the random module itself."""

    def random(self) -> float: ...


class PlanClassError(ValueError):
    """plan_class_spec.xml is not one BOINC's scheduler would read; says where."""


@dataclass
class HostUsage:
    """How a host runs a version (BOINC's HOST_USAGE): ``proc_type`` is "cpu" or a GpuType
    value; ``avg_ncpus`` the CPUs a job takes, ``gpu_usage`` the GPUs; ``peak_flops`` and
    ``projected_flops`` the speeds the scheduler starts from."""

    proc_type: str = CPU
    avg_ncpus: float = 1.0
    gpu_usage: float = 0.0
    peak_flops: float = 0.0
    projected_flops: float = 0.0
    gpu_ram: float = 0.0
    mem_usage: float = 0.0

    @classmethod
    def sequential_app(cls, flops: float) -> HostUsage:
        """One CPU, the host's speed (HOST_USAGE::sequential_app)."""
        return cls(CPU, 1.0, 0.0, flops, flops)


@dataclass
class HostView:
    """What a plan class is checked against: the request's host and the scheduler's view of it.

    ``capped_fpops`` is capped_host_fpops (the host's p_fpops within the project's
    percentiles); ``effective_ncpus`` and ``usable_ram`` are the scheduler's (WORK_REQ);
    ``coprocs`` maps a GpuType value to its ``GpuRequest``; ``core_client_version`` is
    major × 10000 + minor × 100 + release.
    """

    p_fpops: float
    capped_fpops: float
    effective_ncpus: int
    usable_ram: float | None
    p_features: str = ""
    p_model: str = ""
    core_client_version: int = 0
    user_id: int | None = None
    coprocs: dict[str, GpuRequest] = field(default_factory=dict)


# Element name -> (attribute, type); numbers in MB are kept in MB, as BOINC's names say.
FLOATS = (
    "min_ncpus",
    "mem_usage_base_mb",
    "mem_usage_per_cpu_mb",
    "projected_flops_scale",
    "avg_ncpus",
    "cpu_frac",
    "min_gpu_ram_mb",
    "gpu_ram_used_mb",
    "gpu_peak_flops_scale",
    "ngpus",
    "min_gpu_peak_flops",
    "max_gpu_peak_flops",
    "infeasible_random",
)
INTS = (
    "max_threads",
    "min_core_client_version",
    "max_core_client_version",
    "min_driver_version",
    "max_driver_version",
    "min_nvidia_compcap",
    "max_nvidia_compcap",
    "min_cuda_version",
    "max_cuda_version",
    "user_id",
)
BOOLS = ("cuda", "nthreads_cmdline")
# Elements a class may carry that this scheduler cannot honour: a class using one is never
# feasible, rather than feasible where BOINC would refuse.
UNSUPPORTED = (
    "cal",
    "opencl",
    "virtualbox",
    "wsl",
    "docker",
    "os_regex",
    "cpu_vendor_regex",
    "cpu_model_regex",
    "min_os_version",
    "max_os_version",
    "min_android_version",
    "max_android_version",
    "min_libc_version",
    "project_prefs_regex",
    "gpu_type_regex",
    "min_opencl_version",
    "need_ati_libs",
    "min_cal_target",
    "min_vbox_version",
    "min_wu_id",
    "max_wu_id",
    "min_batch",
    "max_batch",
    "gpu_utilization_tag",
)


@dataclass
class PlanClassSpec:
    """One ``<plan_class>`` with BOINC's defaults (PLAN_CLASS_SPEC::PLAN_CLASS_SPEC)."""

    name: str
    gpu_type: str = ""
    cuda: bool = False
    cpu_features: list[str] = field(default_factory=list)
    min_ncpus: float = 0.0
    max_threads: int = 1
    mem_usage_base_mb: float = 0.0
    mem_usage_per_cpu_mb: float = 0.0
    nthreads_cmdline: bool = False
    projected_flops_scale: float = 1.0
    avg_ncpus: float = 0.0
    min_core_client_version: int = 0
    max_core_client_version: int = 0
    user_id: int = 0
    infeasible_random: float = 0.0
    cpu_frac: float = 0.1
    min_gpu_ram_mb: float = 0.0
    gpu_ram_used_mb: float = 0.0
    gpu_peak_flops_scale: float = 1.0
    ngpus: float = 1.0
    min_gpu_peak_flops: float = 0.0
    max_gpu_peak_flops: float = 0.0
    min_driver_version: int = 0
    max_driver_version: int = 0
    min_nvidia_compcap: int = 0
    max_nvidia_compcap: int = 0
    min_cuda_version: int = 0
    max_cuda_version: int = 0
    unsupported: list[str] = field(default_factory=list)

    @property
    def proc_type(self) -> str:
        """The processor type the class runs on: "cpu" or a GpuType value ("" for a GPU type
        this scheduler does not know)."""
        if not self.gpu_type:
            return CPU
        return GPU_TYPES.get(self.gpu_type, "intel_gpu" if self.gpu_type.startswith("intel") else "")

    def describe(self) -> dict[str, object]:
        """The class's settings that differ from BOINC's defaults, for the project pages."""
        default = PlanClassSpec(self.name)
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "name" and getattr(self, f.name) != getattr(default, f.name)
        }

    def check(
        self,
        host: HostView,
        rng: RandomSource = random,
        notices: list[str] | None = None,
        gpu_checked: list[PlanClassSpec] | None = None,
    ) -> HostUsage | None:
        """The HostUsage of a version of this class on ``host`` (a HostView), or None when
        the host cannot run it (PLAN_CLASS_SPEC::check). A client too old for the class adds
        BOINC's message to ``notices`` (a list, when given), once; a GPU class checked on a
        host with a GPU of its type adds itself to ``gpu_checked`` (a list, when given), for
        GpuRequirements, whether the host passes its bounds or not."""
        if self.unsupported or not self.proc_type:
            return None
        if self.infeasible_random and rng.random() < self.infeasible_random:
            return None
        if self.user_id and host.user_id != self.user_id:
            return None
        if self.cpu_features and not has_cpu_features(host, self.cpu_features):
            return None
        if self.min_ncpus and host.effective_ncpus < self.min_ncpus:
            return None
        version = host.core_client_version
        if self.min_core_client_version and version < self.min_core_client_version:
            if notices is not None and NEWER_CLIENT not in notices:
                notices.append(NEWER_CLIENT)
            return None
        if self.max_core_client_version and version > self.max_core_client_version:
            return None
        if self.gpu_type:
            return self.gpu_usage(host, gpu_checked)
        return self.cpu_usage(host)

    def cpu_usage(self, host: HostView) -> HostUsage | None:
        """The CPU case: ``avg_ncpus`` if given, else up to ``max_threads`` CPUs (fewer when
        ``mem_usage_per_cpu_mb`` leaves too little RAM), at the capped host speed times
        ``projected_flops_scale``."""
        usage = HostUsage.sequential_app(host.p_fpops)
        if self.avg_ncpus:
            usage.avg_ncpus = self.avg_ncpus
        else:
            usage.avg_ncpus = min(self.max_threads, host.effective_ncpus)
            if self.mem_usage_per_cpu_mb:
                base, per_cpu = self.mem_usage_base_mb * MEGA, self.mem_usage_per_cpu_mb * MEGA
                ram = host.usable_ram if host.usable_ram is not None else math.inf
                if base + (self.min_ncpus or 1) * per_cpu > ram:
                    return None
                if ram != math.inf:
                    usage.avg_ncpus = min(usage.avg_ncpus, int((ram - base) / per_cpu))
                usage.mem_usage = base + usage.avg_ncpus * per_cpu
        usage.peak_flops = host.capped_fpops * usage.avg_ncpus
        usage.projected_flops = usage.peak_flops * self.projected_flops_scale
        return usage

    def gpu_usage(self, host: HostView, gpu_checked: list[PlanClassSpec] | None = None) -> HostUsage | None:
        """The GPU case: the host has a GPU of the class's type meeting its bounds; the job
        takes ``ngpus`` of it (a negative ``ngpus`` fills the GPU's RAM) and ``cpu_frac`` of
        its work runs on the CPU (coproc_perf)."""
        gpu = host.coprocs.get(self.proc_type)
        if gpu is None or gpu.count <= 0:
            return None
        if gpu_checked is not None:
            gpu_checked.append(self)  # BOINC notes the requirements before checking them
        if self.proc_type == "NVIDIA":
            compcap = gpu.compute_capability
            if self.min_nvidia_compcap and self.min_nvidia_compcap > compcap:
                return None
            if self.max_nvidia_compcap and self.max_nvidia_compcap < compcap:
                return None
            if self.cuda and self.min_cuda_version and self.min_cuda_version > gpu.cuda_version:
                return None
            if self.cuda and self.max_cuda_version and self.max_cuda_version < gpu.cuda_version:
                return None
        gpu_ram = gpu.gpu_ram
        if self.min_gpu_ram_mb and self.min_gpu_ram_mb * MEGA > gpu_ram:
            return None
        driver = gpu.driver_version if self.proc_type in ("NVIDIA", "ATI") else 0
        if self.min_driver_version and driver and self.min_driver_version > driver:
            return None
        if self.max_driver_version and driver and self.max_driver_version < driver:
            return None
        usage = HostUsage.sequential_app(host.p_fpops)
        usage.gpu_ram = (self.gpu_ram_used_mb or self.min_gpu_ram_mb) * MEGA
        if self.ngpus < 0:
            share = math.floor(gpu_ram / usage.gpu_ram) * usage.gpu_ram / gpu_ram if usage.gpu_ram and gpu_ram else 1.0
        else:
            share = self.ngpus or 1.0
        if gpu.peak_flops == 0:
            usage.avg_ncpus = self.cpu_frac
        else:
            if self.min_gpu_peak_flops and gpu.peak_flops < self.min_gpu_peak_flops:
                return None
            if self.max_gpu_peak_flops and gpu.peak_flops > self.max_gpu_peak_flops:
                return None
            gpu_flops = self.gpu_peak_flops_scale * share * gpu.peak_flops
            usage.projected_flops, usage.avg_ncpus = coproc_perf(host.capped_fpops, gpu_flops, self.cpu_frac)
            usage.projected_flops *= self.projected_flops_scale
            if self.avg_ncpus:
                usage.avg_ncpus = self.avg_ncpus
            usage.peak_flops = gpu_flops + usage.avg_ncpus * host.capped_fpops
        usage.proc_type = self.proc_type
        usage.gpu_usage = share
        return usage


def coproc_perf(cpu_flops: float, gpu_flops: float, cpu_frac: float) -> tuple[float, float]:
    """(speed, CPU use) of a job whose ``cpu_frac`` of the work runs on the CPU and the rest on
    the GPU, the two taking turns (sched_customize.h coproc_perf)."""
    y = cpu_frac * gpu_flops + (1 - cpu_frac) * cpu_flops
    return cpu_flops * gpu_flops / y, cpu_frac * gpu_flops / y


def has_cpu_features(host: HostView, wanted: Iterable[str]) -> bool:
    """Whether every feature in ``wanted`` is among the host's ``p_features`` (or, for old
    clients, the bracketed list at the end of ``p_model``), case-insensitively, as whole
    words."""
    words = " " + host.p_features + " "
    if "[" in host.p_model:
        words += " " + host.p_model.rsplit("[", 1)[1].split("]", 1)[0] + " "
    words = words.lower()
    return all(f" {feature} " in words for feature in wanted)


def read_plan_class_spec(source: Path | str) -> dict[str, PlanClassSpec]:
    """``{name: PlanClassSpec}`` from plan_class_spec.xml (a path, or the text itself).

    Raises PlanClassError naming the element that BOINC's parser would refuse."""
    text = Path(source).read_text() if isinstance(source, Path) else source
    try:
        root = ElementTree.fromstring(text)
    except (ElementTree.ParseError, DefusedXmlException) as error:
        raise PlanClassError(f"plan_class_spec.xml is not well-formed XML: {error}") from None
    if root.tag != "plan_classes":
        raise PlanClassError(f"plan_class_spec.xml: expected <plan_classes>, found <{root.tag}>")
    specs: dict[str, PlanClassSpec] = {}
    for element in root.findall("plan_class"):
        spec = parse_plan_class(element)
        specs.setdefault(spec.name, spec)  # PLAN_CLASS_SPECS::check takes the first
    return specs


def parse_plan_class(element: Element) -> PlanClassSpec:
    """One ``<plan_class>`` element (PLAN_CLASS_SPEC::parse)."""
    name = (element.findtext("name") or "").strip()
    if not name:
        raise PlanClassError("plan_class_spec.xml: a <plan_class> has no <name>")
    spec = PlanClassSpec(name)
    for child in element:
        tag, value = child.tag, (child.text or "").strip()
        try:
            if tag == "gpu_type":
                spec.gpu_type = value.lower()
            elif tag == "cpu_feature":
                spec.cpu_features.append(value.lower())
            elif tag in FLOATS:
                setattr(spec, tag, float(value))
            elif tag in INTS:
                setattr(spec, tag, int(float(value)))
            elif tag in BOOLS:
                setattr(spec, tag, value in ("", "1"))
            elif tag in UNSUPPORTED:
                spec.unsupported.append(tag)
        except ValueError:
            raise PlanClassError(f"plan class {name}: <{tag}> must be a number, not {value!r}") from None
    return spec
