"""``manage.py add_app_version APP VERSION EXECUTABLE [--project SLUG]``: a signed app version
for real clients.

The executable is copied to the project's download directory and signed with its key
(reference/protocol.md §7), so clients that are not on the anonymous platform can run it.
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backend.management.commands.run_daemon import project_named
from backend.models import App, AppVersion, Project
from protocol import signing


class Command(BaseCommand):
    help = "Add (or re-sign) an app version whose executable real clients download."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("app")
        parser.add_argument("version_num", type=int)
        parser.add_argument("executable")
        parser.add_argument("--platform", default="x86_64-pc-linux-gnu")
        parser.add_argument("--project", default=Project.DEMO_SLUG, help="the project's slug (default: demo)")

    def handle(
        self, *args: str, app: str, version_num: int, executable: str, platform: str, project: str, **options: object
    ) -> None:
        the_project = project_named(project)
        found = App.objects.filter(project=the_project, name=app).first()
        if found is None:
            raise CommandError(f"no app called {app!r} in project {the_project.slug}", returncode=2)
        version, _ = AppVersion.objects.get_or_create(
            project=found.project, app=found, version_num=version_num, platform=platform, plan_class=""
        )
        try:
            row = signing.add_app_version_file(version, executable)
        except (OSError, signing.SigningError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{version}: {row.name} ({row.nbytes} bytes, md5 {row.md5_cksum}), signed")
