"""The project's apps and feeder versions as one scheduler request sees them
(reference/server.md §3.4; sched/sched_shmem.cpp).

BOINC's scheduler never reads its apps or app versions from the database: the feeder keeps
them in shared memory, and every request reads that copy. Here a request reads the tables,
once each: inside ``for_request()`` (handle_request opens it around each RPC) the first
``apps()`` reads every app and keeps them, and ``feeder_versions`` keeps what it read for
each set of platforms. Outside it each call reads the database afresh, so a daemon or a test
calling the scheduler's steps directly sees the rows as they are.

A request changes no app or app version row, so what it keeps stays true to its end; the
next request reads again, and sees what a daemon (the validator's PFC averages) or an admin
changed meanwhile. Those reads run on every request, so they go through
``claim.read_rows``, which writes each one's SQL once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from backend.daemons.claim import read_rows
from backend.models import App

T = TypeVar("T")

# what the current request has read, by key; None outside a request
_kept: ContextVar[dict[Hashable, object] | None] = ContextVar("sched_shmem_kept", default=None)
# the id of the project the current request is to (BOINC's shared memory is one project's)
_project: ContextVar[int | None] = ContextVar("sched_shmem_project", default=None)


@contextmanager
def for_request(project_id: int | None = None) -> Iterator[None]:
    """Keep the rows read through this module until the block ends (one request to project
    ``project_id``, whose apps alone it reads)."""
    token, project_token = _kept.set({}), _project.set(project_id)
    try:
        yield
    finally:
        _kept.reset(token)
        _project.reset(project_token)


def project_id() -> int | None:
    """The id of the project the current request is to; None outside a request."""
    return _project.get()


def kept(key: Hashable, read: Callable[[], T]) -> T:
    """``read()``, once per request for each ``key``; every time outside a request."""
    store = _kept.get()
    if store is None:
        return read()
    if key not in store:
        store[key] = read()
    return store[key]  # type: ignore[return-value]  # stored by this function under this key


def apps() -> dict[int, App]:
    """Every app of the project, deprecated or not, by id, in id order."""
    pid = project_id()
    if pid is None:
        return kept("apps", lambda: {app.pk: app for app in read_rows(App)})
    return kept("apps", lambda: {app.pk: app for app in read_rows(App, "t.project_id = %s", [pid])})
