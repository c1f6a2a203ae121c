"""Gives the test run a Redis of its own before Django's settings are read.

Without REDIS_URL, a private embedded redis-server in a temporary directory, stopped at the
end. With REDIS_URL, the same server but database 13 (BOINCWEB_TEST_REDIS_DB to change it),
claimed for this run and emptied at the start, so a test run can neither clobber a demo
running on database 0 nor share its queues with another test run: two runs on one database
run each other's jobs against the wrong database. A run that finds the database claimed by
another live run stops with a message instead.
"""

import os
import socket
import urllib.parse

import pytest

CLAIM_KEY = "boincweb:test-run"
# Renewed each time a test empties the database; a run killed outright frees it at expiry.
CLAIM_SECONDS = 2 * 3600

_server = None
_claim = None


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


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    global _server, _claim
    import redis

    url = os.environ.get("REDIS_URL")
    if url:
        db = int(os.environ.get("BOINCWEB_TEST_REDIS_DB", "13"))
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
    kind = "embedded, private to this run" if _server else "REDIS_URL, its own database"
    return f"redis: {os.environ.get('REDIS_URL')} ({kind})"


def pytest_unconfigure(config):
    if _server is not None:
        _server.__exit__(None, None, None)
    if _claim is not None:
        import redis

        with redis.Redis.from_url(os.environ["REDIS_URL"]) as client:
            if (client.get(CLAIM_KEY) or b"").decode() == _claim:
                client.delete(CLAIM_KEY)
