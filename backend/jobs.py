"""RQ jobs of the back end: importable functions taking plain values."""

from backend.daemons import run_pass


def run_daemon_pass(
    name: str, now: int | None = None, batch_size: int | None = None, mod: int = 1, index: int = 0
) -> int:
    """One pass of daemon ``name``; the work done is the job's result."""
    return run_pass(name, now=now, batch_size=batch_size, mod=mod, index=index)


def run_all_daemons(now: int | None = None) -> dict[str, int]:
    """One pass of every enabled daemon in order (the periodic job of ``make run``), then a
    sample of the queues for the status page's history."""
    import time

    from backend.daemons import daemon_names
    from backend.server_status import record_history

    done = {name: run_pass(name, now=now) for name in daemon_names()}
    record_history(int(time.time()) if now is None else now)
    return done
