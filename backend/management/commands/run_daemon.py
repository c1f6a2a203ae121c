"""``manage.py run_daemon NAME (--once | --loop) [--mod N --index I]``."""

import time

from django.core.management.base import BaseCommand, CommandError

from backend.daemons import UnknownDaemon, get_daemon, run_pass


class Command(BaseCommand):
    help = "Run a back-end daemon once, or in a loop that sleeps when a pass finds nothing."

    def add_arguments(self, parser):
        parser.add_argument("name", help="transitioner, validator, assimilator, ...")
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--once", action="store_true", help="one pass, then exit")
        mode.add_argument("--loop", action="store_true", help="pass after pass until Ctrl-C")
        parser.add_argument("--mod", type=int, default=1, help="split the work N ways")
        parser.add_argument("--index", type=int, default=0, help="this instance's share, 0..N-1")
        parser.add_argument("--batch-size", type=int, default=None)
        parser.add_argument("--sleep", type=float, default=5.0, help="seconds after an idle pass")

    def handle(self, *args, name, once, loop, mod, index, batch_size, sleep, **options):
        try:
            get_daemon(name)
        except UnknownDaemon as exc:
            raise CommandError(str(exc), returncode=2)
        if mod < 1 or not 0 <= index < mod:
            raise CommandError(f"--index must be in 0..{max(mod, 1) - 1} and --mod at least 1",
                               returncode=2)
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be at least 1", returncode=2)
        if once:
            done = run_pass(name, batch_size=batch_size, mod=mod, index=index)
            self.stdout.write(f"{name}: {done}")
            return
        try:
            while True:
                done = run_pass(name, batch_size=batch_size, mod=mod, index=index)
                if done == 0:
                    time.sleep(sleep)
        except KeyboardInterrupt:
            self.stdout.write(f"{name}: stopped")
