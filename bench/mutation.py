"""Mutation score of the server's rule code: how many single changes the test suite catches.

Mutates backend/daemons/*.py, locality scheduling (sched_locality.py) among them, one change
at a time: comparison boundaries and negations (``<`` to ``<=``, ``==`` to ``!=``), arithmetic
operators (``+=`` to ``-=``, ``*`` to ``/``), numeric and boolean constants, negated
conditions, ``and``/``or``, ``min``/``max``, keyword arguments dropped from ORM calls
(``filter(platform__in=...)``, ``update(outcome=...)``), writes to fields dropped
(``result.x = ...``, names dropped from ``update_fields``) and returned values replaced by
``None``. Each mutant runs only the tests that execute the changed lines, fastest first,
stopping at the first failure, with a timeout.

Which test executes which line comes from one run of the suite under coverage.py with a
context per test, kept in var/mutation/coverage-map.json; when test files change only those
files are run again; when a mutated file changes, its unchanged lines keep their tests and
changed ones take their neighbours' (``--remap`` makes the whole map again).

Mutants are written into temporary copies of the tree (one per job), never into the
worktree, with PYTHONDONTWRITEBYTECODE; each test run gets its own SQLite file and its own
embedded Redis (REDIS_URL is unset for them).

The survivors counted as equivalent (no test can tell them from the original) are listed with
the reason in bench/mutation_equivalents.toml, keyed by file, function, the source line and the
change, so the list survives edits that move lines.

    python bench/mutation.py [--sample N --seed S] [--files backend/daemons/sched_locality.py ...]
                             [--jobs J]

Prints the score (killed / mutants not counted as equivalent), the survivors (file:line, the
change) and the equivalent mutants with their reasons; exits 1 when the score is below
--fail-under (default 0, never).
"""

import argparse
import ast
import dataclasses
import glob
import hashlib
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ["backend/daemons/*.py"]
# The tests that can reach the daemons; tests/scheduling is the client and never imports them,
# tests/browser needs Chromium and drives the same pages tests/web does.
TEST_DIRS = ["tests/backend", "tests/world", "tests/protocol", "tests/web"]
# The whole-world simulations take minutes each (an hour under coverage on a busy machine) and
# check invariants rather than rules; they are left out of the map, so no mutant waits on them.
SIMULATIONS = {"tests/world/test_world.py", "tests/world/test_live.py"}
EQUIVALENTS = ROOT / "bench" / "mutation_equivalents.toml"
MAP_FILE = ROOT / "var" / "mutation" / "coverage-map.json"
# What is copied into each job's tree: the packages and what Django and pytest read.
TREE_SKIP = {
    ".git",
    ".venv",
    "var",
    "node_modules",
    ".pytest_cache",
    ".hypothesis",
    "__pycache__",
    "staticfiles",
    "docs",
}

# Keyword arguments of these calls are ORM filters or column writes; dropping one is a mutant.
ORM_CALLS = {
    "filter",
    "exclude",
    "get",
    "update",
    "create",
    "get_or_create",
    "update_or_create",
    "Q",
    "F",
    "bulk_update",
    "select_for_update",
}
LOG_CALLS = {"debug", "info", "warning", "error", "exception", "critical"}
COMPARE_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
ARITH_SWAP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}
SYMBOL = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.And: "and",
    ast.Or: "or",
}


@dataclasses.dataclass(frozen=True)
class Mutant:
    file: str  # relative to the tree
    function: str  # qualified name of the enclosing def, or "<module>"
    line: int  # first and last line of the replaced source
    end_line: int
    source_line: str  # the original line, stripped: with file, function and change, the key
    change: str  # what was done, e.g. "+= -> -="
    text: str  # the whole mutated file

    @property
    def key(self):
        return (self.file, self.function, self.source_line, self.change)

    @property
    def at_module_level(self):
        return self.function == "<module>" or self.function.endswith("<class body>")


# ---------------------------------------------------------------------------------------------
# Making mutants


def _offsets(source):
    """Offset of the start of each line (1-based line numbers index it), for slicing."""
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line.encode("utf-8"))
        starts.append(total)
    return starts


class _Collector(ast.NodeVisitor):
    """Walks one module and lists (node span, replacement text, change) for every mutation."""

    def __init__(self):
        self.edits = []  # (function, node, replacement, change)
        self.scope = []

    # -- scopes and what is never mutated --------------------------------------------------
    def _function(self):
        return ".".join(self.scope) if self.scope else "<module>"

    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(default)
        self._body(node.body)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.scope.append("<class body>")
        self._body(node.body)
        self.scope.pop()
        self.scope.pop()

    def _body(self, body):
        for index, statement in enumerate(body):
            if (
                index == 0
                and isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                continue  # docstring
            self.visit(statement)

    def visit_Module(self, node):
        self._body(node.body)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)

    def visit_Raise(self, node):
        pass  # what is raised is a message; the condition around it is mutated

    def visit_Assert(self, node):
        pass

    def visit_Import(self, node):
        pass

    visit_ImportFrom = visit_Import

    def visit_JoinedStr(self, node):
        pass  # f-strings: messages

    def visit_If(self, node):
        self._negate(node.test)
        self.generic_visit(node)

    def visit_While(self, node):
        self._negate(node.test)
        self.generic_visit(node)

    def visit_IfExp(self, node):
        self._negate(node.test)
        self.generic_visit(node)

    def visit_comprehension(self, node):
        for test in node.ifs:
            self._negate(test)
        self.generic_visit(node)

    def _negate(self, test):
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return  # the Not itself is removed by visit_UnaryOp
        self.add(test, f"not ({ast.unparse(test)})", "condition negated")

    # -- mutations ---------------------------------------------------------------------------
    def add(self, node, replacement, change):
        self.edits.append((self._function(), node, replacement, change))

    def visit_Compare(self, node):
        for index, op in enumerate(node.ops):
            swapped = COMPARE_SWAP.get(type(op))
            if swapped is None:
                continue
            mutated = ast.Compare(
                left=node.left, comparators=node.comparators, ops=[*node.ops[:index], swapped(), *node.ops[index + 1 :]]
            )
            self.add(node, f"({ast.unparse(mutated)})", f"{SYMBOL[type(op)]} -> {SYMBOL[swapped]}")
        self.generic_visit(node)

    def visit_BinOp(self, node):
        swapped = ARITH_SWAP.get(type(node.op))
        if swapped is not None:
            mutated = ast.BinOp(left=node.left, op=swapped(), right=node.right)
            self.add(node, f"({ast.unparse(mutated)})", f"{SYMBOL[type(node.op)]} -> {SYMBOL[swapped]}")
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        swapped = ARITH_SWAP.get(type(node.op))
        if swapped is not None:
            mutated = ast.AugAssign(target=node.target, op=swapped(), value=node.value)
            self.add(node, ast.unparse(mutated), f"{SYMBOL[type(node.op)]}= -> {SYMBOL[swapped]}=")
        if isinstance(node.target, ast.Attribute):
            self.add(node, "pass", f"write to .{node.target.attr} dropped")
        self.visit(node.value)

    def visit_BoolOp(self, node):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        mutated = ast.BoolOp(op=other(), values=node.values)
        self.add(node, f"({ast.unparse(mutated)})", f"{SYMBOL[type(node.op)]} -> {SYMBOL[other]}")
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            self.add(node, f"({ast.unparse(node.operand)})", "not removed")
        self.generic_visit(node)

    def visit_Constant(self, node):
        value = node.value
        if isinstance(value, bool):
            self.add(node, repr(not value), f"{value} -> {not value}")
        elif isinstance(value, int):
            self.add(node, repr(value + 1), f"{value} -> {value + 1}")
        elif isinstance(value, float):
            new = 1.0 if value == 0 else value * 2
            self.add(node, repr(new), f"{value!r} -> {new!r}")

    def visit_Assign(self, node):
        if any(isinstance(target, ast.Attribute) for target in node.targets):
            names = ", ".join(t.attr for t in node.targets if isinstance(t, ast.Attribute))
            self.add(node, "pass", f"write to .{names} dropped")
        self.visit(node.value)

    def visit_Return(self, node):
        if node.value is not None and not isinstance(node.value, ast.Constant):
            self.add(node.value, "None", "returns None")
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in LOG_CALLS and isinstance(func, ast.Attribute):
            return
        if name in ("min", "max") and isinstance(func, ast.Name):
            self.add(func, "max" if name == "min" else "min", f"{name} -> {'max' if name == 'min' else 'min'}")
        for keyword in node.keywords:
            if keyword.arg is None:
                continue
            if name in ORM_CALLS:
                self.add(keyword, "**{}", f"{name}({keyword.arg}=...) dropped")
            if (
                keyword.arg in ("update_fields", "fields")
                and isinstance(keyword.value, (ast.List, ast.Tuple))
                and len(keyword.value.elts) > 1
            ):
                for index, element in enumerate(keyword.value.elts):
                    if isinstance(element, ast.Constant):
                        kept = [*keyword.value.elts[:index], *keyword.value.elts[index + 1 :]]
                        self.add(
                            keyword.value,
                            ast.unparse(ast.List(elts=kept)),
                            f"write to {element.value!r} dropped from {keyword.arg}",
                        )
        self.generic_visit(node)


def mutants_of(path, tree_root=ROOT):
    """Every single-change mutant of one file, each compiled once to drop invalid ones."""
    relative = str(Path(path).resolve().relative_to(tree_root))
    source = Path(path).read_text()
    data = source.encode("utf-8")
    starts = _offsets(source)
    lines = source.splitlines()
    collector = _Collector()
    collector.visit(ast.parse(source))
    seen, found = {source}, []
    occurrences = {}
    for function, node, replacement, change in collector.edits:
        begin = starts[node.lineno] + node.col_offset
        end = starts[node.end_lineno] + node.end_col_offset
        text = (data[:begin] + replacement.encode("utf-8") + data[end:]).decode("utf-8")
        if text in seen:
            continue
        try:
            compile(text, relative, "exec")
        except SyntaxError:
            continue
        seen.add(text)
        source_line = lines[node.lineno - 1].strip()
        # The same change on the same text twice in one function: number the later ones.
        base = (relative, function, source_line, change)
        occurrences[base] = occurrences.get(base, 0) + 1
        if occurrences[base] > 1:
            change = f"{change} #{occurrences[base]}"
        found.append(Mutant(relative, function, node.lineno, node.end_lineno, source_line, change, text))
    return found


# ---------------------------------------------------------------------------------------------
# Trees, coverage map, runs

CONTEXT_PLUGIN = """
import json, os, time
import coverage
import pytest

_records = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(item.nodeid)
    started = time.perf_counter()
    yield
    _records.setdefault(item.nodeid, {"passed": True})["seconds"] = time.perf_counter() - started
    if cov is not None:
        cov.switch_context("")


def pytest_runtest_logreport(report):
    record = _records.setdefault(report.nodeid, {"passed": True})
    if report.failed:
        record["passed"] = False


def pytest_sessionfinish(session):
    with open(os.environ["MUTATION_RECORD"], "w") as out:
        json.dump(_records, out)
"""


def copy_tree(destination):
    def ignore(folder, names):
        return [name for name in names if name in TREE_SKIP or name.endswith(".pyc")]

    shutil.copytree(ROOT, destination, ignore=ignore, symlinks=True)
    (Path(destination) / "var").mkdir(exist_ok=True)


def target_files(patterns):
    files = []
    for pattern in patterns:
        matched = sorted(glob.glob(str(ROOT / pattern)))
        if not matched:
            raise SystemExit(f"mutation: no file matches {pattern!r}")
        files += [str(Path(f).relative_to(ROOT)) for f in matched]
    return sorted(set(files))


def _digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_files():
    found = []
    for folder in TEST_DIRS:
        found += sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("test_*.py"))
    return [f for f in found if f not in SIMULATIONS]


def support_files():
    """What every test depends on besides its own file: conftests and helper modules."""
    found = [
        p for folder in ["tests", *TEST_DIRS] for p in (ROOT / folder).glob("*.py") if not p.name.startswith("test_")
    ]
    return sorted(set(str(p.relative_to(ROOT)) for p in found))


def _test_env(tree):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "COVERAGE_PROCESS_START")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = str(tree)
    return env


def _run_coverage(tree, targets, tests, log):
    """Runs ``tests`` in ``tree`` under coverage with a context per test; returns
    ({file: {line: [nodeid]}}, {nodeid: {"seconds", "passed"}})."""
    import coverage

    work = Path(tempfile.mkdtemp(prefix="mutation-cov-"))
    try:
        (work / "mutation_contexts.py").write_text(CONTEXT_PLUGIN)
        rc = work / "coveragerc"
        rc.write_text(
            "[run]\ndata_file = {}\ninclude =\n{}\n".format(
                work / "data", "".join(f"    {tree}/{t}\n" for t in targets)
            )
        )
        env = _test_env(tree)
        env["PYTHONPATH"] = f"{work}:{tree}"
        env["MUTATION_RECORD"] = str(work / "records.json")
        command = [
            sys.executable,
            "-m",
            "coverage",
            "run",
            f"--rcfile={rc}",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "mutation_contexts",
            "--nomigrations",
            "-m",
            "not browser and not real_client",
            *tests,
        ]
        MAP_FILE.parent.mkdir(parents=True, exist_ok=True)
        output = MAP_FILE.with_name("coverage-run.log")
        log(
            f"coverage map: running {len(tests)} test files under coverage (output in "
            f"{output.relative_to(ROOT)}; later runs reuse the map)"
        )
        with output.open("w") as out:
            subprocess.run(command, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)
        records = json.loads((work / "records.json").read_text())
        data = coverage.CoverageData(basename=str(work / "data"))
        data.read()
        lines = {}
        for target in targets:
            by_line = data.contexts_by_lineno(str(Path(tree) / target))
            lines[target] = {str(n): sorted(c for c in ctx) for n, ctx in by_line.items()}
        return lines, records
    finally:
        shutil.rmtree(work, ignore_errors=True)


def carry_over(by_line, old_source, new_source):
    """The line-to-tests map of ``old_source`` moved onto ``new_source`` (a small fix to a
    mutated file): unchanged lines keep their tests, changed and added lines get those of the
    lines they replace and of their neighbours. ``--remap`` makes it exact again."""
    import difflib

    old_lines, new_lines = old_source.splitlines(), new_source.splitlines()
    moved = {}
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(a1 - a0):
                if str(a0 + offset + 1) in by_line:
                    moved[str(b0 + offset + 1)] = by_line[str(a0 + offset + 1)]
        elif b1 > b0:
            near = set()
            for n in range(a0, a1 + 2):  # the replaced lines and one either side (1-based)
                near |= set(by_line.get(str(n), []))
            for n in range(b0 + 1, b1 + 1):
                moved[str(n)] = sorted(near)
    return moved


def coverage_map(tree, targets, log, force=False):
    """Loads the line-to-tests map, refreshing what changed since it was made."""
    tests = test_files()
    sources = {t: (ROOT / t).read_text() for t in targets}
    test_hashes = {t: _digest(ROOT / t) for t in tests}
    support_hash = hashlib.sha256("".join(_digest(ROOT / f) for f in support_files()).encode()).hexdigest()
    old = None
    if MAP_FILE.exists() and not force:
        old = json.loads(MAP_FILE.read_text())
        if old.get("support") != support_hash or set(old.get("sources", {})) != set(targets):
            old = None
    if old is None:
        lines, records = _run_coverage(tree, targets, tests, log)
    else:
        stale = [t for t in tests if old["tests"].get(t) != test_hashes[t]]
        gone = set(old["tests"]) - set(tests)
        drop = set(stale) | gone
        keep = lambda nodeid: nodeid.split("::")[0] not in drop  # noqa: E731
        lines = {}
        for target, by_line in old["lines"].items():
            if old["sources"][target] != sources[target]:
                log(f"coverage map: {target} changed; its lines' tests carried over")
                by_line = carry_over(by_line, old["sources"][target], sources[target])
            lines[target] = {n: [c for c in ctx if keep(c)] for n, ctx in by_line.items()}
        records = {n: r for n, r in old["records"].items() if keep(n)}
        if stale:
            new_lines, new_records = _run_coverage(tree, targets, stale, log)
            for target, by_line in new_lines.items():
                for n, ctx in by_line.items():
                    lines[target].setdefault(n, [])
                    lines[target][n] = sorted(set(lines[target][n]) | set(ctx))
            records.update(new_records)
    MAP_FILE.parent.mkdir(parents=True, exist_ok=True)
    MAP_FILE.write_text(
        json.dumps(
            {"sources": sources, "tests": test_hashes, "support": support_hash, "lines": lines, "records": records}
        )
    )
    return lines, records


def tests_for(mutant, lines, records, limit=0):
    """The passing tests that execute the mutated lines, fastest first. A line run only at
    import time (module constants, class bodies, defaults) is reached by every test that runs
    any line of the file."""
    by_line = lines.get(mutant.file, {})
    found = set()
    for n in range(mutant.line, mutant.end_line + 1):
        found |= {c for c in by_line.get(str(n), []) if c}
    if not found and (
        mutant.at_module_level or any(by_line.get(str(n)) == [""] for n in range(mutant.line, mutant.end_line + 1))
    ):
        found = {c for ctx in by_line.values() for c in ctx if c}
    found = {t for t in found if t.split("::")[0] not in SIMULATIONS}
    passing = [t for t in found if records.get(t, {}).get("passed", True)]
    ordered = sorted(passing, key=lambda t: (seconds(records, t), t))
    if limit and len(ordered) > limit:
        # the tests most likely to pin this file's rules first: the rule tests, those named
        # after it, the back end's, then the fastest of the rest
        stem = Path(mutant.file).stem.split("_")[0]  # sched_send: test_scheduler*, too
        ordered.sort(
            key=lambda t: (
                "test_rules_" not in t and "test_boinc_rules" not in t,
                stem not in t.split("::")[0],
                not t.startswith("tests/backend/"),
            )
        )
        ordered = ordered[:limit]
    return ordered


def seconds(records, test):
    """How long ``test`` took in the coverage run (a second when it was not timed)."""
    return records.get(test, {}).get("seconds", 1.0)


def run_mutant(tree, mutant, tests, timeout):
    """'killed', 'timeout', 'survived' or 'error: ...' for one mutant in ``tree``."""
    path = Path(tree) / mutant.file
    original = path.read_text()
    path.write_text(mutant.text)
    try:
        command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--nomigrations", *tests]
        process = subprocess.Popen(
            command,
            cwd=tree,
            env=_test_env(tree),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return "timeout", ""
        code = process.returncode
        text = output.decode(errors="replace")
        if code == 0:
            return "survived", ""
        if code in (1, 2, 3):
            failed = [
                line.split()[1]
                for line in text.splitlines()
                if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1
            ]
            return "killed", failed[0] if failed else ""
        collecting = re.findall(r"ERROR collecting (\S+)", text)
        if code == 4 and collecting:
            # the mutant broke a test module's import (a parametrize list built at import): the
            # module's tests cannot run, and `make test` fails on it
            return "killed", collecting[0]
        return f"error: pytest exit {code}", text[-2000:]
    finally:
        path.write_text(original)


def common_mutants(mutants, targets, revision):
    """``mutants`` whose key the same files at git ``revision`` also give, sorted by key.

    Two trees (a revision before a change to the tests and one after) mutate slightly
    different daemon files; sampling from what both have, in an order that does not depend on
    line numbers, gives both the same mutants to run.
    """
    keys = set()
    with tempfile.TemporaryDirectory(prefix="mutation-rev-") as scratch:
        for target in targets:
            shown = subprocess.run(["git", "show", f"{revision}:{target}"], cwd=ROOT, capture_output=True)
            if shown.returncode != 0:
                if b"does not exist" in shown.stderr or b"exists on disk, but not in" in shown.stderr:
                    continue  # a file this revision does not have: none of its mutants are common
                raise subprocess.CalledProcessError(shown.returncode, shown.args, stderr=shown.stderr)
            copy = Path(scratch) / target
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(shown.stdout)
            keys |= {m.key for m in mutants_of(copy, tree_root=Path(scratch).resolve())}
    return sorted((m for m in mutants if m.key in keys), key=lambda m: m.key)


def load_equivalents():
    if not EQUIVALENTS.exists():
        return {}
    entries = tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])
    return {(e["file"], e["function"], e["line"], e["change"]): e["reason"] for e in entries}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--files",
        nargs="+",
        default=TARGETS,
        help="files or globs to mutate, relative to the tree (default: %(default)s)",
    )
    parser.add_argument("--sample", type=int, default=0, help="a random sample of N mutants")
    parser.add_argument("--seed", type=int, default=1, help="the sample's seed")
    parser.add_argument(
        "--common-with",
        metavar="REV",
        help="only the mutants that git revision REV's files have too (same file, function, "
        "source line and change), in key order: run in two trees, the same sample in both",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=max(1, (os.cpu_count() or 2) // 2),
        help="mutants run at once, each in its own tree (default: %(default)s)",
    )
    parser.add_argument(
        "--timeout-factor",
        type=float,
        default=3.0,
        help="a mutant's tests may take this many times their time unmutated, "
        "plus 60 s, before it counts as killed by timeout",
    )
    parser.add_argument(
        "--max-tests",
        type=int,
        default=0,
        metavar="N",
        help="run at most N of the tests covering a mutant (the rule tests "
        "and those named after its file first): faster, and the score a lower "
        "bound (default: all)",
    )
    parser.add_argument("--remap", action="store_true", help="make the coverage map again")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--json", metavar="PATH", help="also write every outcome to PATH")
    parser.add_argument(
        "--survivors-of", metavar="PATH", help="run only the mutants a previous --json output lists as surviving"
    )
    parser.add_argument(
        "--summary-of",
        metavar="PATH",
        help="run nothing: print the summary of a previous --json output with the current list of equivalent mutants",
    )
    parser.add_argument("--fail-under", type=float, default=0.0, metavar="PERCENT")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.sample < 0 or args.max_tests < 0:
        parser.error("--jobs must be at least 1, --sample and --max-tests at least 0")

    started = time.monotonic()
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    targets = target_files(args.files)
    mutants = [m for target in targets for m in mutants_of(ROOT / target)]
    if args.common_with:
        try:
            mutants = common_mutants(mutants, targets, args.common_with)
        except subprocess.CalledProcessError as exc:
            parser.error(f"--common-with {args.common_with}: {exc.stderr.decode(errors='replace').strip()}")
    total = len(mutants)
    if args.sample and args.sample < total:
        mutants = random.Random(args.seed).sample(mutants, args.sample)
        mutants.sort(key=lambda m: (m.file, m.line, m.change))
    earlier = {}
    if args.survivors_of or args.summary_of:
        source = args.survivors_of or args.summary_of
        try:
            previous = json.loads(Path(source).read_text())
            earlier = {(m["file"], m["function"], m["source_line"], m["change"]): m["outcome"] for m in previous}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"{source}: not a --json output of bench/mutation.py ({exc})")
        # the earlier run's mutants again: those it killed stay killed (tests are only ever
        # added), the others run again; a mutant whose line was since edited is gone
        mutants = [m for m in mutants if m.key in earlier]
        total = len(mutants)
    if args.list:
        for m in mutants:
            print(f"{m.file}:{m.line}  {m.function}  {m.change}  | {m.source_line}")
        print(f"{len(mutants)} of {total} mutants")
        return 0

    equivalents = load_equivalents()
    if args.summary_of:
        # no runs: the outcomes of an earlier --json output, with today's equivalents list
        outcomes = {m: (earlier[m.key], 0, "") for m in mutants}
    else:
        outcomes = run_all(args, mutants, earlier if args.survivors_of else {}, log)
    return report(args, mutants, total, outcomes, equivalents, started)


def run_all(args, mutants, earlier, log):
    """Run ``mutants`` (those ``earlier`` killed count as killed); returns their outcomes."""
    every_target = (
        target_files(TARGETS)
        if args.files == TARGETS
        else sorted(set(target_files(TARGETS)) | set(target_files(args.files)))
    )
    base = Path(tempfile.mkdtemp(prefix="mutation-"))
    try:
        trees = []
        for index in range(args.jobs):
            tree = base / f"tree{index}"
            copy_tree(tree)
            trees.append(tree)
        lines, records = coverage_map(trees[0], every_target, log, force=args.remap)

        outcomes = {}
        work = queue.Queue()
        for m in mutants:
            if earlier.get(m.key) in ("killed", "timeout"):
                outcomes[m] = (earlier[m.key], 0, "an earlier run")
            else:
                work.put(m)
        lock = threading.Lock()
        done = [0]

        def worker(tree):
            while True:
                try:
                    m = work.get_nowait()
                except queue.Empty:
                    return
                tests = tests_for(m, lines, records, args.max_tests)
                if not tests:
                    outcome, detail = "not covered", ""
                else:
                    budget = sum(seconds(records, t) for t in tests)
                    outcome, detail = run_mutant(tree, m, tests, 60 + args.timeout_factor * budget)
                with lock:
                    outcomes[m] = (outcome, len(tests), detail)
                    done[0] += 1
                    log(f"[{done[0]}/{len(mutants)}] {outcome:11} {m.file}:{m.line} {m.change}")

        threads = [threading.Thread(target=worker, args=(t,)) for t in trees]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # A test that fails without any mutant kills nothing: run the tests that killed
        # mutants once on the unmutated tree and count those mutants as errors instead.
        killers = sorted(
            {
                detail
                for outcome, _, detail in outcomes.values()
                if outcome == "killed" and ("::" in detail or detail.endswith(".py"))
            }
        )
        if killers:
            log(f"checking the {len(killers)} tests that killed mutants on the unmutated tree")
            check = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nomigrations", *killers],
                cwd=trees[0],
                env=_test_env(trees[0]),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            broken = {
                line.split()[1]
                for line in check.stdout.decode(errors="replace").splitlines()
                if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1
            }
            for m, (outcome, count, detail) in list(outcomes.items()):
                if outcome == "killed" and detail in broken:
                    outcomes[m] = (f"error: killed only by {detail}, which fails unmutated", count, "")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return outcomes


def report(args, mutants, total, outcomes, equivalents, started):
    """Print the score, the survivors and the equivalent mutants (and --json)."""
    killed = [m for m in mutants if outcomes[m][0] in ("killed", "timeout")]
    errors = [m for m in mutants if outcomes[m][0].startswith("error")]
    alive = [m for m in mutants if outcomes[m][0] in ("survived", "not covered")]
    equivalent = [m for m in alive if m.key in equivalents]
    survivors = [m for m in alive if m.key not in equivalents]
    unused = set(equivalents) - {m.key for m in mutants}
    counted = len(mutants) - len(equivalent) - len(errors)
    score = 100.0 * len(killed) / counted if counted else 100.0

    chosen = (
        f" (those of {args.survivors_of}; its survivors run again)"
        if args.survivors_of
        else f" (a sample of {total}, seed {args.seed})"
        if len(mutants) < total
        else ""
    )
    print(f"mutants: {len(mutants)}{chosen}")
    if args.max_tests:
        print(f"each run against at most {args.max_tests} of the tests covering it: the score is a lower bound")
    print(
        f"killed: {len(killed)} (timeouts {sum(outcomes[m][0] == 'timeout' for m in killed)})"
        f"  survived: {len(survivors)}  equivalent: {len(equivalent)}"
        f"  errors: {len(errors)}"
    )
    print(f"score: {score:.1f} % of {counted} non-equivalent mutants killed")
    if survivors:
        print("\nsurvivors:")
        for m in survivors:
            note = " (no test runs this line)" if outcomes[m][0] == "not covered" else ""
            print(f"  {m.file}:{m.line}  {m.function}: {m.change}{note}\n      {m.source_line}")
    if equivalent:
        print("\nequivalent (bench/mutation_equivalents.toml):")
        for m in equivalent:
            print(
                f"  {m.file}:{m.line}  {m.function}: {m.change}\n      {m.source_line}\n"
                f"      because {equivalents[m.key]}"
            )
    if errors:
        print("\nerrors (not counted):")
        for m in errors:
            print(f"  {m.file}:{m.line}  {m.change}: {outcomes[m][0]}\n{outcomes[m][2]}")
    if unused and len(mutants) == total and not args.sample and not args.survivors_of:
        print(f"\n{len(unused)} entries of bench/mutation_equivalents.toml match no mutant:")
        for key in sorted(unused):
            print(f"  {key}")
    load = os.getloadavg()
    print(
        f"\ntime: {time.monotonic() - started:.0f} s, jobs {args.jobs}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    {
                        "file": m.file,
                        "line": m.line,
                        "function": m.function,
                        "change": m.change,
                        "source_line": m.source_line,
                        "outcome": outcomes[m][0],
                        "tests": outcomes[m][1],
                        "equivalent": m.key in equivalents,
                        "detail": outcomes[m][2][:300],
                    }
                    for m in mutants
                ],
                indent=1,
            )
        )
    return 1 if score < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
