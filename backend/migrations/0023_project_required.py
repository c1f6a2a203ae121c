"""Projects, after 0022 has filled in every row's: the project column is required, the
indexes daemons and pages filter by lead with it, and app and team names are unique per
project, as in BOINC's database of each project."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0022_project_rows"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.DeleteModel(
            name="DaemonStatusBeforeProjects",
        ),
        migrations.RemoveConstraint(
            model_name="credithistory",
            name="credit_history_unique",
        ),
        migrations.RemoveIndex(
            model_name="hostfile",
            name="host_file_name",
        ),
        migrations.RemoveIndex(
            model_name="result",
            name="ind_res_st",
        ),
        migrations.RemoveIndex(
            model_name="result",
            name="res_deadline",
        ),
        migrations.RemoveIndex(
            model_name="result",
            name="res_filedel",
        ),
        migrations.RemoveIndex(
            model_name="result",
            name="res_unsent_order",
        ),
        migrations.RemoveIndex(
            model_name="result",
            name="res_received_valid",
        ),
        migrations.RemoveIndex(
            model_name="result",
            name="res_unsent_create",
        ),
        migrations.RemoveIndex(
            model_name="team",
            name="team_rac",
        ),
        migrations.RemoveIndex(
            model_name="usercredit",
            name="user_credit_rac",
        ),
        migrations.RemoveIndex(
            model_name="workunit",
            name="wu_filedel",
        ),
        migrations.RemoveIndex(
            model_name="workunit",
            name="wu_transition_id",
        ),
        migrations.AlterField(
            model_name="app",
            name="name",
            field=models.CharField(max_length=254),
        ),
        migrations.AlterField(
            model_name="app",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="apps", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="appversion",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="app_versions",
                to="backend.project",
            ),
        ),
        migrations.AlterField(
            model_name="assimilatedresult",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="credithistory",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="daemonstatus",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="daemons",
                to="backend.project",
            ),
        ),
        migrations.AlterField(
            model_name="file",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="host",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="hosts", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="hostappversion",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="hostfile",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="lifecycleevent",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="localitytrigger",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="result",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="results",
                to="backend.project",
            ),
        ),
        migrations.AlterField(
            model_name="team",
            name="name",
            field=models.CharField(max_length=254),
        ),
        migrations.AlterField(
            model_name="team",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="teams", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="teamappcredit",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="userappcredit",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="usercredit",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
        migrations.AlterField(
            model_name="workunit",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="workunits",
                to="backend.project",
            ),
        ),
        migrations.AddIndex(
            model_name="appversion",
            index=models.Index(fields=["project", "platform"], name="av_project_platform"),
        ),
        migrations.AddIndex(
            model_name="host",
            index=models.Index(fields=["project", "id"], name="host_project_id"),
        ),
        migrations.AddIndex(
            model_name="hostfile",
            index=models.Index(fields=["project", "name"], name="host_file_name"),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(fields=["project", "server_state", "-priority"], name="ind_res_st"),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(
                condition=models.Q(("server_state", 2)),
                fields=["project", "-priority", "workunit", "id"],
                name="res_unsent_order",
            ),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(
                condition=models.Q(("server_state", 2)),
                fields=["project", "create_time", "id"],
                name="res_unsent_create",
            ),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(fields=["project", "server_state", "report_deadline"], name="res_deadline"),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(fields=["project", "file_delete_state"], name="res_filedel"),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(
                condition=models.Q(("validate_state", 1)),
                fields=["project", "received_time"],
                name="res_received_valid",
            ),
        ),
        migrations.AddIndex(
            model_name="team",
            index=models.Index(fields=["project", "-expavg_credit", "id"], name="team_rac"),
        ),
        migrations.AddIndex(
            model_name="usercredit",
            index=models.Index(fields=["project", "-expavg_credit", "user"], name="user_credit_rac"),
        ),
        migrations.AddIndex(
            model_name="workunit",
            index=models.Index(fields=["project", "file_delete_state"], name="wu_filedel"),
        ),
        migrations.AddIndex(
            model_name="workunit",
            index=models.Index(fields=["project", "transition_time", "id"], name="wu_transition_id"),
        ),
        migrations.AddConstraint(
            model_name="app",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="app_project_name"),
        ),
        migrations.AddConstraint(
            model_name="credithistory",
            constraint=models.UniqueConstraint(
                fields=("project", "kind", "owner_id", "day"), name="credit_history_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="daemonstatus",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="daemon_status_unique"),
        ),
        migrations.AddConstraint(
            model_name="team",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="team_project_name"),
        ),
    ]
