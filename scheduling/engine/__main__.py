"""`python -m scheduling.engine SCENARIO [the flags of manage.py simulate]`: the same run and
the same output as `manage.py simulate` (command.py), without importing Django. A bad argument
or scenario prints one line on stderr and exits with code 2.

Its start-up is part of every short lab run and every script that runs the engine (issue 33:
at most 200 M instructions for 60 simulated seconds), so it leaves out what nothing here
uses: `shutil`, which argparse imports for the terminal's width (`_formatter`), and `inspect`
(_core.py, `import_dataclasses`).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

from .command import CommandFailure, add_arguments, execute

# what the imports made lives as long as the process: the collector need not look at it again
gc.freeze()

PROG = "python -m scheduling.engine"


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's help formatter at the terminal's width (COLUMNS, else the terminal's, else
    80 columns, as `shutil.get_terminal_size` finds it), without importing shutil."""
    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            width = 80
    return argparse.HelpFormatter(prog, width=max(width, 2) - 2)


def main(argv=None) -> int:
    description = __doc__.split("\n\n")[0].replace("\n", " ")
    parser = argparse.ArgumentParser(prog=PROG, description=description, formatter_class=_formatter)
    add_arguments(parser)

    def one_line_error(message):
        sys.stderr.write(f"{PROG}: error: {message}\n")
        sys.exit(2)

    parser.error = one_line_error  # type: ignore[method-assign]  # argparse has no hook for this
    opts = vars(parser.parse_args(argv))
    try:
        output = execute(opts)
    except CommandFailure as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    sys.stdout.write(output if output.endswith("\n") else output + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
