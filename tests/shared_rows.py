"""Rows that are costly to build (a simulated world run to its end), built once for the tests of
a module that only read them, instead of once per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from django.core.management import call_command

T = TypeVar("T")


def shared_rows(django_db_blocker, build: Callable[[], T]) -> Iterator[T]:
    """For a module-scoped fixture (``yield from shared_rows(django_db_blocker, build)``): the rows
    ``build`` writes are committed outside any test's transaction, so that every ``django_db``
    test of the module sees them and rolls back only what it changes itself; when the fixture
    ends (or ``build`` fails), every table is emptied, as a transactional test leaves them, so
    that nothing reaches the next module's tests.

    pytest-django's ``django_db_blocker`` guards the database outside tests: it is lifted while
    the rows are written and again to empty the tables, not while the tests run.
    """
    try:
        with django_db_blocker.unblock():
            value = build()
        yield value
    finally:
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)
