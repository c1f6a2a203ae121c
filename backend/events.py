"""Writing lifecycle events: one row per state change of a workunit, a result or a host.

Daemons make thousands of events per pass, so an event is a plain record, not a model
instance, and ``record`` writes a batch with one COPY on PostgreSQL, multi-row INSERTs of bare
values elsewhere.
"""

from collections.abc import Iterable
from typing import NamedTuple

from django.db import connection

from backend.models import LifecycleEvent


class Event(NamedTuple):
    """An unsaved LifecycleEvent, with the model's attribute names."""

    time: int
    actor: str
    workunit_id: int | None
    result_id: int | None
    host_id: int | None
    field: str
    old: int | None
    new: int | None
    reason: str
    detail: str


# the columns ``record`` writes: the project, then an Event's fields in order
COLUMNS = ("project_id", *Event._fields)


def event(
    *,
    time: float,
    actor: str,
    field: str,
    old: int | None,
    new: int | None,
    reason: str = "",
    workunit_id: int | None = None,
    result_id: int | None = None,
    host_id: int | None = None,
    detail: str = "",
) -> Event:
    """An unsaved event; daemons collect these and save them with ``record``."""
    return Event(
        int(time),
        actor[:32],
        workunit_id,
        result_id,
        host_id,
        field,
        None if old is None else int(old),
        None if new is None else int(new),
        reason[:254],
        detail[:254],
    )


def record(events: Iterable[Event | LifecycleEvent], project_id: int) -> int:
    """Save a batch of events (``Event``s or unsaved LifecycleEvents) of project ``project_id``
    in a few INSERTs."""
    rows = [
        (project_id, *e) if isinstance(e, Event) else (project_id, *(getattr(e, name) for name in COLUMNS[1:]))
        for e in events
    ]
    if not rows:
        return 0
    table = connection.ops.quote_name(LifecycleEvent._meta.db_table)
    columns = ", ".join(
        # every name in COLUMNS is a concrete field, with a column
        connection.ops.quote_name(LifecycleEvent._meta.get_field(name.removesuffix("_id")).column)  # type: ignore[union-attr, arg-type]
        for name in COLUMNS
    )
    chunk = 1000
    placeholder = "(" + ", ".join(["%s"] * len(COLUMNS)) + ")"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and hasattr(cursor.cursor, "copy"):
            # PostgreSQL's COPY streams the rows without building statements.
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return len(rows)
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([placeholder] * len(part)),
                [value for row in part for value in row],
            )
    return len(rows)
