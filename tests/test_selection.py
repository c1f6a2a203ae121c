"""Which tests run where (tests/conftest.py): `make test`'s second pass
(BOINCWEB_TEST_ONLY_DATABASE=1) keeps exactly the tests whose outcome can depend on the database,
`make test-long` (BOINCWEB_TEST_LONG=1) only the full-size simulations, `make test` none of them;
a bad value of either stops the run with a message."""

import functools
import os
import subprocess
import sys
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent


PATHS = (
    "tests/backend/test_models.py",
    "tests/test_signals.py",
    "tests/web/test_project_actions.py",
    "tests/web/test_project_hosts.py",
    "tests/scheduling/test_lab_jobs.py",
    "tests/scheduling/test_hostile_regressions.py",
    "tests/backend/test_rules_transitioner.py",
    "tests/world/test_shards.py",
    "tests/world/test_world.py",
    "tests/world/test_engine_hosts.py",
    "tests/protocol/test_real_client.py",
    "tests/protocol/test_endpoints.py",
)


@functools.cache
def collected(value, long=""):
    """The node ids collected from PATHS with the two variables so set (one collection each)."""
    out = collect(value, *PATHS, long=long)
    assert out.returncode == 0, out.stdout + out.stderr
    return {line for line in out.stdout.splitlines() if "::" in line}


def in_file(value, path, long=""):
    return {node.split("::", 1)[1] for node in collected(value, long) if node.split("::")[0] == path}


def collect(value, *paths, long=""):
    env = {**os.environ, "BOINCWEB_TEST_ONLY_DATABASE": value, "BOINCWEB_TEST_LONG": long}
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
    kept = {name.split("[")[0] for name in in_file("1", "tests/backend/test_models.py")}
    # the db fixture, the django_db marker: kept; a test of enum values and the signal tests: not
    assert "test_unsent_counts_inactive_too_because_boinc_compares_with_lte" in kept
    assert "test_workunit_refuses_what_create_work_refuses" in kept
    assert "test_enum_values_are_boincs" not in kept
    assert not in_file("1", "tests/test_signals.py")
    assert "test_enum_values_are_boincs" in in_file("0", "tests/backend/test_models.py")
    assert in_file("0", "tests/test_signals.py")


def test_outside_the_daemons_folders_only_tests_marked_postgres_or_database_are_kept():
    # the actions lock rows (the module is marked database); the host pages and the lab's jobs
    # read and write through the ORM alone, and run on SQLite only
    assert in_file("1", "tests/web/test_project_actions.py") == in_file("0", "tests/web/test_project_actions.py")
    assert not in_file("1", "tests/web/test_project_hosts.py")
    assert not in_file("1", "tests/scheduling/test_lab_jobs.py")
    assert in_file("0", "tests/web/test_project_hosts.py") and in_file("0", "tests/scheduling/test_lab_jobs.py")
    # one test of the module is marked: it counts a person's runs under a lock on their row
    assert in_file("1", "tests/scheduling/test_hostile_regressions.py") == {
        "test_a_person_has_at_most_the_cap_of_runs_queued_and_a_comparison_counts_each"
    }


def test_in_the_daemons_folders_and_marked_modules_every_database_test_is_kept():
    for path in ("tests/backend/test_rules_transitioner.py", "tests/world/test_shards.py"):
        assert in_file("1", path) and in_file("1", path) == in_file("0", path)


def test_the_real_clients_tests_run_on_sqlite_only_and_the_endpoints_they_reach_on_both():
    # the real client's retries and backoffs are the client's; the scheduler and the upload
    # handler it talks to run on PostgreSQL request by request in test_endpoints.py
    assert in_file("0", "tests/protocol/test_real_client.py")
    assert not in_file("1", "tests/protocol/test_real_client.py")
    endpoints = in_file("1", "tests/protocol/test_endpoints.py")
    assert "test_a_reported_success_with_its_output_uploaded_is_a_success" in endpoints
    assert "test_an_upload_can_resume_from_the_size_the_server_reports" in endpoints


def test_of_the_world_runs_only_those_that_can_depend_on_the_database_are_kept():
    kept = in_file("1", "tests/world/test_world.py")
    assert kept == {
        "test_commits_are_unsynced_inside_the_block_and_as_before_after_it_even_after_an_error",
        "test_inside_a_transaction_the_block_leaves_the_setting_alone",
    }


def test_the_full_size_simulations_run_only_in_the_long_pass_and_their_twins_only_in_the_short():
    short, long = in_file("0", "tests/world/test_world.py"), in_file("0", "tests/world/test_world.py", long="1")
    assert "test_a_world_ends_with_every_workunit_assimilated_or_errored[20-hosts-1-day]" in short
    assert not any("200-hosts-3-days" in name for name in short)
    assert long == {"test_a_world_ends_with_every_workunit_assimilated_or_errored[200-hosts-3-days]"}
    # the long pass on PostgreSQL: the long tests that can depend on the database
    assert in_file("1", "tests/world/test_engine_hosts.py", long="1") == {
        "test_engine_and_simple_hosts_for_a_day_on_postgresql[200-and-200]"
    }
    assert "test_engine_and_simple_hosts_for_a_day_on_postgresql[8-and-8]" in in_file(
        "1", "tests/world/test_engine_hosts.py"
    )


def test_a_bad_value_stops_the_run_with_a_message():
    out = collect("yes", "tests/test_signals.py")
    assert out.returncode != 0
    assert "BOINCWEB_TEST_ONLY_DATABASE must be 0 or 1, not 'yes'" in out.stderr + out.stdout


def test_a_bad_long_value_stops_the_run_with_a_message():
    out = collect("0", "tests/test_signals.py", long="all")
    assert out.returncode != 0
    assert "BOINCWEB_TEST_LONG must be 0 or 1, not 'all'" in out.stderr + out.stdout


def test_the_costliest_modules_are_handed_out_first_each_module_whole_and_new_ones_last():
    from types import SimpleNamespace

    from tests.conftest import costliest_modules_first

    names = ["a.py::1", "b.py::1", "new.py::1", "a.py::2", "c.py::1", "b.py::2", "other_new.py::1"]
    items = [SimpleNamespace(nodeid=name) for name in names]
    costs = {"a.py": 3.0, "b.py": 40.0, "c.py": 3.0}
    ordered = [item.nodeid for item in costliest_modules_first(items, costs)]
    # b first; a and c tie and keep their collection order; a's tests together; then the
    # modules with no recorded cost, in collection order; every test once
    assert ordered == ["b.py::1", "b.py::2", "a.py::1", "a.py::2", "c.py::1", "new.py::1", "other_new.py::1"]
    # with nothing recorded (a fresh checkout without the file): modules in the order they were
    # first collected
    unordered = [item.nodeid for item in costliest_modules_first(items, {})]
    assert unordered == ["a.py::1", "a.py::2", "b.py::1", "b.py::2", "new.py::1", "c.py::1", "other_new.py::1"]
