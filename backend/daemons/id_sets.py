"""A pass's set of ids as one query parameter, for the filters of its reads and writes.

Django spells ``id__in=[...]`` as ``IN (%s, %s, ...)``: for a pass's thousand rows that is a
thousand parameters which Django compiles and the database driver finds in the statement's
text one by one, a large part of such a statement's time. On PostgreSQL ``ids_in`` gives the
ids as one array, ``column = ANY(%s)``, which the planner reads as it reads the list: an index
scan of the ids (written ``IN (SELECT unnest(...))`` instead, it may scan the table for the
other conditions first, as it did for the file deleter's ``file_delete_state = READY``);
elsewhere the ``__in`` lookup itself.
"""

from collections.abc import Iterable
from typing import Any, cast

from django.db import connection
from django.db.models import BooleanField, Field, Model, Q
from django.db.models.expressions import RawSQL


def ids_in(model: type[Model], field: str, ids: Iterable[int]) -> Any:
    """A filter of ``model``'s rows whose ``field`` (the id or a foreign key) is in ``ids``,
    for ``filter()`` and ``exclude()`` (see above)."""
    ids = list(ids)
    if connection.vendor != "postgresql":
        return Q(**{f"{field}__in": ids})
    q = connection.ops.quote_name
    # ``field`` names a column (the id or a foreign key), never a reverse relation
    column = cast("Field[Any, Any]", model._meta.get_field(field)).column
    return RawSQL(f"{q(model._meta.db_table)}.{q(column)} = ANY(%s::bigint[])", (ids,), output_field=BooleanField())
