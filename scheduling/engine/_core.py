"""Which core runs the engine: the compiled one or the pure-Python one.

The compiled core is the engine's own modules compiled by Cython (scheduling/engine/build.py,
run by `make install`) into extension modules beside their sources. The sources stay the
only code: a compiled module is the same source, so both cores make the same decisions to
the last bit (bench/engine_identity.py compares them). Where the core cannot be built (no C
compiler, no Cython) or is out of date with its sources, the pure-Python modules run.

`BOINCWEB_ENGINE_CORE` chooses:

- unset, empty or "auto": the compiled core when it is built and up to date, else Python;
- "compiled": the compiled core, or ImportError saying why it cannot be used;
- "python": the pure-Python modules, even when the compiled ones are built.

Any other value is refused (ValueError naming the variable and the choices). This module is
imported by the package before any other engine module, since the choice is made by how the
package's modules are found; it is never compiled itself.
"""

from __future__ import annotations

import importlib.machinery as machinery
import json
import os
import sys
import types

ENV = "BOINCWEB_ENGINE_CORE"
CHOICES = ("auto", "compiled", "python")
HERE = os.path.dirname(os.path.abspath(__file__))
# what build.py wrote: the SHA-256 of each compiled module's source when it was compiled, and
# its size and modification time then (a source whose size and time are the same is not read)
MANIFEST = os.path.join(HERE, "_core_build.json")
# every module of the package but the package files, the modules that choose or build the
# core, and the command line
NOT_COMPILED = ("__init__.py", "__main__.py", "_core.py", "build.py", "command.py")


def compiled_sources() -> list[str]:
    """The engine's sources that the compiled core compiles, relative to this directory."""
    out = []
    for sub in ("", "policies"):
        folder = os.path.join(HERE, sub)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py") and name not in NOT_COMPILED:
                out.append(os.path.join(sub, name) if sub else name)
    return out


def module_name(source: str) -> str:
    """scheduling.engine's dotted name of a source path relative to this directory."""
    return __package__ + "." + source[: -len(".py")].replace(os.sep, ".")


def _declarations(source: str) -> str:
    """The .pxd that gives a source's C types (build.py), compiled with it when it exists."""
    return os.path.join(HERE, source[: -len(".py")] + ".pxd")


def source_digest(source: str) -> str:
    """SHA-256 of a source, and of its .pxd after it when it has one."""
    import hashlib

    digest = hashlib.sha256()
    for path in (os.path.join(HERE, source), _declarations(source)):
        if path.endswith(".py") or os.path.exists(path):
            with open(path, "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()


def source_stat(source: str) -> list[int]:
    """[size, modification time in ns] of a source (and of its .pxd after it when it has
    one), which build.py records beside its digest."""
    out = []
    for path in (os.path.join(HERE, source), _declarations(source)):
        if path.endswith(".py") or os.path.exists(path):
            st = os.stat(path)
            out += [st.st_size, st.st_mtime_ns]
    return out


def extension_path(source: str) -> str | None:
    """The built extension module of a source, if there is one for this interpreter."""
    stem = os.path.join(HERE, source[: -len(".py")])
    for suffix in machinery.EXTENSION_SUFFIXES:
        if os.path.isfile(stem + suffix):
            return stem + suffix
    return None


def unusable_reason() -> str | None:
    """Why the compiled core cannot run here, or None when it is built and up to date."""
    try:
        with open(MANIFEST) as fh:
            built = json.load(fh)
    except FileNotFoundError:
        return "it is not built (make install builds it; it needs a C compiler)"
    except (OSError, ValueError) as exc:
        return f"its build record {MANIFEST} cannot be read ({exc})"
    if not isinstance(built, dict) or not isinstance(built.get("sources"), dict):
        return f"its build record {MANIFEST} is not one that build.py writes"
    if built.get("python") != sys.implementation.cache_tag:
        return f"it was built for {built.get('python')}, not {sys.implementation.cache_tag}"
    recorded = built["sources"]
    stats = built["stats"] if isinstance(built.get("stats"), dict) else {}
    for source in compiled_sources():
        if source not in recorded:
            return f"{source} was not compiled (make install compiles it)"
        if extension_path(source) is None:
            return f"the extension module of {source} is missing"
        if stats.get(source) != source_stat(source) and recorded[source] != source_digest(source):
            return f"{source} changed since it was compiled (make install compiles it again)"
    return None


def requested() -> str:
    """The core BOINCWEB_ENGINE_CORE asks for; ValueError for a value that is not a choice."""
    value = os.environ.get(ENV, "").strip() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={value!r}: expected one of {', '.join(CHOICES)} (or unset for auto)")
    return value


def _python_only() -> None:
    """Find the package's modules from their sources only: a finder for each of its folders
    without the extension-module loader, in the cache the import system asks first."""
    finder = machinery.FileFinder
    loaders = (
        (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES),
        (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES),
    )
    for folder in (HERE, os.path.join(HERE, "policies")):
        sys.path_importer_cache[folder] = finder(folder, *loaders)


def select() -> str:
    """Choose the core before the package imports its modules; 'compiled' or 'python'."""
    want = requested()
    if want == "python":
        _python_only()
        return "python"
    reason = unusable_reason()
    if reason is None:
        return "compiled"
    if want == "compiled":
        raise ImportError(f"{ENV}=compiled, but the engine's compiled core cannot run: {reason}")
    _python_only()
    return "python"


def loaded() -> str:
    """Which core the imported modules are: 'compiled' when every compiled module came from
    its extension module, 'python' when none did; ImportError for a mixture."""
    kinds = set()
    for source in compiled_sources():
        module = sys.modules.get(module_name(source))
        if module is None:
            continue
        path = getattr(module, "__file__", "") or ""
        kinds.add("python" if path.endswith(".py") or path.endswith(".pyc") else "compiled")
    if len(kinds) > 1:
        raise ImportError("the engine's modules are a mixture of compiled and Python ones: run make install again")
    return kinds.pop() if kinds else "python"


class _DeferredInspect(types.ModuleType):
    """What `dataclasses` gets for `inspect` when `import_dataclasses` imports it: the real
    module is imported at the first attribute asked of it."""

    def __getattr__(self, name):
        real = sys.modules.get("inspect")
        if real is None or real is self:
            sys.modules.pop("inspect", None)
            import inspect as real
        return getattr(real, name)


def import_dataclasses() -> None:
    """Import `dataclasses` without `inspect`, in a process that has imported neither.

    `dataclasses` imports `inspect` (and with it `ast`, `dis` and `tokenize`) only to write
    a signature into a class that has no docstring, which none of the engine's lacks; that
    import was about 30 M instructions, a ninth of `python -m scheduling.engine`'s
    start-up (issue 33). `dataclasses` gets a stand-in that imports the real module at its
    first use; every other importer of `inspect` gets the real module.
    """
    if "dataclasses" in sys.modules or "inspect" in sys.modules:
        return
    sys.modules["inspect"] = _DeferredInspect("inspect")
    try:
        import dataclasses  # noqa: F401
    finally:
        del sys.modules["inspect"]
