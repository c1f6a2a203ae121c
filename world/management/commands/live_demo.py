"""``manage.py live_demo [--hosts N] [--seed S]``: the live demo of ``make run`` (world.live).

Starts a new live volunteer world for ``seed_demo``'s app and drives it on the wall clock until
stopped (Ctrl-C or SIGTERM). With ``BOINCWEB_DEMO=0`` it starts nothing and waits to be stopped,
and so it does after an error ends the world (shown on the world's page), so that the other
processes ``make run`` starts beside it keep running.
"""

import signal
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from boincweb.signals import stop_requests
from world import live


class Command(BaseCommand):
    help = "Drive a small simulated volunteer population for the demo app in real time."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--hosts", type=int, default=live.DEMO_HOSTS)
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args: Any, hosts: int, seed: int, **options: Any) -> None:
        if not 1 <= hosts <= 1000:
            raise CommandError(f"--hosts must be between 1 and 1000, not {hosts}", returncode=2)
        with stop_requests() as stopping:
            self.run_demo(hosts, seed, stopping)

    def run_demo(self, hosts: int, seed: int, stopping: list[int]) -> None:
        def wait_for_stop() -> None:
            while not stopping:
                signal.pause()

        if not settings.BOINCWEB_DEMO:
            self.stdout.write("the live demo is off (BOINCWEB_DEMO=0)")
            self.stdout.flush()
            wait_for_stop()
            return
        try:
            world = live.start_demo(hosts=hosts, seed=seed)
        except ValueError as exc:
            raise CommandError(f"{exc}; run `python manage.py seed_demo` first", returncode=2) from None
        self.stdout.write(
            f"live demo: {hosts} volunteer hosts for {live.DEMO_APP} (world {world.pk}, /project/worlds/{world.pk}/)"
        )
        self.stdout.flush()
        try:
            live.drive(world.pk, should_stop=lambda: bool(stopping))
        except Exception as exc:  # the world is marked failed, with the error, on its page
            self.stderr.write(f"the live demo stopped: {exc!r}")
        if not stopping:
            # the rest of make run (honcho stops every process when one ends) carries on
            wait_for_stop()
