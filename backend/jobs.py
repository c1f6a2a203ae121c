"""RQ jobs of the back end: importable functions taking plain values."""

from backend.daemons import run_pass
from backend.models import Project


def run_daemon_pass(
    name: str,
    *,
    project: str,
    now: int | None = None,
    batch_size: int | None = None,
    mod: int = 1,
    index: int = 0,
) -> int:
    """One pass of daemon ``name`` over the project with slug ``project`` (the demo's made on
    first use, as the periodic job makes it); the work done is the job's result."""
    the_project = Project.demo() if project == Project.DEMO_SLUG else Project.objects.get(slug=project)
    return run_pass(name, project=the_project, now=now, batch_size=batch_size, mod=mod, index=index)


def run_all_daemons(now: int | None = None) -> dict[str, dict[str, int]]:
    """One pass of every enabled daemon in order over each live project (the periodic job of
    ``make run``), each at its own clock, then a sample of its queues for its status page's
    history. A world's project is left to its world, which runs its passes at the world's
    clock. Returns the work done by project slug and daemon."""
    from backend.daemons import daemon_names
    from backend.server_status import record_history

    Project.demo()  # the demo project exists from the first pass on
    done: dict[str, dict[str, int]] = {}
    for project in Project.objects.filter(kind=Project.Kind.LIVE).order_by("id"):
        at = project.now() if now is None else now
        done[project.slug] = {name: run_pass(name, project=project, now=at) for name in daemon_names()}
        record_history(at, project)
    return done
