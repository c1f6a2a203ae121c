"""``manage.py run_daemon NAME (--once | --loop) [--project SLUG] [--mod N --index I]``.

The passes are over one project's rows (``--project``, the demo project by default), at the
project's clock.

With ``--loop``, SIGINT (Ctrl-C) and SIGTERM (what process managers send) both let the pass
under way finish and commit, then end the command with status 0; a signal during the sleep
after an idle pass ends it at once. Between passes, database connections that are broken or
past CONN_MAX_AGE are closed, as Django does around each request, so a long-running daemon
outlives a database restart.
"""

import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from backend.daemons import UnknownDaemon, get_daemon, run_pass
from backend.models import Project
from boincweb.signals import stop_requests

NAP = 0.2  # seconds: how soon a stop is seen while sleeping after an idle pass


class Command(BaseCommand):
    help = "Run a back-end daemon once, or in a loop that sleeps when a pass finds nothing."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="transitioner, validator, assimilator, ...")
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--once", action="store_true", help="one pass, then exit")
        mode.add_argument("--loop", action="store_true", help="pass after pass until SIGINT (Ctrl-C) or SIGTERM")
        parser.add_argument("--project", default=Project.DEMO_SLUG, help="the project's slug (default: demo)")
        parser.add_argument("--mod", type=int, default=1, help="split the work N ways")
        parser.add_argument("--index", type=int, default=0, help="this instance's share, 0..N-1")
        parser.add_argument("--batch-size", type=int, default=None)
        parser.add_argument("--sleep", type=float, default=5.0, help="seconds after an idle pass")

    def handle(
        self,
        *args: Any,
        name: str,
        once: bool,
        loop: bool,
        mod: int,
        index: int,
        batch_size: int | None,
        sleep: float,
        project: str,
        **options: Any,
    ) -> None:
        try:
            get_daemon(name)
        except UnknownDaemon as exc:
            raise CommandError(str(exc), returncode=2)
        if mod < 1 or not 0 <= index < mod:
            raise CommandError(f"--index must be in 0..{max(mod, 1) - 1} and --mod at least 1", returncode=2)
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be at least 1", returncode=2)
        the_project = project_named(project)
        if once:
            done = run_pass(name, project=the_project, batch_size=batch_size, mod=mod, index=index)
            self.stdout.write(f"{name}: {done}")
            return
        with stop_requests() as stopping:
            self.stdout.write(f"{name}: running until SIGINT or SIGTERM")
            while not stopping:
                close_old_connections()
                the_project.refresh_from_db(fields=["simulated_time"])
                done = run_pass(name, project=the_project, batch_size=batch_size, mod=mod, index=index)
                close_old_connections()
                if done == 0:
                    idle(sleep, stopping)
        self.stdout.write(f"{name}: stopped")


def project_named(slug: str) -> Project:
    """The project called ``slug``, or a CommandError (exit status 2) naming the known ones."""
    if slug == Project.DEMO_SLUG:
        return Project.demo()
    found = Project.objects.filter(slug=slug).first()
    if found is None:
        known = ", ".join(Project.objects.values_list("slug", flat=True)) or "none"
        raise CommandError(f"unknown project {slug!r}; the projects are: {known}", returncode=2)
    return found


def idle(seconds: float, stopping: list[int]) -> None:
    """Sleep ``seconds`` after an idle pass, waking early once a stop is asked for."""
    end = time.monotonic() + seconds
    while not stopping and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, NAP))
