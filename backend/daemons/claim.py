"""Claiming rows for a pass, safely with several workers (reference/server.md §5).

On PostgreSQL, ``select_for_update(skip_locked=True)`` inside the caller's transaction: a row
another worker holds is skipped, and the rows we lock stay ours until we commit, so a
compare-and-set update on them cannot lose to anyone. The lock is FOR NO KEY UPDATE, the one
an UPDATE takes: it excludes other claims and writers, but not a transaction that merely
refers to the row (inserting a result or an event of the workunit), which would otherwise wait
for our pass while our pass waits for a row it holds (a deadlock). On SQLite the transaction itself is
IMMEDIATE (settings), which takes the write lock at BEGIN, so the pass is serialised.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from django.db import connection
from django.db.models import F, Field, ForeignKey, Model, QuerySet
from django.db.models.functions import Mod
from django.utils import timezone

from backend.models import Workunit

M = TypeVar("M", bound=Model)


def shard(queryset: QuerySet[M], mod: int, index: int, field: str = "id") -> QuerySet[M]:
    """Only the rows with ``field % mod == index``, as BOINC's ``--mod n i``."""
    if mod <= 1:
        return queryset
    return queryset.annotate(_shard=Mod(F(field), mod)).filter(_shard=index)


def claim(queryset: QuerySet[M], batch_size: int, *, mod: int = 1, index: int = 0) -> list[M]:
    """Lock and return up to ``batch_size`` rows of ``queryset`` by id; call inside ``atomic()``."""
    queryset = shard(queryset, mod, index)
    if connection.features.has_select_for_update_skip_locked:
        queryset = queryset.select_for_update(skip_locked=True, no_key=True, of=("self",))
    return list(queryset.order_by("id")[:batch_size])


SIMPLE = {
    "IntegerField": int,
    "BigIntegerField": int,
    "PositiveIntegerField": int,
    "PositiveSmallIntegerField": int,
    "SmallIntegerField": int,
    "AutoField": int,
    "BigAutoField": int,
    "FloatField": float,
    "BooleanField": bool,
    "CharField": str,
    "TextField": str,
}


def preparer(field: Field[Any, Any]) -> Callable[[Any], Any]:
    """A function from an attribute's value to the database's, for a pass's many rows: the
    plain Python type for plain fields (and foreign keys to them), Django's preparation for
    the rest."""
    # a relation among a pass's columns is a foreign key, which has a target_field
    target = cast("ForeignKey[Any, Any]", field).target_field if field.is_relation else field
    kind = SIMPLE.get(target.get_internal_type())
    if kind is None:
        return lambda value: field.get_db_prep_save(value, connection)
    return lambda value: value if value is None else kind(value)


def update_rows(model: type[Model], rows: Sequence[Model], fields: Iterable[str], chunk: int = 1000) -> None:
    """Write each row's own values of ``fields`` in one UPDATE ... FROM (VALUES ...) per chunk.

    Django's bulk_update builds a CASE per field, which PostgreSQL plans slowly for large
    batches; a join against a VALUES list is one pass. Callers hold the rows' locks (or the
    SQLite write lock), as for any write in a pass.
    """
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    pk = model._meta.pk
    # ``fields`` name columns, never get_field's reverse relations or generic keys
    columns = [cast("Field[Any, Any]", model._meta.get_field(name)) for name in fields]
    sets = ", ".join(f"{connection.ops.quote_name(c.column)} = v.column{i + 2}" for i, c in enumerate(columns))
    row_sql = "(" + ", ".join(f"CAST(%s AS {c.db_type(connection)})" for c in [pk, *columns]) + ")"
    prepared = [(c.attname, preparer(c)) for c in columns]
    with connection.cursor() as cursor:
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            params = []
            for row in part:
                params.append(row.pk)
                params.extend(prep(getattr(row, attname)) for attname, prep in prepared)
            cursor.execute(
                f"UPDATE {table} SET {sets} FROM (VALUES {', '.join([row_sql] * len(part))}) "
                f"AS v WHERE {table}.{connection.ops.quote_name(pk.column)} = v.column1",
                params,
            )


def insert_rows(model: type[M], rows: Iterable[M]) -> list[M]:
    """Save new ``rows`` of ``model`` as ``bulk_create`` does, ids set on them; returns them.

    On PostgreSQL the ids are drawn from the table's own sequence (one ``nextval`` query for
    the batch) and the rows go in with one COPY: Django's INSERT passes every value of every
    row through its field's preparation and builds one long statement, most of the time of a
    pass's thousand new rows, where here a plain column's value is only converted to its
    Python type (``preparer``). The rows are the same: every concrete column, ``auto_now``
    times as ``pre_save`` sets them, each row checked by the table's constraints. Elsewhere,
    and for fields whose ``pre_save`` does more than read the attribute, ``bulk_create``.
    """
    rows = list(rows)
    fields, stamped, plain = _copy_fields(model)
    if not rows or connection.vendor != "postgresql" or not plain or any(row.pk is not None for row in rows):
        return model._default_manager.bulk_create(rows)
    for field in stamped:
        for row in rows:
            field.pre_save(row, add=True)
    getters = [(field.attname, preparer(field)) for field in fields]
    ids = _copy_in(model, fields, [[prepare(getattr(row, attname)) for attname, prepare in getters] for row in rows])
    for pk, row in zip(ids, rows, strict=True):
        row.pk = pk
        row._state.adding = False
        row._state.db = connection.alias
    return rows


def insert_new(
    model: type[Model], fixed: Mapping[str, Any], varying: Mapping[str, Sequence[Any]], *, ids: bool = True
) -> list[int]:
    """Insert one row of ``model`` per position of ``varying``'s columns (attribute names, each
    to its values, all of one length), with ``fixed``'s columns the same in every row, every
    other column its field's default and an ``auto_now`` one the batch's time: the rows
    ``bulk_create`` writes for ``model(**fixed, **{name: values[i] for name, values in
    varying.items()})``. Returns the new ids, in order (``ids=False``: nothing, for rows nobody
    refers to, whose ids need not be drawn and read first).

    On PostgreSQL the ids are drawn from the table's sequence and the rows go in with one
    COPY of plain values (``insert_rows``'s way), without a model instance per row, and every
    column but the varying ones prepared once for the batch: building a workunit's 32 fields
    per row was most of the time of creating work. Elsewhere, and for a field whose
    ``pre_save`` does more than read the attribute, ``bulk_create``.
    """
    lengths = {len(values) for values in varying.values()}
    if len(lengths) != 1:
        raise ValueError(f"{model._meta.label}: the varying columns need one length, not {sorted(lengths)}")
    (count,) = lengths
    fields, stamped, plain = _copy_fields(model)
    by_name = {field.attname: field for field in fields}
    wrong = (set(fixed) | set(varying)) - set(by_name) or set(fixed) & set(varying)
    if wrong:
        raise ValueError(f"{model._meta.label}: unknown or repeated column(s) {', '.join(sorted(wrong))}")
    if not count or connection.vendor != "postgresql" or not plain:
        made = model._default_manager.bulk_create(
            [model(**fixed, **dict(zip(varying, row, strict=True))) for row in zip(*varying.values(), strict=True)]
        )
        return [row.pk for row in made] if ids else []
    now = timezone.now()
    # the COPY's columns: the varying ones, each prepared per row, then the rest, once
    order = [by_name[name] for name in varying]
    order += [field for field in fields if field.attname not in varying]
    constant = tuple(
        preparer(field)(
            fixed[field.attname] if field.attname in fixed else now if field in stamped else field.get_default()
        )
        for field in order[len(varying) :]
    )
    columns = [list(map(preparer(field), values)) for field, values in zip(order, varying.values())]
    return _copy_in(model, order, (row + constant for row in zip(*columns)), count, ids=ids)


def _copy_fields(model: type[Model]) -> tuple[list[Field], list[Field], bool]:
    """``model``'s columns but its id, those ``auto_now``/``auto_now_add`` stamps, and
    whether every other one's ``pre_save`` only reads the attribute (so COPY may write it)."""
    meta = model._meta
    fields = [field for field in meta.concrete_fields if field is not meta.pk]
    stamped = [field for field in fields if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)]
    plain = all(type(field).pre_save is Field.pre_save for field in fields if field not in stamped)
    return fields, stamped, plain


def _copy_in(
    model: type[Model],
    fields: Sequence[Field],
    rows: Iterable[Sequence[Any]],
    count: int | None = None,
    *,
    ids: bool = True,
) -> list[int]:
    """PostgreSQL: ids for ``count`` (default: len(rows)) new rows of ``model`` drawn from its
    table's sequence in one query, then the rows (each the prepared values of ``fields``)
    copied in with one COPY, each under its id in order. Returns the ids; with ``ids=False``
    the table's default numbers the rows as they go in, and nothing is returned."""
    meta = model._meta
    q = connection.ops.quote_name
    copy_sql = f"COPY {q(meta.db_table)} ({', '.join(q(field.column) for field in fields)}) FROM STDIN"
    with connection.cursor() as cursor:
        if not ids:
            with cursor.cursor.copy(copy_sql) as copy:
                for values in rows:
                    copy.write_row(values)
            return []
        if count is None:
            rows = list(rows)
            count = len(rows)
        # the sequence as a constant: pg_get_serial_sequence in the statement would look it up
        # again for every id, most of the query's time
        cursor.execute(
            "SELECT nextval(%s::regclass) FROM generate_series(1, %s)",
            [_sequence(q(meta.db_table), meta.pk.column), count],
        )
        drawn = sorted(found for (found,) in cursor.fetchall())
        with cursor.cursor.copy(copy_sql.replace(" (", f" ({q(meta.pk.column)}, ", 1)) as copy:
            for pk, values in zip(drawn, rows, strict=True):
                copy.write_row([pk, *values])
    return drawn


@functools.lru_cache(maxsize=64)  # one per table; a table's sequence is fixed by its schema
def _sequence(table: str, column: str) -> str:
    """The name of the sequence that numbers ``table``'s ``column`` (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, column])
        (name,) = cursor.fetchone()
    return name


def compare_and_set(
    model: type[Model], field: str, values: Mapping[int, tuple[Any, Any]], otherwise: Any, chunk: int = 1000
) -> None:
    """Per row, ``field = new`` where it still holds the value read, else ``otherwise``.

    ``values`` maps a primary key to ``(read, new)``. One UPDATE ... FROM (VALUES ...) per
    chunk: the transitioner's write of transition_time (reference/server.md §3.2 step 11).
    """
    if not values:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    pk = model._meta.pk
    target = cast("Field[Any, Any]", model._meta.get_field(field))  # a column, as in update_rows
    column = f"{table}.{connection.ops.quote_name(target.column)}"
    kinds = (pk.db_type(connection), target.db_type(connection), target.db_type(connection))
    row_sql = "(" + ", ".join(f"CAST(%s AS {kind})" for kind in kinds) + ")"
    items = list(values.items())
    with connection.cursor() as cursor:
        for start in range(0, len(items), chunk):
            part = items[start : start + chunk]
            cursor.execute(
                f"UPDATE {table} SET {connection.ops.quote_name(target.column)} = "
                f"CASE WHEN {column} = v.column2 THEN v.column3 ELSE %s END "
                f"FROM (VALUES {', '.join([row_sql] * len(part))}) AS v "
                f"WHERE {table}.{connection.ops.quote_name(pk.column)} = v.column1",
                [otherwise, *(value for key, (read, new) in part for value in (key, read, new))],
            )


def placeholders(n: int) -> str:
    """``n`` query parameters, comma-separated, for an ``IN (...)``."""
    return ", ".join(["%s"] * n)


@functools.lru_cache(maxsize=1024)  # one per model, condition (its IN-list lengths) and lock
def select(model: type[Model], where: str, lock: bool) -> tuple[str, tuple[str, ...], tuple[Any, ...]]:
    """SELECT of every column of ``model``'s table (named ``t``) ``WHERE where``, in id order
    (``lock``: FOR NO KEY UPDATE, where the database has it); with the field names and, per
    field, the converters the ORM applies to its values."""
    q = connection.ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(f"t.{q(field.column)}" for field in fields)
    sql = f"SELECT {columns} FROM {q(model._meta.db_table)} t{f' WHERE {where}' if where else ''} ORDER BY t.id"
    if lock and connection.features.has_select_for_no_key_update:
        sql += " FOR NO KEY UPDATE"
    converters = []
    for field in fields:
        column = field.get_col(model._meta.db_table)
        fns = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        converters.append((tuple(fns), column) if fns else None)
    return sql, tuple(field.attname for field in fields), tuple(converters)


def read_rows(model: type[M], where: str = "", params: Sequence[Any] = (), *, lock: bool = False) -> list[M]:
    """``model``'s rows ``WHERE where`` (SQL over the table ``t``, with ``params``), in id order,
    as the ORM would build them; ``lock``: locked for the caller's transaction, as
    ``select_for_update(no_key=True)`` would. For the reads that run on every scheduler
    request: it writes each one's SQL once, where the ORM would build the query each time."""
    sql, names, converters = select(model, where, lock)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    if any(converters):
        found = [tuple(_convert(value, how) for value, how in zip(row, converters, strict=True)) for row in found]
    return [model.from_db(connection.alias, names, row) for row in found]


def rows_by_id(model: type[M], ids: Sequence[int]) -> dict[int, M]:
    """``model``'s rows with the ids ``ids``, by id (``read_rows``)."""
    if not ids:
        return {}
    return {row.pk: row for row in read_rows(model, f"t.id IN ({placeholders(len(ids))})", ids)}


def _convert(value: Any, how: tuple[Sequence[Any], Any] | None) -> Any:
    if how is not None:
        fns, column = how
        for fn in fns:
            value = fn(value, column, connection)
    return value


def locked_in_id_order(wu_ids: Iterable[int]) -> None:
    """Lock workunit rows in id order, so lockers never deadlock (nothing to do on SQLite,
    whose transactions are serialised by the write lock)."""
    ids = sorted(wu_ids)
    if not ids or not connection.features.has_select_for_no_key_update:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {connection.ops.quote_name(Workunit._meta.db_table)}"
            f" WHERE id IN ({placeholders(len(ids))}) ORDER BY id FOR NO KEY UPDATE",
            ids,
        )


def lower_transition_time(wu_ids: Sequence[int], time: int) -> None:
    """``transition_time = min(transition_time, time)`` for the workunits ``wu_ids``, whose
    rows the caller has locked."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {connection.ops.quote_name(Workunit._meta.db_table)} SET transition_time = %s"
            f" WHERE id IN ({placeholders(len(wu_ids))}) AND transition_time > %s",
            [time, *wu_ids, time],
        )
