"""Migrating a database made before projects (DESIGN.md "Projects"; backend migrations 0021 to
0023): every row keeps its values, the demo's rows land in the default project "demo", and each
volunteer world's rows (told apart then by its app and the prefix ``w<id>`` of its hosts, users
and files) in a project of the world's own; a world of volunteers for the demo's app keeps its
hosts in the demo project, whose scheduler they talk to."""

from collections import defaultdict
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("backend", "0020_workunit_bounded_queries"), ("world", "0005_engine_hosts"), ("protocol", "0001_initial")]

# the tables whose rows belong to a project after the migration, and how a row is known
TABLES = {
    "backend": [
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
        "DaemonStatus",
    ],
    "protocol": ["AppVersionFile"],
}


def snapshot(apps: Any) -> dict[str, dict[Any, dict[str, Any]]]:
    """Every row of TABLES by its key: its primary key, but the daemon status's name (its
    primary key before, an id after)."""
    rows: dict[str, dict[Any, dict[str, Any]]] = {}
    for app_label, tables in TABLES.items():
        for table in tables:
            model = apps.get_model(app_label, table)
            key = {"DaemonStatus": "name", "UserCredit": "user_id"}.get(table, model._meta.pk.attname)
            rows[table] = {row[key]: row for row in model.objects.values()}
    return rows


class Populate:
    """Rows at the pre-project schema, each with the slug of the project it must land in."""

    def __init__(self, apps: Any) -> None:
        self.apps = apps
        self.expected: dict[tuple[str, Any], str] = {}
        self.n = 0

    def add(self, table: str, slug: str, app_label: str = "backend", **fields: Any) -> Any:
        row = self.apps.get_model(app_label, table).objects.create(**fields)
        self.expected[(table, row.user_id if table == "UserCredit" else row.pk)] = slug
        return row

    def user(self, name: str) -> Any:
        return self.apps.get_model("auth", "User").objects.create(username=name)

    def project(self, slug: str, app_name: str, prefix: str, *, engine: bool = True) -> None:
        """An app with its version, hosts, a workunit with two results, files, credit and
        events, named as the demo (``prefix`` "") or a world (``prefix`` "w<id>") names them."""
        host_name = f"{prefix}-host" if prefix else "volunteer-host-"
        data = f"{prefix}_data000000" if prefix else "demo_input"
        platform = f"{prefix}-x86_64-pc-linux-gnu" if prefix else "x86_64-pc-linux-gnu"
        app = self.add("App", slug, name=app_name, create_time=5)
        version = self.add("AppVersion", slug, app=app, version_num=100, platform=platform, flops=2e9, pfc_n=3.5)
        self.add(
            "AppVersionFile",
            slug,
            app_label="protocol",
            app_version=version,
            name=f"{app_name}_exe",
            nbytes=10,
            md5_cksum="0" * 32,
            file_signature="sig",
        )
        volunteer = self.user(f"{prefix}-volunteer0" if prefix else "volunteer")
        host = self.add("Host", slug, owner=volunteer, domain_name=f"{host_name}0", p_ncpus=4, total_credit=7.25)
        hosts = [host]
        if engine:
            engine_owner = self.user(f"{prefix}-engine-volunteer0")
            hosts.append(self.add("Host", slug, owner=engine_owner, domain_name=f"{prefix}-engine0", p_ncpus=2))
        self.add("HostAppVersion", slug, host=host, app_version=version, turnaround_avg=12.5)
        self.add("HostFile", slug, host=host, name=data, reported_time=99)
        input_file = self.add("File", slug, name=data, kind="input", nbytes=1 << 20, sticky=True)
        self.add("LocalityTrigger", slug, app=app, file_name=data, in_working_set=True)
        wu = self.add("Workunit", slug, app=app, name=f"{data}__{app_name}_1", create_time=7, transition_time=1234)
        wu.input_files.add(input_file)
        results = [
            self.add(
                "Result",
                slug,
                workunit=wu,
                app=app,
                name=f"{wu.name}_{k}",
                host=hosts[k % len(hosts)],
                user=hosts[k % len(hosts)].owner,
                server_state=5,
                outcome=1,
                granted_credit=1.5 + k,
            )
            for k in range(2)
        ]
        self.add("File", slug, name=f"{results[0].name}_r1_0", kind="output", result=results[0], nbytes=64)
        self.add("LifecycleEvent", slug, time=8, actor="transitioner", workunit=wu, field="transition_time", new=8)
        self.add("LifecycleEvent", slug, time=9, actor="scheduler", result=results[1], workunit=wu, field="outcome")
        self.add("LifecycleEvent", slug, time=10, actor=volunteer.username, host=host, field="max_ncpus_pct")
        self.add("AssimilatedResult", slug, workunit=wu, app=app, canonical_result=results[0], output_nbytes=64)
        self.add("UserCredit", slug, user=volunteer, total_credit=3.0, expavg_credit=1.0)
        self.add("UserAppCredit", slug, user=volunteer, app=app, njobs=2, total=3.0)
        self.add("CreditHistory", slug, kind="user", owner_id=volunteer.pk, day=19000, total_credit=3.0)


@pytest.mark.database
@pytest.mark.django_db(transaction=True)
def test_a_populated_database_migrates_into_projects_keeping_every_row():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    old = executor.loader.project_state(BEFORE).apps
    rows = Populate(old)

    # the demo project: its app, volunteers, a team with credit, the daemons' status
    rows.project("demo", "example_app", "", engine=False)
    team = rows.add("Team", "demo", name="crunchers", total_credit=9.0)
    app = old.get_model("backend", "App").objects.get(name="example_app")
    rows.add("TeamAppCredit", "demo", team=team, app=app, njobs=1, total=9.0)
    rows.add("CreditHistory", "demo", kind="team", owner_id=team.pk, day=19000, total_credit=9.0)
    rows.add("DaemonStatus", "demo", name="transitioner", passes=12, total_work_done=40)
    rows.add("DaemonStatus", "demo", name="file_deleter", last_retry_time=777)

    # two worlds of their own, one of them with engine hosts, and one world of volunteers for
    # the demo's app, whose hosts work for the demo project
    World = old.get_model("world", "World")
    worlds = []
    for k, engine in ((0, True), (1, False)):
        world = World.objects.create(name=f"world {k}", start_time=1_800_000_000, clock=3600.0 * (k + 1))
        rows.project(f"world-{world.pk}", f"w{world.pk}_einstein", f"w{world.pk}", engine=engine)
        world.app = old.get_model("backend", "App").objects.get(name=f"w{world.pk}_einstein")
        world.save()
        worlds.append(world)
    live = World.objects.create(name="volunteers", settings={"live_app": "example_app"})
    live_owner = rows.user(f"w{live.pk}-volunteer0")
    rows.add("Host", "demo", owner=live_owner, domain_name=f"w{live.pk}-host0")

    before = snapshot(old)
    executor = MigrationExecutor(connection)
    executor.migrate(latest)
    new = executor.loader.project_state(latest).apps
    after = snapshot(new)

    Project = new.get_model("backend", "Project")
    slug_of = dict(Project.objects.values_list("id", "slug"))
    assert sorted(slug_of.values()) == sorted(["demo", *(f"world-{w.pk}" for w in worlds)])
    for world in worlds:
        project = Project.objects.get(slug=f"world-{world.pk}")
        assert (project.name, project.kind) == (world.name, "world")
        assert project.simulated_time == world.start_time + int(world.clock)
    world_project = dict(new.get_model("world", "World").objects.values_list("id", "project__slug"))
    assert world_project == {**{w.pk: f"world-{w.pk}" for w in worlds}, live.pk: "demo"}

    landed: dict[str, str] = {}
    for table, old_rows in before.items():
        new_rows = after[table]
        assert set(new_rows) == set(old_rows), table
        for key, old_row in old_rows.items():
            new_row = dict(new_rows[key])
            project_id = new_row.pop("project_id")
            if table in ("DaemonStatus", "UserCredit"):
                new_row.pop("id")
            assert new_row == old_row, (table, key)
            landed[f"{table} {key}"] = slug_of[project_id]
    expected = {f"{table} {key}": slug for (table, key), slug in rows.expected.items()}
    assert landed == expected
    # every kind of row was there to migrate, in each of the three projects
    by_table: dict[str, set[str]] = defaultdict(set)
    for name, slug in landed.items():
        by_table[name.split()[0]].add(slug)
    assert {table for table, slugs in by_table.items() if len(slugs) == 3} >= {
        "App",
        "Host",
        "Workunit",
        "Result",
        "File",
        "LifecycleEvent",
        "UserCredit",
    }
