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
    "cpu_app",
    "job",
    "project",
    "scenario",
]
