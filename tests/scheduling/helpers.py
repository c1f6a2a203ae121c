"""Small scenarios built in code for the engine tests."""

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
)

HOUR = 3600.0
GFLOPS = 1e9


def cpu_app(name="a", hours=1.0, latency=10 * 86400.0, **kw):
    return App(
        name=name,
        versions=(AppVersion(avg_ncpus=1.0, flops=GFLOPS),),
        latency_bound=latency,
        fpops_est=hours * HOUR * GFLOPS,
        **kw,
    )


def job(name, app="a", hours=1.0, deadline=10 * 86400.0):
    size = hours * HOUR * GFLOPS
    return InitialJob(name=name, app=app, fpops=size, fpops_est=size, deadline=deadline)


def project(name, jobs=(), share=100.0, apps=None, **kw):
    return Project(name=name, resource_share=share, apps=apps or (cpu_app(),), jobs=tuple(jobs), **kw)


def gpu_app(name="g", ncpus=0.5, **kw):
    """An NVIDIA app of one version: a whole GPU and `ncpus` CPUs per job, 1-hour estimates."""
    version = AppVersion(avg_ncpus=ncpus, flops=GFLOPS, gpu_type="NVIDIA", gpu_usage=1.0, plan_class="cuda")
    return App(name=name, versions=(version,), latency_bound=10 * 86400.0, fpops_est=HOUR * GFLOPS, **kw)


def scenario(*projects, ncpus=1, gpus=(), prefs=None, host=None):
    return Scenario(
        host=host or Host(ncpus=ncpus, cpu_flops=GFLOPS, gpus=tuple(gpus)),
        projects=tuple(projects),
        prefs=prefs or Prefs(),
        name="test",
    )


__all__ = [
    "App",
    "AppVersion",
    "Availability",
    "GpuType",
    "Host",
    "InitialJob",
    "Prefs",
    "Project",
    "Scenario",
    "HOUR",
    "GFLOPS",
    "boinc7_emulator",
    "cpu_app",
    "gpu_app",
    "job",
    "project",
    "scenario",
]


def boinc7_emulator(s, compat="intended", *, duration=60, seed=1, existing_jobs_only=False):
    """An emulator of `s` under boinc7 with BCE's 60 s step."""
    from scheduling.engine import get_policy
    from scheduling.engine.emulator import Emulator

    return Emulator(
        s,
        get_policy("boinc7"),
        duration=duration,
        delta=60,
        seed=seed,
        compat=compat,
        existing_jobs_only=existing_jobs_only,
        policy_name="boinc7",
    )
