"""The engine imports no Django (DESIGN.md: scheduling/engine has NO Django imports)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENGINE = ROOT / "scheduling" / "engine"


def test_engine_sources_never_import_django():
    offenders = [
        str(path.relative_to(ROOT))
        for path in ENGINE.rglob("*.py")
        if any(line.strip().startswith(("import django", "from django")) for line in path.read_text().splitlines())
    ]
    assert offenders == []


def test_running_the_engine_loads_no_django_module():
    code = (
        "import sys\n"
        "import scheduling.engine as e\n"
        "s = e.load_scenario('scenarios/standard.json')\n"
        "e.run(s, duration=3600)\n"
        "e.rr_snapshot(s)\n"
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
