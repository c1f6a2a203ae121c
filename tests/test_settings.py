import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from boincweb.env import database_config, envbool, envhosts, envint, envlist, redis_url

BASE = Path(__file__).resolve().parent.parent


def test_envbool_reads_the_usual_spellings():
    assert envbool("X", False, environ={"X": "yes"}) is True
    assert envbool("X", True, environ={"X": "0"}) is False
    assert envbool("X", True, environ={}) is True


def test_envbool_rejects_nonsense_naming_the_variable():
    with pytest.raises(ImproperlyConfigured, match="DEBUG='maybe' is not a boolean"):
        envbool("DEBUG", True, environ={"DEBUG": "maybe"})


def test_envint_rejects_words_and_values_below_the_minimum():
    assert envint("N", 5, environ={"N": " 12 "}) == 12
    with pytest.raises(ImproperlyConfigured, match="N='twelve' is not a whole number"):
        envint("N", 5, environ={"N": "twelve"})
    with pytest.raises(ImproperlyConfigured, match="N=0 is below the minimum of 1"):
        envint("N", 5, minimum=1, environ={"N": "0"})


def test_envlist_splits_on_commas():
    assert envlist("H", ["a"], environ={"H": "x.org, y.org,"}) == ["x.org", "y.org"]
    assert envlist("H", ["a"], environ={}) == ["a"]


def test_envhosts_takes_names_addresses_and_wildcards():
    environ = {"ALLOWED_HOSTS": "example.org, .example.net,10.0.0.1,[::1],*"}
    assert envhosts("ALLOWED_HOSTS", ["a"], environ=environ) == [
        "example.org", ".example.net", "10.0.0.1", "[::1]", "*"]
    assert envhosts("ALLOWED_HOSTS", ["localhost"], environ={}) == ["localhost"]


@pytest.mark.parametrize("value, message", [
    ("", "ALLOWED_HOSTS is empty"),
    (" , ", "ALLOWED_HOSTS is empty"),
    ("http://example.org", "ALLOWED_HOSTS entry 'http://example.org' is not a host name"),
    ("example.org:8000", "ALLOWED_HOSTS entry 'example.org:8000' is not a host name"),
    ("example.org/boinc", "ALLOWED_HOSTS entry 'example.org/boinc' is not a host name"),
])
def test_envhosts_refuses_what_is_not_a_host_naming_the_entry(value, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        envhosts("ALLOWED_HOSTS", ["localhost"], environ={"ALLOWED_HOSTS": value})


def test_start_up_names_a_bad_allowed_hosts_without_a_traceback():
    proc = _manage_check(ALLOWED_HOSTS="https://boinc.example.org")
    assert proc.returncode == 2
    assert "ALLOWED_HOSTS entry 'https://boinc.example.org' is not a host name" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_database_defaults_to_sqlite_under_var():
    config = database_config(None, BASE)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(BASE / "var" / "boincweb.sqlite3")


def test_database_url_for_postgres_is_parsed():
    config = database_config("postgres://bob@127.0.0.1:5432/test", BASE)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["HOST"], config["PORT"]) == ("test", "127.0.0.1", 5432)


@pytest.mark.parametrize("url", ["mysql://root@localhost/x", "nonsense", "ftp://x/y"])
def test_database_url_that_is_not_supported_is_refused(url):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_config(url, BASE)


def test_redis_url_defaults_to_the_embedded_socket_and_rejects_other_schemes():
    assert redis_url(None, BASE) == f"unix://{BASE}/var/redis.sock"
    assert redis_url("redis://127.0.0.1:6379/0", BASE) == "redis://127.0.0.1:6379/0"
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL='http://x' is not a Redis URL"):
        redis_url("http://x", BASE)


def test_the_embedded_socket_can_move_and_the_settings_follow(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBEDDED_REDIS_SOCKET", str(tmp_path / "r.sock"))
    assert redis_url(None, BASE) == f"unix://{tmp_path}/r.sock"


def _manage_check(**env):
    environment = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    environment.update(env)
    return subprocess.run([sys.executable, "manage.py", "check"], cwd=BASE, env=environment,
                          capture_output=True, text=True, timeout=60)


def test_start_up_refuses_debug_off_without_a_secret_key():
    proc = _manage_check(DEBUG="0")
    assert proc.returncode == 2
    assert "SECRET_KEY must be set when DEBUG is off" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_start_up_names_a_bad_variable_without_a_traceback():
    proc = _manage_check(DAEMON_BATCH_SIZE="lots")
    assert proc.returncode == 2
    assert "DAEMON_BATCH_SIZE='lots' is not a whole number" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_start_up_accepts_debug_off_with_a_key():
    proc = _manage_check(DEBUG="false", SECRET_KEY="k" * 50, ALLOWED_HOSTS="example.org")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("variable, value, message", [
    ("BOINC_DAILY_RESULT_QUOTA", "-1", "BOINC_DAILY_RESULT_QUOTA=-1 is below the minimum of 0"),
    ("BOINC_DAILY_RESULT_QUOTA", "many", "BOINC_DAILY_RESULT_QUOTA='many' is not a whole number"),
    ("BOINC_RESEND_LOST_RESULTS", "perhaps", "BOINC_RESEND_LOST_RESULTS"),
])
def test_start_up_names_a_bad_scheduler_option(variable, value, message):
    proc = _manage_check(**{variable: value})
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
