"""manage.py on a database `migrate` has not set up: one line that says what to run, exit 2,
and no traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args",
    [
        ["world", "--hosts", "2", "--days", "0.1"],
        ["create_work", "--appname", "x", "--wu_name", "a", "a.in"],
        ["seed_demo"],
    ],
)
def test_a_command_on_an_unmigrated_database_says_to_migrate_and_exits_2(args, tmp_path):
    database = tmp_path / "empty.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "BOINCWEB_DATA_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"the database {database} is not set up" in proc.stderr
    assert "manage.py migrate" in proc.stderr
    assert proc.stdout == ""
