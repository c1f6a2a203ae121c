"""``manage.py make_project SLUG [--name NAME] [--config FILE] [--app NAME ...]``: a new live
project, as BOINC's ``make_project`` makes one (DESIGN.md "Projects", docs/projects.md).

It makes the project's row (kind live, on the wall clock: the periodic job passes every daemon
over it from then on), its directories (``backend.daemons.hierarchy.project_dir``) and its
code-signing key pair, and with ``--app`` an app whose work the work generator keeps topped up
(``--unsent-target`` unsent results, reference/server.md §3.1). Executables follow with
``add_app_version APP VERSION FILE --project SLUG``; clients attach at
``/projects/SLUG/boinc/``. ``--config`` takes the project's BOINC config.xml, read as the
scheduler will read it, so a file it cannot read is refused here rather than at the first
request. Nothing is made when an argument is refused (exit status 2).
"""

import time
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug
from django.db import transaction

from backend.models import App, Project
from backend.server_config import ConfigError, read_config_xml
from protocol import signing

SLUG_MAX: int = Project._meta.get_field("slug").max_length or 50


def checked_slug(slug: str) -> str:
    try:
        validate_slug(slug)
    except ValidationError:
        raise CommandError(
            f"{slug!r} is not a slug: letters, digits, hyphens and underscores only", returncode=2
        ) from None
    if len(slug) > SLUG_MAX:
        raise CommandError(f"the slug has {len(slug)} characters, more than {SLUG_MAX}", returncode=2)
    if slug.startswith("world-"):
        raise CommandError("slugs starting with 'world-' are the worlds' projects", returncode=2)
    if Project.objects.filter(slug=slug).exists():
        raise CommandError(f"there is already a project {slug!r}", returncode=2)
    return slug


def checked_config(path: str | None) -> str:
    """The text of a config.xml the scheduler can read, or '' for none."""
    if path is None:
        return ""
    try:
        text = Path(path).read_text()
        read_config_xml(text)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}", returncode=2) from None
    except UnicodeDecodeError:
        raise CommandError(f"{path} is not text", returncode=2) from None
    except ConfigError as exc:
        raise CommandError(f"{path}: {exc}", returncode=2) from None
    return text


class Command(BaseCommand):
    help = "Make a live project: its row, directories, code-signing keys and, with --app, an app."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the project's URL name: /projects/SLUG/")
        parser.add_argument("--name", help="the project's name (default: the slug)")
        parser.add_argument("--config", help="the project's BOINC config.xml")
        parser.add_argument("--app", help="make an app of this name")
        parser.add_argument("--app-title", default="", help="the app's user-friendly name")
        parser.add_argument(
            "--unsent-target", type=int, default=100, help="unsent results the work generator keeps (default 100)"
        )

    def handle(
        self,
        *args: str,
        slug: str,
        name: str | None,
        config: str | None,
        app: str | None,
        app_title: str,
        unsent_target: int,
        **options: object,
    ) -> None:
        slug = checked_slug(slug)
        config_xml = checked_config(config)
        name = (name if name is not None else slug).strip()
        if not name or len(name) > 100:
            raise CommandError("--name must have 1 to 100 characters", returncode=2)
        if app is not None and not (0 < len(app.strip()) <= 254):
            raise CommandError("--app must have 1 to 254 characters", returncode=2)
        if unsent_target < 0:
            raise CommandError("--unsent-target must not be negative", returncode=2)
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name, kind=Project.Kind.LIVE, config_xml=config_xml)
            if app is not None:
                App.objects.create(
                    project=project,
                    name=app.strip(),
                    user_friendly_name=app_title,
                    unsent_target=unsent_target,
                    create_time=int(time.time()),
                )
            # the files last: a refused key pair undoes the rows with the transaction
            for directory in (project.download_dir, project.upload_dir):
                Path(directory).mkdir(parents=True, exist_ok=True)
            try:
                signing.write_key_pair(project.keys_dir)
            except (OSError, signing.SigningError) as exc:
                raise CommandError(f"cannot write the signing keys: {exc}") from None
        self.stdout.write(f"made project {slug} ({name}): keys in {project.keys_dir}")
        if app is not None:
            self.stdout.write(f"next: manage.py add_app_version {app.strip()} VERSION EXECUTABLE --project {slug}")
        self.stdout.write(f"clients attach at /projects/{slug}/boinc/ with a key from /projects/{slug}/boinc/account/")
