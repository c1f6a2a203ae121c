"""``manage.py make_signing_keys``: the code-signing key pair (reference/protocol.md §7)."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from protocol import signing


class Command(BaseCommand):
    help = "Make the project's code-signing key pair in BOINCWEB_DATA_DIR/keys."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--replace", action="store_true", help="replace an existing pair (clients keep trusting the old key)"
        )
        parser.add_argument("--bits", type=int, default=signing.BITS)

    def handle(self, *args: str, replace: bool, bits: int, **options: object) -> None:
        try:
            signing.write_key_pair(bits=bits, replace=replace)
        except signing.SigningError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"wrote {signing.keys_dir()}/code_sign_public and code_sign_private")
