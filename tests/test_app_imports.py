"""The project's apps import one another without a cycle (DESIGN.md's layout: world ->
backend, world -> scheduling.engine, protocol -> backend; backend never imports world,
protocol or scheduling).

Every ``import`` statement of every Python file of the apps counts, at module level or inside
a function, ``import x`` and ``from x import y``, relative ones resolved against the file's
package: an import hidden in a function is still an arrow between the apps.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("boincweb", "scheduling", "backend", "world", "protocol")
# boincweb is the project package, not an app: its settings, urls and cron import the apps, and
# the apps use its site-wide modules (htmx, figures, env, ...). Each of its modules is therefore
# a node of its own, so an app may use a module of it that imports no app back.
PROJECT = "boincweb"


def module_of(path):
    """``backend.daemons.sched_send`` for ``ROOT/backend/daemons/sched_send.py``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path):
    """``(line number, imported module's dotted name)`` for each import of the file."""
    module = module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            # ``from backend import models`` names backend.models: the app is the same either
            # way, so the first part is all that counts
            yield node.lineno, base


def app_of(module):
    top = module.partition(".")[0]
    if top == PROJECT:
        return ".".join(module.split(".")[:2])
    return top if top in APPS else None


def app_graph():
    """{(importing app, imported app): "path:line: the import" of one import that draws the
    edge}."""
    edges = {}
    for top in APPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            app = app_of(module_of(path))
            lines = path.read_text().splitlines()
            for lineno, name in imported_modules(path):
                target = app_of(name)
                if target is not None and target != app and (app, target) not in edges:
                    edges[app, target] = f"{path.relative_to(ROOT)}:{lineno}: {lines[lineno - 1].strip()}"
    return edges


def find_cycle(edges):
    """One cycle of the graph as a list of apps [a, b, ..., a], or None."""
    successors = {}
    for source, target in sorted(edges):
        successors.setdefault(source, []).append(target)
    state = {}  # app -> "open" while on the depth-first path, "done" after

    def visit(app, path):
        state[app] = "open"
        path.append(app)
        for target in successors.get(app, ()):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target, path)
                if cycle:
                    return cycle
        path.pop()
        state[app] = "done"
        return None

    for app in sorted(successors):
        if app not in state:
            cycle = visit(app, [])
            if cycle:
                return cycle
    return None


def describe(cycle, edges):
    lines = [" -> ".join(cycle)]
    for source, target in zip(cycle, cycle[1:]):
        lines.append(f"  {source} -> {target}: {edges[source, target]}")
    return "\n".join(lines)


def test_the_apps_import_one_another_without_a_cycle():
    edges = app_graph()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle between apps:\n" + describe(cycle, edges)


def test_an_import_inside_a_function_and_a_relative_one_are_both_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "world").mkdir()
    (tmp_path / "world" / "__init__.py").write_text("")
    (tmp_path / "world" / "a.py").write_text("from . import b\n")
    (tmp_path / "backend").mkdir()
    (tmp_path / "backend" / "__init__.py").write_text("")
    (tmp_path / "backend" / "c.py").write_text("def f():\n    from world.a import x\n    import protocol.views\n")
    assert list(imported_modules(tmp_path / "world" / "a.py")) == [(1, "world")]
    assert list(imported_modules(tmp_path / "backend" / "c.py")) == [(2, "world.a"), (3, "protocol.views")]
    edges = {("backend", "world"): "backend/c.py:2", ("world", "backend"): "world/a.py:1"}
    cycle = find_cycle(edges)
    assert cycle == ["backend", "world", "backend"]
    assert describe(cycle, edges) == (
        "backend -> world -> backend\n  backend -> world: backend/c.py:2\n  world -> backend: world/a.py:1"
    )


def test_a_module_of_the_project_package_is_a_node_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    for package in ("boincweb", "backend"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "boincweb" / "cron.py").write_text("from backend.jobs import run_all\n")
    (tmp_path / "boincweb" / "htmx.py").write_text("import django\n")
    (tmp_path / "backend" / "views.py").write_text("from boincweb.htmx import render_page\n")
    assert find_cycle(app_graph()) is None  # backend -> boincweb.htmx, boincweb.cron -> backend
    (tmp_path / "boincweb" / "htmx.py").write_text("from backend import models\n")
    assert find_cycle(app_graph()) == ["backend", "boincweb.htmx", "backend"]
