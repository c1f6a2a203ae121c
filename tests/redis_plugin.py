"""Gives the test run a Redis of its own before Django's settings are read.

Without REDIS_URL, a private embedded redis-server in a temporary directory, stopped at the
end. With REDIS_URL, the same server but database 13 (BOINCWEB_TEST_REDIS_DB to change it),
flushed at the start, so a test run cannot clobber a demo running on database 0.
"""

import os
import urllib.parse

import pytest

_server = None


def _with_db(url, db):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "unix":
        query = urllib.parse.parse_qs(parts.query)
        query["db"] = [str(db)]
        return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, doseq=True)))
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    global _server
    url = os.environ.get("REDIS_URL")
    if url:
        os.environ["REDIS_URL"] = _with_db(url, int(os.environ.get("BOINCWEB_TEST_REDIS_DB", "13")))
    else:
        from boincweb.embedded_redis import TemporaryServer

        _server = TemporaryServer()
        os.environ["REDIS_URL"] = _server.__enter__()
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()


def pytest_report_header(config):
    kind = "embedded, private to this run" if _server else "REDIS_URL, its own database"
    return f"redis: {os.environ.get('REDIS_URL')} ({kind})"


def pytest_unconfigure(config):
    if _server is not None:
        _server.__exit__(None, None, None)
