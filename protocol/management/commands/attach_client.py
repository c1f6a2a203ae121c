"""``manage.py attach_client``: run Debian's real BOINC client against the running server.

The client gets its own data directory (default ``var/boinc-client/<user>``), attaches to the
master URL of the project ``--project`` (default demo: ``http://127.0.0.1:$BOINCWEB_PORT/boinc/``,
port 8000 when unset, where ``make run`` serves; another project's is
``.../projects/<slug>/boinc/``) with the user's account key in that project (the user and key
are made when missing), and runs until it is idle (``--exit-when-idle``), until ``--time-limit`` seconds have
passed, or until the command is stopped (Ctrl-C, SIGTERM, or its terminal closing: SIGHUP).
However it ends, the client is asked to quit by GUI RPC, given QUIT_WAIT seconds, and then its
process group (the client and its applications) is killed (reference/protocol.md §11 step 6),
so no client outlives the command.

By default it runs ``seed_demo``'s app on the anonymous platform, with a shell-script worker
that upper-cases its input (reference/protocol.md §6.1): the demo app has no executable to
download. ``--app NAME`` picks another app the same way; ``--signed`` instead downloads the
project's signed app versions (§7, ``make_signing_keys`` and ``add_app_version``).
"""

import math
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Self

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from backend.management.commands.run_daemon import project_named
from backend.models import App, Project
from boincweb.env import envint
from protocol.client import (
    QUIT_WAIT,
    ClientDir,
    client_binary,
    client_command,
    free_port,
    quit_client,
    start_client,
    stop_client,
)
from protocol.models import Account, AppVersionFile

# The app ``seed_demo`` makes, which ``make run`` loads.
DEMO_APP = "example_app"
# The signals that stop the command, and with it the client.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How often the command looks at the client, the clock and the signals.
POLL_SECONDS = 0.2


class Command(BaseCommand):
    help = "Start a real BOINC client with its own data directory against this project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url",
            help="the project's master URL (default http://127.0.0.1:$BOINCWEB_PORT/boinc/ for the demo project, "
            "/projects/<slug>/boinc/ for another; port 8000 when unset)",
        )
        parser.add_argument("--project", default=Project.DEMO_SLUG, help="the project's slug (default: demo)")
        parser.add_argument("--user", default="volunteer", help="account to attach with")
        parser.add_argument("--dir", help="client data directory")
        apps = parser.add_mutually_exclusive_group()
        apps.add_argument(
            "--app", default=DEMO_APP, help="run this app on the anonymous platform (default %(default)s)"
        )
        apps.add_argument("--signed", action="store_true", help="download the project's signed app versions instead")
        parser.add_argument("--fresh", action="store_true", help="empty the data directory first")
        parser.add_argument("--exit-when-idle", action="store_true", help="stop once the client has no work left")
        parser.add_argument(
            "--time-limit",
            type=float,
            default=0,
            metavar="SECONDS",
            help="stop the client after this many seconds (default: no limit)",
        )

    def handle(
        self,
        *args: str,
        url: str | None,
        project: str,
        user: str,
        dir: str | None,
        app: str,
        signed: bool,
        fresh: bool,
        exit_when_idle: bool,
        time_limit: float,
        **options: object,
    ) -> None:
        if not math.isfinite(time_limit) or time_limit < 0:
            raise CommandError(
                f"--time-limit {time_limit:g} is not a number of seconds; give seconds, or 0 for no limit", returncode=2
            )
        if client_binary() is None:
            raise CommandError("the boinc client is not installed: apt-get install boinc-client")
        the_project = project_named(project)
        if not the_project.is_live:
            raise CommandError(
                f"project {the_project.slug} is a simulated world's; real clients attach to live projects only",
                returncode=2,
            )
        url = url or default_url(the_project)
        if not url.endswith("/"):
            url += "/"
        if signed:
            if not AppVersionFile.objects.filter(project=the_project, main_program=True).exists():
                raise CommandError(
                    "the project has no signed app version: run make_signing_keys and add_app_version", returncode=2
                )
        elif not App.objects.filter(project=the_project, name=app, deprecated=False).exists():
            hint = (
                "run `python manage.py seed_demo`"
                if app == DEMO_APP
                else "the project's apps are listed in /admin/backend/app/"
            )
            raise CommandError(f"the project has no app named {app!r}; {hint}", returncode=2)
        person, _ = get_user_model().objects.get_or_create(username=user)
        account = Account.for_user(person, the_project)
        path = Path(dir) if dir else Path(settings.BOINCWEB_DATA_DIR) / "boinc-client" / user
        if fresh and path.exists():
            shutil.rmtree(path)
        client_dir = ClientDir(path, url).prepare()
        if not signed:
            client_dir.install_anonymous_app(app)
        gui_rpc_port = free_port()
        command = client_command(
            client_dir,
            account.authenticator,
            gui_rpc_port=gui_rpc_port,
            exit_when_idle=exit_when_idle,
            fetch_minimal_work=False,
        )
        self.stdout.write(f"attaching {path} to {url} as {user}\n{' '.join(command)}")
        with StopSignals() as stopped:
            process = start_client(command)
            self.stdout.write(f"client started: pid {process.pid}, GUI RPC port {gui_rpc_port}")
            reason = "an error in the command"
            try:
                reason = run_until_stopped(process, stopped, time_limit)
            finally:
                if process.poll() is None:
                    self.stdout.write(f"stopping the client ({reason})")
                    if quit_client(process, gui_rpc_port):
                        self.stdout.write("the client quit")
                    else:
                        self.stdout.write(f"the client did not quit within {QUIT_WAIT} s; killing it")
                stop_client(process)
        self.stdout.write(f"the client exited with status {process.returncode}")


class StopSignals:
    """While in the block, SIGINT, SIGTERM and SIGHUP set ``.signal`` instead of ending the
    process, so that the command can quit its client first; the handlers are restored after."""

    def __enter__(self) -> Self:
        self.signal: signal.Signals | None = None
        self.previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}
        for number in STOP_SIGNALS:
            self.previous[number] = signal.signal(number, self.handle)
        return self

    def handle(self, number: int, frame: FrameType | None) -> None:
        self.signal = signal.Signals(number)

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


def run_until_stopped(process: subprocess.Popen[bytes], stopped: StopSignals, time_limit: float) -> str:
    """Wait for the client to exit, a stop signal or the time limit; say which came first."""
    deadline = time.monotonic() + time_limit if time_limit else None
    while process.poll() is None:
        if stopped.signal is not None:
            return stopped.signal.name
        if deadline is not None and time.monotonic() >= deadline:
            return f"time limit of {time_limit:g} s"
        time.sleep(POLL_SECONDS)
    return "the client exited"


def default_url(project: Project) -> str:
    """The project's master URL on the server ``make run`` starts: 127.0.0.1 on BOINCWEB_PORT."""

    try:
        port = envint("BOINCWEB_PORT", 8000, minimum=1)
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc), returncode=2) from None
    return f"http://127.0.0.1:{port}{project.master_path()}"
