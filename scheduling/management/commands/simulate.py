"""`manage.py simulate SCENARIO`: run the client emulator (DESIGN.md, "Command-line contracts").

`--json` prints the run's summary as one JSON object, with the engine core that ran
(`"core": "compiled" | "python"`); `--out DIR` writes BOINC's `results.dat` line,
`results.txt` and the whole run as `run.json`. The flags and the run are the engine's own
command line (scheduling/engine/command.py), which `python -m scheduling.engine` runs without
Django.
"""

from __future__ import annotations

from scheduling.engine import command

from . import EngineCommand


class Command(EngineCommand):
    help = "Run the client scheduling emulator on a scenario (P(C, D, R) .txt, client_state.xml directory or .json)."

    def add_arguments(self, parser):
        command.add_arguments(parser)

    def handle(self, *args, **opts):
        try:
            output = command.execute(opts)
        except command.CommandFailure as exc:
            self.fail(str(exc))
        if opts["json"]:
            self.stdout.write(output)
        else:
            self.stdout.write(output, ending="")

    text = staticmethod(command.text)
