"""A pass's set of ids as one query parameter, for the ``__in`` lookups of its reads and writes.

Django spells ``id__in=[...]`` as ``IN (%s, %s, ...)``: for a pass's thousand rows that is a
thousand parameters which Django compiles and the database driver finds in the statement's
text one by one, a large part of such a statement's time. On PostgreSQL ``id_set`` gives the
ids as one array, ``IN (SELECT unnest(%s))``, which the planner joins to the table's index as
it does the list; elsewhere the list itself.
"""

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models.expressions import RawSQL


def id_set(ids: Iterable[int]) -> Any:
    """``ids`` as the right-hand side of an ``__in`` lookup (see above)."""
    ids = list(ids)
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", (ids,))
    return ids
