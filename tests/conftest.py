import json
import os
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from tests.isolation_plugin import empty


@pytest.fixture
def redis_client():
    """The test run's own Redis, emptied before each test that asks for it."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    empty(client)
    yield client
    empty(client)
    client.close()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database. On PostgreSQL, it commits without waiting for the disk
    (every connection to it: the tests' own and those of the RQ workers and commands they
    start), since its rows are thrown away at the end and a crash of the server could only lose
    the last commits, never corrupt them. SQLite's test database lives in shared memory for the same reason
    (boincweb/settings.py). The tests of the setting itself (tests/world/test_world.py) turn it
    on for their own connection first."""
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        name = connection.ops.quote_name(connection.settings_dict["NAME"])
        cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit TO off")
        cursor.execute("SET synchronous_commit TO off")


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


def long_selection(value: str) -> bool:
    """BOINCWEB_TEST_LONG: "" or "0", the full-size simulations (marked ``long``) are left out;
    "1", only they run (`make test-long`)."""
    if value not in ("", "0", "1"):
        raise pytest.UsageError(f"BOINCWEB_TEST_LONG must be 0 or 1, not {value!r}")
    return value == "1"


def only_the_database_pass(value: str) -> bool:
    if value not in ("", "0", "1"):
        raise pytest.UsageError(f"BOINCWEB_TEST_ONLY_DATABASE must be 0 or 1, not {value!r}")
    return value == "1"


def keep(items: list[pytest.Item], wanted, config: pytest.Config) -> None:
    kept = [item for item in items if wanted(item)]
    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Which of the collected tests run.

    - The full-size simulations (marked ``long``) run only in `make test-long`
      (BOINCWEB_TEST_LONG=1, which runs nothing else); each has a smaller twin in the default run
      that checks the same rule.
    - With BOINCWEB_TEST_ONLY_DATABASE=1 (`make test`'s second pass, on PostgreSQL, after the
      whole suite has run on SQLite), only the tests whose outcome can depend on the database
      run: ``runs_on_postgresql`` says which and why.
    """
    long_only = long_selection(os.environ.get("BOINCWEB_TEST_LONG", ""))
    keep(items, lambda item: (item.get_closest_marker("long") is not None) == long_only, config)
    if only_the_database_pass(os.environ.get("BOINCWEB_TEST_ONLY_DATABASE", "")):
        keep(items, runs_on_postgresql, config)
    items[:] = costliest_modules_first(items, module_costs())


# The folders whose database tests run a second time on PostgreSQL. The daemons and the scheduler
# read and write through raw SQL (backend/daemons/claim.py), row locks (SELECT ... FOR UPDATE
# [SKIP LOCKED], which SQLite does not have: it locks the whole database instead),
# compare-and-set updates counted by rows, and transactions that other processes see at
# different times; every test here reaches them. A world (tests/world) is those daemons and that
# scheduler run over and over: its tests check invariants over a whole run, on SQLite, and those
# of its tests that can depend on the database are marked (several processes or workers on one
# world, a killed work horse, commit durability, engine hosts on PostgreSQL).
POSTGRESQL_FOLDERS = ("tests/backend/", "tests/protocol/")


def runs_on_postgresql(item: pytest.Item) -> bool:
    """Whether a test runs again on PostgreSQL: it uses the database and either lies in
    POSTGRESQL_FOLDERS or is marked ``postgres`` (it needs PostgreSQL) or ``database`` (it
    reaches database-specific code from elsewhere: raw SQL, row locks, several processes,
    migrations). The rest (pages, forms, the lab, the browser, whole worlds) read and write rows
    through the ORM's portable queries or through the daemons checked in POSTGRESQL_FOLDERS, and
    run on SQLite only.

    A test marked ``real_client`` (Debian's BOINC client run against the server) runs on SQLite
    only too, though it lies in tests/protocol: what it adds to the tests beside it is the
    client's own behaviour (its retries, backoffs, files and signals), which no database changes;
    the server side it reaches (the scheduler endpoint, the upload handler, the daemons'
    passes) runs on PostgreSQL in the endpoint and daemon tests of the same folders, request by
    request. Each such test spends most of its time waiting on the client's one-second polls."""
    if not uses_the_database(item):
        return False
    if item.get_closest_marker("postgres") or item.get_closest_marker("database"):
        return True
    if item.get_closest_marker("real_client"):
        return False
    path = os.path.relpath(str(item.path), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return path.replace(os.sep, "/").startswith(POSTGRESQL_FOLDERS)


# Seconds each test module took in a recorded run (setup, call and teardown of its tests,
# summed), for each pass: `make test`'s first pass, its pass on PostgreSQL, and `make test-long`.
# A run with BOINCWEB_TEST_RECORD_COSTS=1 writes those of the modules it ran into its pass. The
# PostgreSQL pass and the SQLite pass are recorded: in both a few long modules (worlds, shards,
# real clients, crawls, several processes) would otherwise make the tail when collection order
# reaches them late; a pass with nothing recorded keeps collection order. The figures only rank
# the modules, so a run on a loaded machine records them as well as a quiet one.
MODULE_COSTS = Path(__file__).resolve().parent / "module_costs.json"


def which_pass() -> str:
    if long_selection(os.environ.get("BOINCWEB_TEST_LONG", "")):
        return "long"
    if only_the_database_pass(os.environ.get("BOINCWEB_TEST_ONLY_DATABASE", "")):
        return "database"
    return "suite"


def module_costs() -> dict[str, float]:
    try:
        recorded = json.loads(MODULE_COSTS.read_text())
    except FileNotFoundError:
        return {}
    return recorded.get(which_pass(), {})


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def costliest_modules_first(items: list[pytest.Item], costs: dict[str, float]) -> list[pytest.Item]:
    """The tests in the order they are handed out: module by module, the modules that took
    longest in the pass's recorded run first, a module not recorded (a new one) after the
    recorded ones, ties in collection order; within a module, collection order.

    pytest-xdist's worksteal hands the first half of this order to one worker and the second
    half to the other, and an idle worker takes the back half of the other's queue. With the
    long modules first, the run's tail is made of short tests a worker can take over, instead of
    one long world that began late while the other worker sits idle. A module's tests stay
    together so that its module-scoped fixtures (tests/shared_rows.py) are not built again for
    each stretch of it."""
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(module_of(item.nodeid), len(first_seen))

    def rank(item: pytest.Item) -> tuple[float, int]:
        module = module_of(item.nodeid)
        return (-costs.get(module, -1.0), first_seen[module])

    return sorted(items, key=rank)


RECORDED: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("BOINCWEB_TEST_RECORD_COSTS") == "1":
        module = module_of(report.nodeid)
        RECORDED[module] = RECORDED.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With BOINCWEB_TEST_RECORD_COSTS=1, the run (an xdist run's controller, which sees every
    worker's reports) writes the seconds of each module it ran into its pass in MODULE_COSTS."""
    if not RECORDED or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        recorded = json.loads(MODULE_COSTS.read_text())
    except FileNotFoundError:
        recorded = {}
    costs = {**recorded.get(which_pass(), {}), **{module: round(s, 1) for module, s in RECORDED.items()}}
    recorded[which_pass()] = dict(sorted(costs.items()))
    MODULE_COSTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
