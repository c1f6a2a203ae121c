import os

import pytest
import redis
from django.conf import settings
from django.db import connection

from tests.redis_plugin import empty


@pytest.fixture
def redis_client():
    """The test run's own Redis, emptied before each test that asks for it."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    empty(client)
    yield client
    empty(client)
    client.close()


@pytest.fixture
def postgres_only(db):
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL for row locking across processes; this run is on "
            f"{connection.vendor} (set DATABASE_URL to a PostgreSQL database)"
        )


# The fixtures through which a test reaches the database (pytest-django's).
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "live_server",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
}


def uses_the_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With BOINCWEB_TEST_ONLY_DATABASE=1, only the tests that use the database run: `make test`'s
    second pass, on PostgreSQL, after the whole suite has run on SQLite (a test that never
    touches the database would only repeat itself)."""
    value = os.environ.get("BOINCWEB_TEST_ONLY_DATABASE", "")
    if value not in ("", "0", "1"):
        raise pytest.UsageError(f"BOINCWEB_TEST_ONLY_DATABASE must be 0 or 1, not {value!r}")
    if value != "1":
        return
    kept = [item for item in items if uses_the_database(item)]
    config.hook.pytest_deselected(items=[item for item in items if not uses_the_database(item)])
    items[:] = kept
