"""``manage.py delete_world ID [--project] [--json]``: delete a world (world.deletion).

Without ``--project`` only the world's own rows go (the world, its samples and its engine
hosts' records) and its project stays, with its pages; with it, every row of the world's
project, its data directory and its simulated volunteers' Django users go too (a user with
anything outside the project is a real person, and stays). A running world, a slice still in flight, a live
project (the demo) and an unknown world are refused with the reason and exit status 2, and
nothing is changed; so is every deletion while Redis is down (exit status 1).
"""

import json
from argparse import ArgumentParser
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from boincweb.redis_outage import REDIS_DOWN
from world.deletion import Refused, delete_world


class Command(BaseCommand):
    help = "Delete a simulated world and, with --project, its project: every row and its files."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("world", type=int, help="The world's id (its page is /project/worlds/ID/).")
        parser.add_argument(
            "--project",
            action="store_true",
            help="Delete the world's project too: every row that names it and its data directory.",
        )
        parser.add_argument("--json", action="store_true", help="Print what was deleted as one JSON object.")

    def handle(self, *args: Any, world: int, project: bool, **options: Any) -> None:
        try:
            deleted = delete_world(world, with_project=project)
        except Refused as exc:
            raise CommandError(str(exc), returncode=2) from None
        except REDIS_DOWN as exc:
            raise CommandError(
                f"Redis is not reachable ({exc}), so whether a slice of the world is running cannot be told; "
                "nothing was deleted.",
                returncode=1,
            ) from None
        if options["json"]:
            self.stdout.write(json.dumps(asdict(deleted), indent=2, sort_keys=True))
            return
        self.stdout.write(f"deleted world {deleted.world} ({deleted.name})")
        if deleted.project:
            tables = sum(1 for label, n in deleted.rows.items() if n and not label.startswith("world."))
            self.stdout.write(f"and its project {deleted.project}: {deleted.project_rows} rows in {tables} tables")
            self.stdout.write(f"and its {deleted.volunteers} simulated volunteers' users")
        for path in deleted.paths:
            self.stdout.write(f"removed {path}")
