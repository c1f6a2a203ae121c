"""``manage.py attach_client``: run Debian's real BOINC client against the running server.

The client gets its own data directory (default ``var/boinc-client/<user>``), attaches to the
project's master URL (default ``http://127.0.0.1:$BOINCWEB_PORT/boinc/``, port 8000 when unset,
where ``make run`` serves) with the user's account key (the user and key are made when
missing), and runs until it is idle (``--exit-when-idle``) or Ctrl-C, which kills it and its
applications.

By default it runs ``seed_demo``'s app on the anonymous platform, with a shell-script worker
that upper-cases its input (reference/protocol.md §6.1): the demo app has no executable to
download. ``--app NAME`` picks another app the same way; ``--signed`` instead downloads the
project's signed app versions (§7, ``make_signing_keys`` and ``add_app_version``).
"""

import shutil
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from backend.models import App
from boincweb.env import envint
from protocol.client import (
    ClientDir, client_binary, client_command, free_port, start_client, stop_client,
)
from protocol.models import Account, AppVersionFile

# The app ``seed_demo`` makes, which ``make run`` loads.
DEMO_APP = "example_app"


class Command(BaseCommand):
    help = "Start a real BOINC client with its own data directory against this project."

    def add_arguments(self, parser):
        parser.add_argument("--url", help="the project's master URL (default "
                            "http://127.0.0.1:$BOINCWEB_PORT/boinc/, port 8000 when unset)")
        parser.add_argument("--user", default="volunteer", help="account to attach with")
        parser.add_argument("--dir", help="client data directory")
        apps = parser.add_mutually_exclusive_group()
        apps.add_argument("--app", default=DEMO_APP,
                          help="run this app on the anonymous platform (default %(default)s)")
        apps.add_argument("--signed", action="store_true",
                          help="download the project's signed app versions instead")
        parser.add_argument("--fresh", action="store_true",
                            help="empty the data directory first")
        parser.add_argument("--exit-when-idle", action="store_true",
                            help="stop once the client has no work left")

    def handle(self, *args, url, user, dir, app, signed, fresh, exit_when_idle, **options):
        if client_binary() is None:
            raise CommandError("the boinc client is not installed: apt-get install boinc-client")
        url = url or default_url()
        if not url.endswith("/"):
            url += "/"
        if signed:
            if not AppVersionFile.objects.filter(main_program=True).exists():
                raise CommandError("the project has no signed app version: run "
                                   "make_signing_keys and add_app_version", returncode=2)
        elif not App.objects.filter(name=app, deprecated=False).exists():
            hint = ("run `python manage.py seed_demo`" if app == DEMO_APP
                    else "the project's apps are listed in /admin/backend/app/")
            raise CommandError(f"the project has no app named {app!r}; {hint}", returncode=2)
        person, _ = get_user_model().objects.get_or_create(username=user)
        account = Account.for_user(person)
        path = Path(dir) if dir else Path(settings.BOINCWEB_DATA_DIR) / "boinc-client" / user
        if fresh and path.exists():
            shutil.rmtree(path)
        client_dir = ClientDir(path, url).prepare()
        if not signed:
            client_dir.install_anonymous_app(app)
        command = client_command(client_dir, account.authenticator, gui_rpc_port=free_port(),
                                 exit_when_idle=exit_when_idle, fetch_minimal_work=False)
        self.stdout.write(f"attaching {path} to {url} as {user}\n{' '.join(command)}")
        process = start_client(command)
        try:
            process.wait()
        except KeyboardInterrupt:
            self.stdout.write("stopping the client")
        finally:
            stop_client(process)


def default_url():
    """The master URL of the server ``make run`` starts: 127.0.0.1 on BOINCWEB_PORT."""
    try:
        port = envint("BOINCWEB_PORT", 8000, minimum=1)
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc), returncode=2) from None
    return f"http://127.0.0.1:{port}/boinc/"
