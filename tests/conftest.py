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
