"""Credit per project, as BOINC keeps it in each project's own user table: a volunteer's credit
row (UserCredit) was keyed by the user alone, so one who earned credit in two projects had one
row; now it has an id of its own and is unique per (project, user). Each existing row keeps its
values and goes to the project it already names. The credit by app of users and teams is unique
per project too, and its index leads with the project.

The new table is made beside the old one under a name of its own, filled, and then takes the
old one's name (so that the old table's index names never clash with the new one's).

Backwards, each row returns to a row keyed by its user, which holds only when no volunteer has
credit in two projects; a database where one has is refused, rather than merging two projects'
credit into one row.
"""

import django.db.models.deletion
from django.apps.registry import Apps
from django.conf import settings
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.models import Count

FIELDS = ("project_id", "user_id", "team_id", "total_credit", "expavg_credit", "expavg_time")


def forward(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Old = apps.get_model("backend", "UserCredit")
    New = apps.get_model("backend", "UserCreditPerProject")
    rows = Old.objects.order_by("user_id").values_list(*FIELDS).iterator(chunk_size=2000)
    batch = []
    for values in rows:
        batch.append(New(**dict(zip(FIELDS, values, strict=True))))
        if len(batch) == 2000:
            New.objects.bulk_create(batch)
            batch = []
    New.objects.bulk_create(batch)


def backward(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Old = apps.get_model("backend", "UserCredit")
    New = apps.get_model("backend", "UserCreditPerProject")
    twice = list(
        New.objects.values("user_id").annotate(n=Count("id")).filter(n__gt=1).values_list("user_id", flat=True)[:10]
    )
    if twice:
        raise RuntimeError(
            "cannot undo credit per project: users "
            + ", ".join(str(u) for u in twice)
            + " have credit in more than one project, which one row per user cannot hold"
        )
    Old.objects.bulk_create(
        Old(**dict(zip(FIELDS, values, strict=True))) for values in New.objects.order_by("id").values_list(*FIELDS)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0023_project_required"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(model_name="usercredit", name="user_credit_rac"),
        migrations.CreateModel(
            name="UserCreditPerProject",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "project",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="backend.project",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="credits",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="members",
                        to="backend.team",
                    ),
                ),
                ("total_credit", models.FloatField(default=0.0)),
                ("expavg_credit", models.FloatField(default=0.0)),
                ("expavg_time", models.FloatField(default=0.0)),
            ],
            options={
                "indexes": [models.Index(fields=["project", "-expavg_credit", "user"], name="user_credit_rac")],
                "constraints": [models.UniqueConstraint(fields=("project", "user"), name="user_credit_project_user")],
            },
        ),
        migrations.RunPython(forward, backward),
        migrations.DeleteModel(name="UserCredit"),
        migrations.RenameModel(old_name="UserCreditPerProject", new_name="UserCredit"),
        # credit by app: unique per project, the index leading with it
        migrations.RemoveConstraint(model_name="userappcredit", name="user_app_credit_unique"),
        migrations.RemoveConstraint(model_name="teamappcredit", name="team_app_credit_unique"),
        migrations.AlterField(
            model_name="userappcredit",
            name="user",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="app_credit",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="teamappcredit",
            name="team",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="app_credit",
                to="backend.team",
            ),
        ),
        migrations.AddConstraint(
            model_name="userappcredit",
            constraint=models.UniqueConstraint(fields=("project", "user", "app"), name="user_app_credit_unique"),
        ),
        migrations.AddConstraint(
            model_name="teamappcredit",
            constraint=models.UniqueConstraint(fields=("project", "team", "app"), name="team_app_credit_unique"),
        ),
    ]
