"""Every BOINC row into its project (DESIGN.md "Projects"): each volunteer world's rows into a
project of the world's own, the rest into the default project, "demo".

Before projects, a world was told apart by its app (``World.app``, named ``w<id>_einstein``) and
by the prefix ``w<id>`` of its hosts' domain names (``w<id>-host<i>``, ``w<id>-engine<k>``),
its volunteers' user names and its data files' names (world.jobs, world.simulation). A world
of volunteers for a live project's app (``live_app``) has no rows of its own: its hosts work
for that app's project, so they stay there.
"""

from django.apps.registry import Apps
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.models import Q

DEMO = "demo"

# The tables whose rows hang off an app, a host, a workunit or a result.
BY_APP = ("AppVersion", "Workunit", "Result", "LocalityTrigger", "UserAppCredit", "TeamAppCredit", "AssimilatedResult")
BY_HOST = ("HostAppVersion", "HostFile")
EVERY_TABLE = (
    "App",
    "AppVersion",
    "Host",
    "HostAppVersion",
    "Team",
    "UserCredit",
    "UserAppCredit",
    "TeamAppCredit",
    "CreditHistory",
    "File",
    "HostFile",
    "LocalityTrigger",
    "Workunit",
    "Result",
    "LifecycleEvent",
    "AssimilatedResult",
)


def world_rows(apps: Apps, world, project) -> None:  # type: ignore[no-untyped-def]
    """Move one world's rows into ``project``."""
    model = lambda name: apps.get_model("backend", name)  # noqa: E731
    prefix = f"w{world.pk}"
    app_ids = list(
        model("App").objects.filter(Q(pk=world.app_id) | Q(name=f"{prefix}_einstein")).values_list("pk", flat=True)
    )
    model("App").objects.filter(pk__in=app_ids).update(project=project)
    for name in BY_APP:
        model(name).objects.filter(app_id__in=app_ids).update(project=project)
    hosts = model("Host").objects.filter(
        Q(domain_name__startswith=f"{prefix}-host") | Q(domain_name__startswith=f"{prefix}-engine")
    )
    hosts.update(project=project)
    host_ids = model("Host").objects.filter(project=project).values("pk")
    for name in BY_HOST:
        model(name).objects.filter(host_id__in=host_ids).update(project=project)
    wu_ids = model("Workunit").objects.filter(project=project).values("pk")
    result_ids = model("Result").objects.filter(project=project).values("pk")
    through = model("Workunit").input_files.through
    model("File").objects.filter(
        Q(pk__in=through.objects.filter(workunit_id__in=wu_ids).values("file_id"))
        | Q(result_id__in=result_ids)
        | Q(name__startswith=f"{prefix}_data")
    ).update(project=project)
    model("LifecycleEvent").objects.filter(
        Q(workunit_id__in=wu_ids) | Q(result_id__in=result_ids) | Q(host_id__in=host_ids)
    ).update(project=project)
    users = model("Host").objects.filter(project=project).values("owner_id")
    model("UserCredit").objects.filter(user_id__in=users).update(project=project)
    model("CreditHistory").objects.filter(kind="user", owner_id__in=users).update(project=project)
    apps.get_model("protocol", "AppVersionFile").objects.filter(
        app_version_id__in=model("AppVersion").objects.filter(project=project).values("pk")
    ).update(project=project)


def forward(apps: Apps, schema_editor: BaseDatabaseSchemaEditor | None) -> None:
    Project = apps.get_model("backend", "Project")
    demo, _ = Project.objects.get_or_create(slug=DEMO, defaults={"name": "Demo project"})
    for world in apps.get_model("world", "World").objects.order_by("pk"):
        if (world.settings or {}).get("live_app"):
            world.project = demo
        else:
            world.project = Project.objects.create(
                name=world.name or f"World {world.pk}",
                slug=f"world-{world.pk}",
                kind="world",
                simulated_time=world.start_time + int(world.clock),
            )
            world_rows(apps, world, world.project)
        world.save(update_fields=["project"])
    for name in EVERY_TABLE:
        apps.get_model("backend", name).objects.filter(project__isnull=True).update(project=demo)
    apps.get_model("protocol", "AppVersionFile").objects.filter(project__isnull=True).update(project=demo)
    DaemonStatus = apps.get_model("backend", "DaemonStatus")
    fields = ("name", "enabled", "last_pass_time", "last_work_done", "total_work_done", "passes", "last_error")
    DaemonStatus.objects.bulk_create(
        DaemonStatus(project=demo, last_retry_time=old.last_retry_time, **{f: getattr(old, f) for f in fields})
        for old in apps.get_model("backend", "DaemonStatusBeforeProjects").objects.order_by("name")
    )


def backward(apps: Apps, schema_editor: BaseDatabaseSchemaEditor | None) -> None:
    """The default project's daemon status back into the old table (the project columns go
    with 0021)."""
    Old = apps.get_model("backend", "DaemonStatusBeforeProjects")
    fields = ("enabled", "last_pass_time", "last_work_done", "total_work_done", "passes", "last_error")
    for row in apps.get_model("backend", "DaemonStatus").objects.filter(project__slug=DEMO):
        Old.objects.update_or_create(
            name=row.name, defaults={"last_retry_time": row.last_retry_time, **{f: getattr(row, f) for f in fields}}
        )


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0021_projects"),
        ("world", "0006_projects"),
        ("protocol", "0002_projects"),
    ]

    operations = [migrations.RunPython(forward, backward)]
