"""``manage.py create_work --appname APP [--project SLUG] [parameters] (--wu_name NAME INFILE | --stdin)``.

BOINC's ``create_work`` tool for a project admin (reference/server.md §1.7, §3.1): workunits
of an app, each with its input file, at the project's clock, checked as create_work2 checks
them. The transitioner makes their first results on its next pass.

- ``--wu_name NAME INFILE``: one workunit, its input the bytes of the file INFILE (a path).
- ``--stdin``: one workunit per line of standard input, ``--wu_name NAME INFILE`` as BOINC's
  ``create_work --stdin`` reads them (its other per-job flags are not taken here: a line with
  any other word is refused).

The parameters (``--min_quorum``, ``--target_nresults``, ``--delay_bound``,
``--rsc_fpops_est``, ... as BOINC spells them) apply to every workunit; each defaults to the
app's. The batch is one transaction: a name already taken, a missing input file or a parameter
create_work refuses ends the command with a message and creates nothing.
"""

import shlex
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError

from backend.daemons.work_generator import PARAMETERS, CreateWorkError, create_work
from backend.management.commands.run_daemon import project_named
from backend.models import App, File, Project, Workunit

FLOAT_PARAMETERS = ("rsc_fpops_est", "rsc_fpops_bound", "rsc_memory_bound", "rsc_disk_bound", "rsc_bandwidth_bound")
INT_PARAMETERS = tuple(name for name in (*PARAMETERS, "priority", "batch") if name not in FLOAT_PARAMETERS)
NAME_LIMIT = 254  # Workunit.name's length; the input file's name adds ".in"


class Command(BaseCommand):
    help = "Create workunits of an app, each with its input file (BOINC's create_work)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--appname", required=True, help="the app's name")
        parser.add_argument("--project", default=Project.DEMO_SLUG, help="the project's slug (default: demo)")
        parser.add_argument(
            "--wu_name", nargs=2, metavar=("NAME", "INFILE"), help="one workunit and the path of its input"
        )
        parser.add_argument("--stdin", action="store_true", help="one '--wu_name NAME INFILE' per line of stdin")
        for name in INT_PARAMETERS:
            parser.add_argument(f"--{name}", type=int, default=None)
        for name in FLOAT_PARAMETERS:
            parser.add_argument(f"--{name}", type=float, default=None)

    def handle(
        self, *args: Any, appname: str, project: str, wu_name: list[str] | None, stdin: bool, **options: Any
    ) -> None:
        if bool(wu_name) == stdin:
            raise CommandError("give one of --wu_name NAME INFILE and --stdin", returncode=2)
        the_project = project_named(project)
        app = App.objects.filter(project=the_project, name=appname).first()
        if app is None:
            known = ", ".join(App.objects.filter(project=the_project).order_by("name").values_list("name", flat=True))
            raise CommandError(f"project {project} has no app {appname!r} (its apps: {known or 'none'})", returncode=2)
        jobs = [tuple(wu_name)] if wu_name else read_jobs(sys.stdin.read())
        if not jobs:
            raise CommandError("no jobs on standard input", returncode=2)
        inputs = {name: read_input(name, path) for name, path in jobs}
        if len(inputs) != len(jobs):
            raise CommandError("a workunit name is given twice", returncode=2)
        taken = list(Workunit.objects.filter(name__in=list(inputs)).values_list("name", flat=True)[:5])
        inputs_taken = File.objects.filter(name__in=[f"{n}.in" for n in inputs if n not in taken])
        taken += [
            f"{name.removesuffix('.in')} (a file {name} exists)"
            for name in inputs_taken.values_list("name", flat=True)[:5]
        ]
        if taken:
            raise CommandError(f"workunit names already taken: {', '.join(taken)}", returncode=2)
        overrides = {name: options[name] for name in (*INT_PARAMETERS, *FLOAT_PARAMETERS) if options[name] is not None}
        try:
            made = create_work(app, list(inputs), now=the_project.now(), inputs=inputs.__getitem__, **overrides)
            count = made.count()
        except CreateWorkError as exc:
            raise CommandError(str(exc), returncode=2) from None
        except IntegrityError:
            # a name taken between the check above and the insert
            raise CommandError("a workunit name was taken meanwhile; nothing was created", returncode=1) from None
        self.stdout.write(f"created {count} workunit{'s' if count != 1 else ''} of {appname} in project {project}")


def read_jobs(text: str) -> list[tuple[str, str]]:
    """The ``(name, infile)`` of each non-blank line ``--wu_name NAME INFILE``."""
    jobs = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise CommandError(f"line {number}: {exc}", returncode=2) from None
        if not words:
            continue
        if len(words) != 3 or words[0] != "--wu_name":
            raise CommandError(f"line {number}: expected '--wu_name NAME INFILE', got {line.strip()!r}", returncode=2)
        jobs.append((words[1], words[2]))
    return jobs


def read_input(name: str, path: str) -> bytes:
    """The bytes of workunit ``name``'s input file at ``path``; a CommandError for a bad name or file."""
    if not name or len(name) + len(".in") > NAME_LIMIT or "/" in name or name.startswith("."):
        raise CommandError(
            f"workunit name {name!r}: 1 to {NAME_LIMIT - 3} characters, no '/', not starting with '.'",
            returncode=2,
        )
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"input of {name}: {path}: {exc.strerror}", returncode=2) from None
