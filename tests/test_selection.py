"""`make test`'s second pass (BOINCWEB_TEST_ONLY_DATABASE=1) keeps exactly the tests that use
the database, and a bad value stops the run with a message."""

import os
import subprocess
import sys
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent


def collect(value, *paths):
    env = {**os.environ, "BOINCWEB_TEST_ONLY_DATABASE": value}
    return subprocess.run(
        # without the Redis plugin (addopts), which would claim this run's Redis database
        [sys.executable, "-m", "pytest", "-o", "addopts=", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=BASE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_only_the_tests_that_use_the_database_are_kept():
    out = collect("1", "tests/backend/test_models.py", "tests/test_signals.py")
    assert out.returncode == 0, out.stdout + out.stderr
    kept = {line.split("::")[1].split("[")[0] for line in out.stdout.splitlines() if "::" in line}
    # the db fixture, the django_db marker: kept; a test of enum values and the signal tests: not
    assert "test_unsent_counts_inactive_too_because_boinc_compares_with_lte" in kept
    assert "test_workunit_refuses_what_create_work_refuses" in kept
    assert "test_enum_values_are_boincs" not in kept
    assert not any("handlers" in name for name in kept)
    everything = collect("0", "tests/backend/test_models.py", "tests/test_signals.py")
    assert "test_enum_values_are_boincs" in everything.stdout


def test_a_bad_value_stops_the_run_with_a_message():
    out = collect("yes", "tests/test_signals.py")
    assert out.returncode != 0
    assert "BOINCWEB_TEST_ONLY_DATABASE must be 0 or 1, not 'yes'" in out.stderr + out.stdout
