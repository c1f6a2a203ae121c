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
        "example.org",
        ".example.net",
        "10.0.0.1",
        "[::1]",
        "*",
    ]
    assert envhosts("ALLOWED_HOSTS", ["localhost"], environ={}) == ["localhost"]


@pytest.mark.parametrize(
    "value, message",
    [
        ("", "ALLOWED_HOSTS is empty"),
        (" , ", "ALLOWED_HOSTS is empty"),
        ("http://example.org", "ALLOWED_HOSTS entry 'http://example.org' is not a host name"),
        ("example.org:8000", "ALLOWED_HOSTS entry 'example.org:8000' is not a host name"),
        ("example.org/boinc", "ALLOWED_HOSTS entry 'example.org/boinc' is not a host name"),
    ],
)
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
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=BASE, env=environment, capture_output=True, text=True, timeout=60
    )


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


@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("BOINC_DAILY_RESULT_QUOTA", "-1", "BOINC_DAILY_RESULT_QUOTA=-1 is below the minimum of 0"),
        ("BOINC_DAILY_RESULT_QUOTA", "many", "BOINC_DAILY_RESULT_QUOTA='many' is not a whole number"),
        ("BOINC_RESEND_LOST_RESULTS", "perhaps", "BOINC_RESEND_LOST_RESULTS"),
    ],
)
def test_start_up_names_a_bad_scheduler_option(variable, value, message):
    proc = _manage_check(**{variable: value})
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


# The production variables of docs/deploy.md, with a generated key.
PRODUCTION = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "boinc.example.org",
    "SECRET_KEY": "x8Zq-3vN_b7Lr0TkWc5YpH2sJd9FgA4eRm6UoQ1iXtK_lzVwPnBy8CaDh7",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "SESSION_COOKIE_SECURE": "1",
    "CSRF_COOKIE_SECURE": "1",
}


def _manage(*args, **env):
    # the browser tests' conftest sets DJANGO_ALLOW_ASYNC_UNSAFE for Playwright in this process;
    # a production server has no such variable, and check --deploy rightly refuses it
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE") and not k.startswith("SECURE_")
    }
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE, env=environment, capture_output=True, text=True, timeout=60
    )


def test_check_deploy_is_clean_with_the_documented_production_variables():
    proc = _manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout
    assert "WARNINGS" not in proc.stderr + proc.stdout


def test_the_deploy_guide_documents_every_production_variable_the_test_sets():
    deploy = (BASE / "docs" / "deploy.md").read_text()
    for name, value in PRODUCTION.items():
        if name != "SECRET_KEY":
            assert f"{name}={value}" in deploy, name


def test_without_the_security_variables_check_deploy_names_each_missing_one():
    env = {k: v for k, v in PRODUCTION.items() if k in ("DEBUG", "ALLOWED_HOSTS", "SECRET_KEY")}
    proc = _manage("check", "--deploy", **env)
    for code in ("W004", "W008", "W012", "W016"):
        assert f"security.{code}" in proc.stderr


def test_a_proxy_header_is_two_values_and_a_bad_one_is_named():
    proc = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.SECURE_PROXY_SSL_HEADER, settings.SECURE_SSL_REDIRECT)",
        SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO, https",
        SECURE_SSL_REDIRECT="yes",
    )
    printed = proc.stdout.strip().splitlines()[-1]
    assert printed == "('HTTP_X_FORWARDED_PROTO', 'https') True", proc.stderr
    proc = _manage("check", SECURE_PROXY_SSL_HEADER="https")
    assert proc.returncode == 2
    assert "SECURE_PROXY_SSL_HEADER='https' is not two comma-separated values" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _manage("check", SECURE_HSTS_SECONDS="a year")
    assert proc.returncode == 2
    assert "SECURE_HSTS_SECONDS='a year' is not a whole number" in proc.stderr


@pytest.mark.django_db
def test_the_demo_login_made_under_debug_is_refused_once_debug_is_off(settings, client):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    settings.DEBUG = True
    call_command("seed_demo", workunits=0, hosts=0, stdout=open(os.devnull, "w"))
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser
    assert client.login(username="admin", password="boincweb")  # make run's demo login
    assert client.get("/admin/").status_code == 200

    settings.DEBUG = False  # the same database, served for real
    assert client.get("/admin/").status_code == 302  # the earlier session no longer counts
    fresh = Client()
    assert not fresh.login(username="admin", password="boincweb")
    page = fresh.post("/accounts/login/", {"username": "admin", "password": "boincweb"})
    assert page.status_code == 200
    assert b"Please enter a correct username and password" in page.content
    assert "_auth_user_id" not in fresh.session
    admin_login = fresh.post("/admin/login/", {"username": "admin", "password": "boincweb"})
    assert admin_login.status_code == 200 and "_auth_user_id" not in fresh.session

    # an account named admin with a password of its own is an ordinary account
    admin.set_password("a-real-password-of-its-own")
    admin.save()
    assert fresh.login(username="admin", password="a-real-password-of-its-own")
    assert fresh.get("/admin/").status_code == 200
