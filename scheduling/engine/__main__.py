"""`python -m scheduling.engine SCENARIO [the flags of manage.py simulate]`: the same run and
the same output as `manage.py simulate` (command.py), without importing Django. A bad argument
or scenario prints one line on stderr and exits with code 2."""

from __future__ import annotations

import argparse
import gc
import sys

from .command import CommandFailure, add_arguments, execute

# what the imports made lives as long as the process: the collector need not look at it again
gc.freeze()

PROG = "python -m scheduling.engine"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
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
