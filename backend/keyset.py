"""Keyset pagination: pages by the last row's sort key instead of OFFSET, so page 20,000 of a
million workunits costs what page 1 does, and no page needs a COUNT(*) of the table.

A cursor is the sort key of a row on the edge of a page, (value, id), encoded for a URL.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db.models import F, Field, ForeignObjectRel, Q, QuerySet
from django.db.models.fields.tuple_lookups import TupleGreaterThan, TupleLessThan

if TYPE_CHECKING:
    from django.contrib.contenttypes.fields import GenericForeignKey


class BadCursor(ValueError):
    pass


def encode_cursor(value: int | str, pk: int) -> str:
    raw = json.dumps([value, pk], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(
    text: str, field: Field[Any, Any] | ForeignObjectRel | GenericForeignKey | None = None
) -> tuple[Any, int]:
    """(value, id) from a cursor; BadCursor when it was not made by encode_cursor or, given
    the model ``field`` pages are sorted by, when its value is not one of that field."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        value, pk = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise BadCursor(f"{text!r} is not a page cursor") from None
    if (
        not isinstance(pk, int)
        or isinstance(pk, bool)
        or not 0 < pk < 2**63
        or not isinstance(value, (int, str))
        or "\x00" in str(value)
    ):
        raise BadCursor(f"{text!r} is not a page cursor")
    if field is not None:
        assert isinstance(field, Field)  # pages sort by a column: Options.get_field's other kinds have none
        try:
            value = field.to_python(value)
            field.run_validators(value)
        except ValidationError:
            raise BadCursor(f"{text!r} is not a page cursor of the sort by {field.name}") from None
    return value, pk


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    next_cursor: str  # "" when this is the last page
    prev_cursor: str  # "" when this is the first page


def keyset_page(
    queryset: QuerySet[Any], field: str, descending: bool, *, after: str = "", before: str = "", size: int = 50
) -> Page:
    """One page of ``queryset`` ordered by ``field``, the page after ``after`` or before
    ``before`` (cursors of neighbouring pages). Raises BadCursor for a cursor it cannot read.

    ``field`` must be unique (id, or the unique name), or indexed together with id (an index
    on exactly (field, id), or (project, field, id) such as wu_transition_id): the page is then read straight off that
    index. Ties of any other key ("ORDER BY x, id") would make PostgreSQL sort every tied row.
    """
    meta = queryset.model._meta
    tied = not meta.get_field(field).unique
    # an index of a project's rows leads with the project, which the page's queryset filters by
    if tied and not any(list(index.fields) in ([field, "id"], ["project", field, "id"]) for index in meta.indexes):
        raise ValueError(f"keyset pages need a unique sort key or an index on ({field}, id), not {field!r}")
    keys = [field, "id"] if tied else [field]

    def beyond(cursor: str, downwards: bool) -> Q:
        value, pk = decode_cursor(cursor, meta.get_field(field))
        if not tied:
            return Q(**{f"{field}__{'lt' if downwards else 'gt'}": pk if field == "id" else value})
        # PostgreSQL starts its scan of the (field, id) index at the row comparison, however
        # many rows tie; SQLite spells the comparison out as ORs, and the bound on field
        # alone lets it start at the tied value.
        compare, bound = (TupleLessThan, "lte") if downwards else (TupleGreaterThan, "gte")
        return compare((F(field), F("id")), (value, pk)) & Q(**{f"{field}__{bound}": value})

    order = [f"-{key}" if descending else key for key in keys]
    reverse = [key if descending else f"-{key}" for key in keys]
    if before:
        rows = list(queryset.filter(beyond(before, not descending)).order_by(*reverse)[: size + 1])
        has_prev = len(rows) > size
        rows = rows[:size][::-1]
        has_next = True
    else:
        if after:
            queryset = queryset.filter(beyond(after, descending))
        rows = list(queryset.order_by(*order)[: size + 1])
        has_next = len(rows) > size
        rows = rows[:size]
        has_prev = bool(after)
    next_cursor = encode_cursor(getattr(rows[-1], field), rows[-1].pk) if rows and has_next else ""
    prev_cursor = encode_cursor(getattr(rows[0], field), rows[0].pk) if rows and has_prev else ""
    return Page(rows, next_cursor, prev_cursor)
