"""Accounts per project (DESIGN.md "Projects"): every existing account key becomes the key of
its user's account in the demo project, the one project there was, so attached clients go on
working. 0005 then lets a user hold one account in each project."""

import django.db.models.deletion
from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

DEMO = "demo"


def accounts_into_demo(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Account = apps.get_model("protocol", "Account")
    if not Account.objects.filter(project__isnull=True).exists():
        return
    Project = apps.get_model("backend", "Project")
    demo, _ = Project.objects.get_or_create(slug=DEMO, defaults={"name": "Demo project"})
    Account.objects.filter(project__isnull=True).update(project=demo)


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0023_project_required"),
        ("protocol", "0003_project_required"),
    ]

    operations = [
        migrations.AddField(
            model_name="account",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="accounts",
                to="backend.project",
            ),
        ),
        migrations.RunPython(accounts_into_demo, migrations.RunPython.noop),
    ]
