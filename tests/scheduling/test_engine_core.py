"""The engine's two cores (scheduling/engine/_core.py): the choice by BOINCWEB_ENGINE_CORE,
its refusal of bad values, the fallback when the compiled core is missing or stale, the same
results from both, and `python -m scheduling.engine` without Django."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from scheduling.engine import _core
from scheduling.engine.build import compiler_failure

ROOT = pathlib.Path(__file__).resolve().parents[2]
STANDARD = str(ROOT / "scenarios" / "standard.json")
BUILT = _core.unusable_reason() is None


def engine_process(
    args: list[str], core: str | None = None, more_env: dict | None = None, **kwargs
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != _core.ENV} | (more_env or {})
    if core is not None:
        env[_core.ENV] = core
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, **kwargs
    )


RUN_DIGEST = (
    "import hashlib, json, sys; from scheduling.engine import CORE, load_scenario, run; "
    "r = run(load_scenario(sys.argv[1]), policy=sys.argv[2], compat=sys.argv[3], duration=float(sys.argv[4])); "
    "d = r.to_dict(); d.pop('cpu_seconds'); "
    "print(CORE, hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest())"
)


@pytest.mark.parametrize("value", ["fast", "Compiled", "c"])
def test_a_core_that_is_not_a_choice_is_refused_with_the_variables_name(value):
    proc = engine_process(["-m", "scheduling.engine", STANDARD, "--duration", "1h"], core=value)
    assert proc.returncode != 0
    assert f"BOINCWEB_ENGINE_CORE={value!r}" in proc.stderr and "auto, compiled, python" in proc.stderr
    assert proc.stdout == ""


def test_the_python_core_runs_from_the_sources_even_where_the_compiled_one_is_built():
    proc = engine_process(
        ["-c", "import scheduling.engine.rr_sim as m, scheduling.engine as e; print(e.CORE, m.__file__)"], core="python"
    )
    assert proc.returncode == 0, proc.stderr
    core, path = proc.stdout.split()
    assert core == "python" and path.endswith("rr_sim.py")


def test_importing_the_engine_leaves_the_garbage_collector_as_it_found_it():
    code = (
        "import gc, sys; gc.disable() if sys.argv[1] == 'off' else None; "
        "import scheduling.engine; print(gc.isenabled())"
    )
    assert engine_process(["-c", code, "on"]).stdout.split() == ["True"]
    assert engine_process(["-c", code, "off"]).stdout.split() == ["False"]


@pytest.mark.skipif(BUILT, reason="the compiled core is built here")
def test_asking_for_the_compiled_core_where_it_cannot_run_says_why():
    proc = engine_process(["-c", "import scheduling.engine"], core="compiled")
    assert proc.returncode != 0
    assert "BOINCWEB_ENGINE_CORE=compiled, but the engine's compiled core cannot run" in proc.stderr


@pytest.mark.skipif(not BUILT, reason="the compiled core is not built (no C compiler?)")
def test_the_compiled_core_runs_from_its_extension_modules_where_it_is_built():
    proc = engine_process(
        ["-c", "import scheduling.engine.rr_sim as m, scheduling.engine as e; print(e.CORE, m.__file__)"],
        core="compiled",
    )
    assert proc.returncode == 0, proc.stderr
    core, path = proc.stdout.split()
    assert core == "compiled" and not path.endswith(".py")
    auto = engine_process(["-c", "import scheduling.engine as e; print(e.CORE)"], core="auto")
    assert auto.stdout.split() == ["compiled"], auto.stderr  # auto takes the compiled core where it is built


@pytest.mark.skipif(not BUILT, reason="the compiled core is not built (no C compiler?)")
@pytest.mark.parametrize(
    "scenario, policy, compat, days",
    [
        ("client_state", "boinc7", "bce", 2),
        ("client_state", "boinc7", "intended", 2),
        ("standard.json", "boinc5", "intended", 1),
        ("standard.json", "wrr", "bce", 1),
    ],
)
def test_both_cores_record_the_same_run_to_the_last_bit(scenario, policy, compat, days):
    args = ["-c", RUN_DIGEST, str(ROOT / "scenarios" / scenario), policy, compat, str(days * 86400.0)]
    python = engine_process(args, core="python")
    compiled = engine_process(args, core="compiled")
    assert python.returncode == 0 and compiled.returncode == 0, python.stderr + compiled.stderr
    assert python.stdout.split()[0] == "python" and compiled.stdout.split()[0] == "compiled"
    assert python.stdout.split()[1] == compiled.stdout.split()[1]


# half a run pickled by one core (a world's engine host between instants), the rest of it run
# by the other: the compiled core's JobState is a C type (state.pxd), pickled as its attributes
PIECES = """
import hashlib, json, pickle, sys
from scheduling.engine import CORE, load_scenario, run, start
step, scenario, state = sys.argv[1:]
sc = load_scenario(scenario)
day = 86400.0
if step == "dump":  # half the run, pickled; the digest is the whole run's in one go
    em = start(sc, duration=2 * day, seed=4, compat="bce")
    em.advance_to(day)
    with open(state, "wb") as fh:
        pickle.dump(em, fh)
    result = run(sc, duration=2 * day, seed=4, compat="bce")
else:  # the rest of it
    with open(state, "rb") as fh:
        em = pickle.load(fh)
    em.advance_to(2 * day)
    result = em.result()
d = result.to_dict()
d.pop("cpu_seconds")
print(CORE, hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest())
"""


@pytest.mark.skipif(not BUILT, reason="the compiled core is not built (no C compiler?)")
@pytest.mark.parametrize("first, second", [("compiled", "python"), ("python", "compiled")])
def test_a_run_pickled_by_one_core_goes_on_in_the_other_as_it_would_have(first, second, tmp_path):
    state = str(tmp_path / "em.pickle")
    scenario = str(ROOT / "scenarios" / "client_state")
    whole = engine_process(["-c", PIECES, "dump", scenario, state], core=first)
    rest = engine_process(["-c", PIECES, "load", scenario, state], core=second)
    assert whole.returncode == 0 and rest.returncode == 0, whole.stderr + rest.stderr
    assert (whole.stdout.split()[0], rest.stdout.split()[0]) == (first, second)
    assert rest.stdout.split()[1] == whole.stdout.split()[1]


def test_a_source_changed_since_it_was_compiled_makes_the_compiled_core_unusable(monkeypatch, tmp_path):
    sources = _core.compiled_sources()
    manifest = tmp_path / "_core_build.json"
    digests = {s: "0" * 64 for s in sources}
    manifest.write_text(json.dumps({"python": sys.implementation.cache_tag, "sources": digests}))
    monkeypatch.setattr(_core, "MANIFEST", str(manifest))
    monkeypatch.setattr(_core, "extension_path", lambda source: "/built/" + source)
    assert "changed since it was compiled" in (_core.unusable_reason() or "")
    digests = {s: _core.source_digest(s) for s in sources}
    manifest.write_text(json.dumps({"python": sys.implementation.cache_tag, "sources": digests}))
    assert _core.unusable_reason() is None
    manifest.write_text(json.dumps({"python": "cpython-00", "sources": digests}))
    assert "built for cpython-00" in (_core.unusable_reason() or "")
    manifest.write_text("{not json")
    assert "cannot be read" in (_core.unusable_reason() or "")
    manifest.unlink()
    assert "not built" in (_core.unusable_reason() or "")


def test_a_modules_c_declarations_count_as_its_source(monkeypatch, tmp_path):
    # rr_repick.pxd gives rr_repick.py its C types: a change to either is a change to the module
    monkeypatch.setattr(_core, "HERE", str(tmp_path))
    (tmp_path / "m.py").write_text("x = 1\n")
    alone = _core.source_digest("m.py")
    assert len(_core.source_stat("m.py")) == 2
    (tmp_path / "m.pxd").write_text("cdef int x\n")
    typed = _core.source_digest("m.py")
    assert typed != alone and len(_core.source_stat("m.py")) == 4
    (tmp_path / "m.pxd").write_text("cdef long x\n")
    assert _core.source_digest("m.py") != typed


def test_every_engine_module_is_compiled_but_the_ones_that_choose_build_or_parse_flags():
    sources = _core.compiled_sources()
    assert "rr_sim.py" in sources and "cpu_sched.py" in sources and os.path.join("policies", "boinc7.py") in sources
    assert "rr_repick.py" in sources and os.path.exists(os.path.join(_core.HERE, "rr_repick.pxd"))
    assert not {"__init__.py", "_core.py", "build.py", "__main__.py", "command.py"} & set(sources)


def test_a_missing_c_compiler_is_found_before_any_work(monkeypatch):
    monkeypatch.setenv("CC", "/bin/false")
    reason = compiler_failure()
    assert reason is not None and "/bin/false" in reason
    monkeypatch.delenv("CC")
    if any(os.access(os.path.join(d, "cc"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep)):
        assert compiler_failure() is None


def test_python_m_scheduling_engine_prints_what_manage_py_simulate_prints_without_django():
    flags = [STANDARD, "--duration", "1d", "--policy", "boinc5", "--compat", "bce", "--json"]
    code = (
        "import sys; from scheduling.engine.__main__ import main; rc = main(sys.argv[1:]); "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django imported'; sys.exit(rc)"
    )
    engine = engine_process(["-c", code, *flags])
    django = engine_process(["manage.py", "simulate", *flags])
    assert engine.returncode == 0 and django.returncode == 0, engine.stderr + django.stderr
    ours, theirs = json.loads(engine.stdout), json.loads(django.stdout)
    assert ours["core"] == theirs["core"] == ("compiled" if BUILT else "python")  # both on auto
    ours.pop("cpu_seconds"), theirs.pop("cpu_seconds")
    assert ours == theirs
    text = [STANDARD, "--duration", "6h"]
    assert (
        engine_process(["-m", "scheduling.engine", *text]).stdout
        == engine_process(["manage.py", "simulate", *text]).stdout
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope.json"], "no such file"),
        ([STANDARD, "--duration", "ten days"], "invalid duration"),
        ([STANDARD, "--delta", "0"], "--delta must be positive"),
        ([STANDARD, "--policy", "nonsense"], "invalid choice"),
    ],
)
def test_python_m_scheduling_engine_refuses_bad_input_in_one_line_with_code_2(args, message, tmp_path):
    out = tmp_path / "out"
    proc = engine_process(["-m", "scheduling.engine", *args, "--out", str(out)])
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not out.exists()


def test_python_m_scheduling_engine_starts_without_the_modules_it_does_not_use():
    # typing, inspect (with ast) and shutil were a fifth of the start-up (issue 33); a class
    # made later without a docstring is still described as dataclasses describes it
    code = (
        "import sys; from scheduling.engine.__main__ import main; rc = main(sys.argv[1:]); "
        "print(sorted(m for m in ('typing', 'inspect', 'ast', 'shutil') if m in sys.modules)); "
        "import dataclasses; X = dataclasses.make_dataclass('X', [('a', int)]); print(X.__doc__)"
    )
    proc = engine_process(["-c", code, STANDARD, "--duration", "60", "--json"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert json.loads(lines[0])["figures"]
    assert lines[1:] == ["[]", "X(a: int)"]
    helped = engine_process(["-m", "scheduling.engine", "--help"], more_env={"COLUMNS": "60"})
    assert helped.returncode == 0 and "without importing Django" in helped.stdout.replace("\n", " ")
    # wrapped at COLUMNS, as argparse wraps it (a usage group longer than a line stays whole)
    description = helped.stdout.split("\n\n")[1].splitlines()
    assert len(description) > 2 and max(len(line) for line in description) <= 58
