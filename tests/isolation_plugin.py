"""Gives each process that runs tests a Redis and a data directory of its own, before Django's
settings are read.

Redis. Without REDIS_URL, a private embedded redis-server in a temporary directory, stopped at
the end. With REDIS_URL, the same server but database 13 (BOINCWEB_TEST_REDIS_DB to change it),
claimed for this run and emptied at the start, so a test run can neither clobber a demo
running on database 0 nor share its queues with another test run: two runs on one database
run each other's jobs against the wrong database. A run that finds the database claimed by
another live run stops with a message instead.

Data. BOINCWEB_DATA_DIR (workunit inputs and outputs) is a temporary directory of the process's
own, removed at the end, so tests never write into var/ and two processes never share a file.

Parallel runs (pytest-xdist, ``-n``). The controller process runs no test and takes nothing;
each worker takes its own: worker gwN an embedded server of its own, or database base + N of
REDIS_URL (13 and 14 for two workers), and a data directory of its own. Each worker's SQLite
test database is its own file already (boincweb/settings.py names it by process id), and
pytest-django gives each worker its own PostgreSQL test database (``test_<name>_gwN``).
"""

import os
import socket
import urllib.parse

import pytest

CLAIM_KEY = "boincweb:test-run"
# Renewed each time a test empties the database; a run killed outright frees it at expiry.
CLAIM_SECONDS = 2 * 3600

# Redis's default number of databases: a worker's database must be below it.
REDIS_DATABASES = 16

_server = None
_claim = None
_data_dir = None


def _with_db(url, db):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "unix":
        query = urllib.parse.parse_qs(parts.query)
        query["db"] = [str(db)]
        return f"unix://{parts.path}?{urllib.parse.urlencode(query, doseq=True)}"
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


def _held_by_a_live_run(holder):
    """Whether ``holder`` ("host:pid") names a process that still runs; a run on another host
    counts as live until its claim expires."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def _take(client, token):
    if client.set(CLAIM_KEY, token, nx=True, ex=CLAIM_SECONDS):
        return None
    holder = (client.get(CLAIM_KEY) or b"").decode()
    if holder and _held_by_a_live_run(holder):
        return holder
    client.set(CLAIM_KEY, token, ex=CLAIM_SECONDS)
    return None


def empty(client):
    """Empty the run's database, keeping this run's claim on it."""
    with client.pipeline(transaction=True) as pipe:
        pipe.flushdb()
        if _claim is not None:
            pipe.set(CLAIM_KEY, _claim, ex=CLAIM_SECONDS)
        pipe.execute()


def worker_index(worker_id: str | None) -> int:
    """0 for a run without workers and for worker gw0, N for worker gwN."""
    if not worker_id:
        return 0
    if not worker_id.startswith("gw") or not worker_id[2:].isdigit():
        raise pytest.UsageError(f"unexpected pytest-xdist worker id {worker_id!r}")
    return int(worker_id[2:])


def redis_database(base: str | None, worker_id: str | None) -> int:
    """The database of REDIS_URL that a run (or one of its workers) takes."""
    try:
        first = int(base if base is not None else "13")
    except ValueError:
        raise pytest.UsageError(f"BOINCWEB_TEST_REDIS_DB must be a whole number, not {base!r}")
    db = first + worker_index(worker_id)
    if not 0 < first or db >= REDIS_DATABASES:
        raise pytest.UsageError(
            f"BOINCWEB_TEST_REDIS_DB={first} gives worker {worker_id or 'gw0'} Redis database {db}; "
            f"the databases must lie between 1 and {REDIS_DATABASES - 1} (0 is the demo's): "
            "lower BOINCWEB_TEST_REDIS_DB or run fewer workers"
        )
    return db


def is_controller(early_config) -> bool:
    """Whether this process hands the tests to pytest-xdist workers instead of running them."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    return bool(getattr(early_config.known_args_namespace, "numprocesses", None))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    global _server, _claim, _data_dir
    import tempfile

    import redis

    if is_controller(early_config):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    _data_dir = tempfile.mkdtemp(prefix=f"boincweb-test-data-{worker or 'run'}-")
    os.environ["BOINCWEB_DATA_DIR"] = _data_dir
    url = os.environ.get("REDIS_URL")
    if url:
        db = redis_database(os.environ.get("BOINCWEB_TEST_REDIS_DB"), worker)
        os.environ["REDIS_URL"] = _with_db(url, db)
        token = f"{socket.gethostname()}:{os.getpid()}"
        with redis.Redis.from_url(os.environ["REDIS_URL"]) as client:
            holder = _take(client, token)
            if holder:
                raise pytest.UsageError(
                    f"Redis database {db} of REDIS_URL is in use by another test run ({holder}); "
                    "wait for it to end or set BOINCWEB_TEST_REDIS_DB to another database"
                )
            _claim = token
            empty(client)
    else:
        from boincweb.embedded_redis import TemporaryServer

        _server = TemporaryServer()
        os.environ["REDIS_URL"] = _server.__enter__()
        with redis.Redis.from_url(os.environ["REDIS_URL"]) as client:
            empty(client)


def pytest_report_header(config):
    if _server is None and _claim is None:
        return "redis: one for each worker"
    kind = "embedded, private to this run" if _server else "REDIS_URL, its own database"
    return f"redis: {os.environ.get('REDIS_URL')} ({kind})"


def pytest_unconfigure(config):
    if _data_dir is not None:
        import shutil

        shutil.rmtree(_data_dir, ignore_errors=True)
    if _server is not None:
        _server.__exit__(None, None, None)
    if _claim is not None:
        import redis

        with redis.Redis.from_url(os.environ["REDIS_URL"]) as client:
            if (client.get(CLAIM_KEY) or b"").decode() == _claim:
                client.delete(CLAIM_KEY)
