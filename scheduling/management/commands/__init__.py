"""Management commands of the scheduling lab: `simulate` and `rrsim` (DESIGN.md contracts).

`EngineCommand` gives both the same error behaviour: a bad argument, one beyond the engine's
limits (scheduling/engine/scenario.py) or a malformed scenario prints one line on stderr and
exits with code 2, never a traceback.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from scheduling.engine import ScenarioError, load_scenario
from scheduling.engine.scenario import check_run


class EngineCommand(BaseCommand):
    # the engine touches neither the database nor the URLs: no system checks to wait on
    requires_system_checks = []

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        name = f"{prog_name} {subcommand}"

        def one_line_error(message):
            if getattr(parser, "called_from_command_line", False):
                sys.stderr.write(f"{name}: error: {message}\n")
                sys.exit(2)
            raise CommandError(f"Error: {message}", returncode=2)

        parser.error = one_line_error  # type: ignore[method-assign]  # argparse has no hook for this
        return parser

    def fail(self, message: str):
        raise CommandError(message, returncode=2)

    def load(self, path: str):
        try:
            return load_scenario(path)
        except ScenarioError as exc:
            self.fail(f"{path}: {exc}" if not str(exc).startswith(path) else str(exc))

    def check_run(self, **arguments) -> None:
        """The engine's limits on a run's arguments (scenario.check_run), as a one-line error."""
        try:
            check_run(**arguments)
        except ScenarioError as exc:
            self.fail(str(exc))

    def engine(self, call, *args, **kwargs):
        """`call(*args, **kwargs)`; an argument the engine refuses becomes a one-line error."""
        try:
            return call(*args, **kwargs)
        except ValueError as exc:  # ScenarioError among them
            self.fail(str(exc))
