"""``manage.py make_signing_keys [--project SLUG]``: a project's code-signing key pair
(reference/protocol.md §7), in its keys directory (``Project.keys_dir``)."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backend.management.commands.run_daemon import project_named
from backend.models import Project
from protocol import signing


class Command(BaseCommand):
    help = "Make a project's code-signing key pair in its keys directory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--replace", action="store_true", help="replace an existing pair (clients keep trusting the old key)"
        )
        parser.add_argument("--bits", type=int, default=signing.BITS)
        parser.add_argument("--project", default=Project.DEMO_SLUG, help="the project's slug (default: demo)")

    def handle(self, *args: str, replace: bool, bits: int, project: str, **options: object) -> None:
        keys_dir = project_named(project).keys_dir
        try:
            signing.write_key_pair(keys_dir, bits=bits, replace=replace)
        except signing.SigningError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"wrote {keys_dir}/code_sign_public and code_sign_private")
