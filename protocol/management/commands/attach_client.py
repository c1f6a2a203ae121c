"""``manage.py attach_client``: run Debian's real BOINC client against the running server.

The client gets its own data directory (default ``var/boinc-client/<user>``), attaches to the
project's master URL with the user's account key (the user and key are made when missing), and
runs until it is idle (``--exit-when-idle``) or Ctrl-C, which kills it and its applications.
With ``--app NAME`` it runs that app on the anonymous platform with a shell-script worker that
upper-cases its input (reference/protocol.md §6.1); otherwise it downloads the project's signed
app versions (§7, ``make_signing_keys`` and ``add_app_version``).
"""

import shutil
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from protocol.client import (
    ClientDir, client_binary, client_command, free_port, start_client, stop_client,
)
from protocol.models import Account


class Command(BaseCommand):
    help = "Start a real BOINC client with its own data directory against this project."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/boinc/",
                            help="the project's master URL (default %(default)s)")
        parser.add_argument("--user", default="volunteer", help="account to attach with")
        parser.add_argument("--dir", help="client data directory")
        parser.add_argument("--app", help="run this app on the anonymous platform")
        parser.add_argument("--fresh", action="store_true",
                            help="empty the data directory first")
        parser.add_argument("--exit-when-idle", action="store_true",
                            help="stop once the client has no work left")

    def handle(self, *args, url, user, dir, app, fresh, exit_when_idle, **options):
        if client_binary() is None:
            raise CommandError("the boinc client is not installed: apt-get install boinc-client")
        if not url.endswith("/"):
            url += "/"
        person, _ = get_user_model().objects.get_or_create(username=user)
        account = Account.for_user(person)
        path = Path(dir) if dir else Path(settings.BOINCWEB_DATA_DIR) / "boinc-client" / user
        if fresh and path.exists():
            shutil.rmtree(path)
        client_dir = ClientDir(path, url).prepare()
        if app:
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
