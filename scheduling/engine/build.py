"""Builds the engine's compiled core: `python -m scheduling.engine.build` (`make install` runs it).

Each engine module (`_core.compiled_sources()`) is compiled by Cython into an extension
module beside its source, with the C compiler Python's own build used (CC and CFLAGS as
setuptools reads them), and `_core_build.json` records the SHA-256 of every source
compiled, so that a source changed since is noticed and the pure-Python modules run instead
(_core.py). The generated C and the object files go to var/build/engine-core.

Nothing is built when the record matches the sources already. When Cython is missing or the
compiler fails, the build says so, removes what an earlier build left, and exits 0: the
engine then runs on its pure-Python core, with the same results (`--strict` exits 1 instead).
Either way the package's bytecode is written first (`byte_compile`).

Why Cython: its compiler and setuptools come from PyPI through `pip install`, and it needs
only the system's C compiler; it compiles the engine's Python itself, so there is no second
implementation to keep in step, and Python semantics (exceptions, float arithmetic, ordering
of ties) are kept, which is what makes the two cores' decisions identical. Where the
interpreter's objects cost most (the round-robin simulations, the scheduler's picks), a module
keeps its numbers in `array.array` columns and a .pxd beside it gives them and the loops'
locals C types (rr_queue.py, rr_repick.py, rr_priority.py and cpu_sched.py); state.pxd makes
JobState a C type whose attributes typed code reads from its structure (used by those and by
accounting.pxd, rr_sim.pxd, work_fetch.pxd and policies/boinc7.pxd; rec.pxd makes
compute_priority a C function): still one source, run as Python without a compiler.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import importlib.machinery as machinery
import json
import os
import shutil
import sys
import tempfile
import time

from . import _core

ROOT = os.path.dirname(os.path.dirname(_core.HERE))
BUILD_DIR = os.path.join(ROOT, "var", "build", "engine-core")
# no fused multiply-add: a typed module's `a - b * c` rounds twice, as Python's floats do
COMPILE_ARGS = ["-O2", "-g0", "-ffp-contract=off"]
# Cython: the sources' annotations are documentation, not C types (a `float` parameter stays
# a Python object, as in the pure-Python core); local types are inferred only where that
# keeps Python's semantics (infer_types=None, Cython's "safe" inference). C types come only
# from a module's .pxd beside it (rr_queue.pxd, cpu_sched.pxd, state.pxd and the others).
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True, "infer_types": None}


def remove_built() -> int:
    """Remove every extension module of the package's folders and the build record; the number of files removed."""
    removed = 0
    for folder in (_core.HERE, os.path.join(_core.HERE, "policies")):
        for name in os.listdir(folder):
            if name.endswith(tuple(machinery.EXTENSION_SUFFIXES)):
                os.remove(os.path.join(folder, name))
                removed += 1
    if os.path.exists(_core.MANIFEST):
        os.remove(_core.MANIFEST)
        removed += 1
    return removed


# the modules outside the package that the engine imports, relative to the repository
OUTSIDE_IMPORTS = ("scheduling/__init__.py", "boincweb/__init__.py", "boincweb/human.py")


def byte_compile() -> None:
    """Write the bytecode of every module of the package, so that the modules the compiled
    core leaves as Python (_core.NOT_COMPILED) and the pure-Python core's modules are not
    compiled from their sources at each start: an interpreter run with
    PYTHONDONTWRITEBYTECODE (containers often are) never writes it itself, and that
    compilation was about 7 % of `python -m scheduling.engine`'s start-up (issue 33). The
    modules outside the package that it imports (its parent package's `__init__`,
    boincweb's and `boincweb.human`) get theirs too. The import system checks each file
    against its source's time and size, so a source edited since is compiled again as
    before."""
    compileall.compile_dir(_core.HERE, quiet=2)
    root = os.path.dirname(os.path.dirname(_core.HERE))
    for path in OUTSIDE_IMPORTS:
        compileall.compile_file(os.path.join(root, path), quiet=2)


def compiler_failure() -> str | None:
    """Why the C compiler Python's build uses cannot compile a one-line file, or None; tried
    before Cython's minutes of work, so a machine without a compiler learns it at once."""
    compiler = importlib.import_module("setuptools._distutils.ccompiler").new_compiler()
    importlib.import_module("setuptools._distutils.sysconfig").customize_compiler(compiler)
    os.makedirs(BUILD_DIR, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="probe-", dir=BUILD_DIR)
    probe = os.path.join(folder, "probe.c")
    with open(probe, "w") as fh:
        fh.write("int boincweb_probe(void) { return 0; }\n")
    try:
        compiler.compile([probe], output_dir=folder)
    except Exception as exc:  # CompileError, or the compiler not found
        return f"the C compiler {getattr(compiler, 'compiler_so', ['cc'])[0]} does not work ({exc})"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return None


def build(jobs: int) -> None:
    """Cythonize and compile every source in place; raises on any failure."""
    from Cython.Build import cythonize

    # setuptools ships without type information that mypy finds here
    Distribution = importlib.import_module("setuptools.dist").Distribution
    Extension = importlib.import_module("setuptools.extension").Extension

    sources = _core.compiled_sources()
    here = os.path.relpath(_core.HERE, ROOT)
    extensions = [
        Extension(_core.module_name(source), [os.path.join(here, source)], extra_compile_args=COMPILE_ARGS)
        for source in sources
    ]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        modules = cythonize(
            extensions, build_dir=BUILD_DIR, compiler_directives=DIRECTIVES, quiet=True, nthreads=0, force=True
        )
        dist = Distribution({"name": "boincweb-engine-core", "ext_modules": modules})
        dist.script_args = ["build_ext", "--inplace", "--build-temp", os.path.join(BUILD_DIR, "temp")]
        dist.script_args += ["--build-lib", os.path.join(BUILD_DIR, "lib"), "-j", str(jobs)]
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(cwd)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when the core cannot be built")
    parser.add_argument("--force", action="store_true", help="build even when the record matches the sources")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compilers at once")
    parser.add_argument("--clean", action="store_true", help="only remove the compiled core")
    args = parser.parse_args(argv)
    if args.clean:
        print(f"engine core: removed {remove_built()} files; the pure-Python core runs")
        return 0
    byte_compile()
    if not args.force and _core.unusable_reason() is None:
        print("engine core: compiled, up to date")
        return 0
    start = time.monotonic()
    remove_built()
    digests = {source: _core.source_digest(source) for source in _core.compiled_sources()}
    failure: str | None
    try:
        failure = compiler_failure()
        if failure is None:
            build(max(1, args.jobs))
    except ImportError as exc:
        failure = f"Cython or setuptools is missing ({exc})"
    except (Exception, SystemExit) as exc:  # the compiler's failure reaches setuptools as SystemExit
        failure = f"the build failed ({exc})"
    if failure is None and any(_core.extension_path(s) is None for s in digests):
        failure = "the build made no extension module for " + ", ".join(
            s for s in digests if _core.extension_path(s) is None
        )
    if failure is not None:
        remove_built()
        print(f"engine core: not compiled: {failure}; the pure-Python core runs", file=sys.stderr)
        return 1 if args.strict else 0
    changed = {s: d for s, d in digests.items() if _core.source_digest(s) != d}
    if changed:
        remove_built()
        print("engine core: sources changed during the build: " + ", ".join(changed), file=sys.stderr)
        return 1 if args.strict else 0
    stats = {source: _core.source_stat(source) for source in digests}
    with open(_core.MANIFEST, "w") as fh:
        json.dump(
            {"python": sys.implementation.cache_tag, "sources": digests, "stats": stats}, fh, indent=1, sort_keys=True
        )
    for folder in ("temp", "lib"):
        shutil.rmtree(os.path.join(BUILD_DIR, folder), ignore_errors=True)
    print(f"engine core: compiled {len(digests)} modules in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
