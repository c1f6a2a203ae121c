"""Keyset pagination: pages by the last row's sort key instead of OFFSET, so page 20,000 of a
million workunits costs what page 1 does, and no page needs a COUNT(*) of the table.

A cursor is the sort key of a row on the edge of a page, (value, id), encoded for a URL.
"""

import base64
import binascii
import json
from dataclasses import dataclass

from django.db.models import Q


class BadCursor(ValueError):
    pass


def encode_cursor(value, pk):
    raw = json.dumps([value, pk], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text):
    """(value, id) from a cursor; BadCursor when it was not made by encode_cursor."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        value, pk = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise BadCursor(f"{text!r} is not a page cursor") from None
    if (not isinstance(pk, int) or isinstance(pk, bool) or not 0 < pk < 2**63
            or not isinstance(value, (int, str)) or "\x00" in str(value)):
        raise BadCursor(f"{text!r} is not a page cursor")
    return value, pk


@dataclass(frozen=True)
class Page:
    rows: list
    next_cursor: str  # "" when this is the last page
    prev_cursor: str  # "" when this is the first page


def keyset_page(queryset, field, descending, *, after="", before="", size=50):
    """One page of ``queryset`` ordered by ``field``, the page after ``after`` or before
    ``before`` (cursors of neighbouring pages). Raises BadCursor for a cursor it cannot read.

    ``field`` must be unique (id, or the unique name): the page is then read straight off its
    index, where a tie-breaker ("ORDER BY x, id") would make PostgreSQL sort every tied row.
    """
    if not queryset.model._meta.get_field(field).unique:
        raise ValueError(f"keyset pages need a unique sort key, not {field!r}")

    def beyond(cursor, downwards):
        value, pk = decode_cursor(cursor)
        return Q(**{f"{field}__{'lt' if downwards else 'gt'}": pk if field == "id" else value})

    order, reverse = (f"-{field}", field) if descending else (field, f"-{field}")
    if before:
        rows = list(queryset.filter(beyond(before, not descending)).order_by(reverse)[: size + 1])
        has_prev = len(rows) > size
        rows = rows[:size][::-1]
        has_next = True
    else:
        if after:
            queryset = queryset.filter(beyond(after, descending))
        rows = list(queryset.order_by(order)[: size + 1])
        has_next = len(rows) > size
        rows = rows[:size]
        has_prev = bool(after)
    next_cursor = encode_cursor(getattr(rows[-1], field), rows[-1].pk) if rows and has_next else ""
    prev_cursor = encode_cursor(getattr(rows[0], field), rows[0].pk) if rows and has_prev else ""
    return Page(rows, next_cursor, prev_cursor)
