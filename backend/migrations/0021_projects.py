"""Projects (DESIGN.md "Projects"): the Project table, and a column naming its project on
every BOINC row, empty until 0022 fills it. The daemon status, whose name was its key, is made
anew keyed per project; 0022 copies the old rows into it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0020_workunit_bounded_queries"),
    ]

    operations = [
        migrations.CreateModel(
            name="Project",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("slug", models.SlugField(unique=True)),
                (
                    "kind",
                    models.CharField(choices=[("live", "Live"), ("world", "World")], default="live", max_length=5),
                ),
                ("config_xml", models.TextField(blank=True, help_text="The project's BOINC config.xml.")),
                ("simulated_time", models.BigIntegerField(blank=True, null=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["id"]},
        ),
        migrations.RenameModel("DaemonStatus", "DaemonStatusBeforeProjects"),
        migrations.CreateModel(
            name="DaemonStatus",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "project",
                    models.ForeignKey(
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="daemons",
                        to="backend.project",
                    ),
                ),
                ("name", models.CharField(max_length=32)),
                ("enabled", models.BooleanField(default=True)),
                ("last_pass_time", models.DateTimeField(blank=True, null=True)),
                ("last_work_done", models.IntegerField(default=0)),
                ("total_work_done", models.BigIntegerField(default=0)),
                ("passes", models.BigIntegerField(default=0)),
                ("last_error", models.TextField(blank=True)),
                ("last_retry_time", models.BigIntegerField(default=0)),
            ],
            options={"ordering": ["project", "name"], "verbose_name_plural": "daemon status"},
        ),
        migrations.AddField(
            model_name="app",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="apps",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="appversion",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="app_versions",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="assimilatedresult",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="credithistory",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="file",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="host",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="hosts",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="hostappversion",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="hostfile",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="lifecycleevent",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="localitytrigger",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="result",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="results",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="team",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="teams",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="teamappcredit",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="userappcredit",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="usercredit",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
        migrations.AddField(
            model_name="workunit",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="workunits",
                to="backend.project",
            ),
        ),
    ]
