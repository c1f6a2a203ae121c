"""Migrating a database made before projects (DESIGN.md "Projects"; backend migrations 0021 to
0024): every row keeps its values, the demo's rows land in the default project "demo", each
volunteer world's rows in a project of the world's own, and the hosts of a world of volunteers
for the demo's app in the demo project, whose scheduler they talk to.

The rows are made by the programs that make them (``seed_demo``, the validator, ``manage.py
world``, the live demo world), one maker after another, and the test notes which maker made
which rows by the rows that appear, so each row's expected project is known from how the
database was built, not from any rule of the migration's. The database is then taken back to
the schema before projects, which drops every project column, and migrated forward again; every
row must come back with its values and in its maker's project. The tables checked are every
model with a project column, found from the models, not listed by hand.
"""

import io
from typing import Any

import pytest
from django.apps import apps as current_apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from backend.daemons import daemon_names, run_pass, validator
from backend.models import AppVersion, Host, Project
from protocol.models import Account, AppVersionFile
from tests.factories import (
    NOW,
    AppVersionFactory,
    FileFactory,
    ResultFactory,
    TeamFactory,
    UserCreditFactory,
    WorkunitFactory,
)
from world import live
from world.models import World

BEFORE = [("backend", "0020_workunit_bounded_queries"), ("world", "0005_engine_hosts"), ("protocol", "0001_initial")]

# Each table's key that survives the round trip: the primary key, but a credit row's user (its
# key before projects) and a daemon status's name (its key before; the demo's rows only, the
# one status per daemon there was then).
KEYS = {"UserCredit": "user_id", "DaemonStatus": "name"}
# Columns made anew by the migration, which the round trip cannot keep.
NEW_COLUMNS = {"project_id", "id"}


def project_models() -> dict[str, Any]:
    """Every model (of any app) whose rows belong to a project, by (app label, name)."""
    return {
        f"{model._meta.app_label}.{model.__name__}": model
        for model in current_apps.get_models()
        if any(f.name == "project" and f.related_model is Project for f in model._meta.concrete_fields)
    }


def rows_of(models: dict[str, Any]) -> dict[str, dict[Any, dict[str, Any]]]:
    """Every row of ``models`` (current or historical, by the same labels) by its KEYS key."""
    rows = {}
    for label, model in models.items():
        name = label.split(".")[1]
        key = KEYS.get(name, model._meta.pk.attname)
        found = model._base_manager.values()
        if name == "DaemonStatus" and "project_id" in {f.attname for f in model._meta.concrete_fields}:
            found = found.filter(project__slug=Project.DEMO_SLUG)
        rows[label] = {row[key]: row for row in found}
    return rows


class Makers:
    """Notes which maker made which rows: the keys of each table's rows that appear while it
    runs."""

    def __init__(self) -> None:
        self.made: dict[tuple[str, Any], str] = {}
        self.seen = self.keys()

    @staticmethod
    def keys() -> set[tuple[str, Any]]:
        return {(label, key) for label, rows in rows_of(project_models()).items() for key in rows}

    def run(self, maker: str, make: Any) -> Any:
        made = make()
        now = self.keys()
        for row in now - self.seen:
            self.made[row] = maker
        self.seen = now
        return made


def demo_credit(settings: Any) -> None:
    """A team with a volunteer of the demo in it, credited by the demo's validator with credit
    by app: the credit rows of users and teams, by app and by day."""
    demo = Project.demo()
    host = Host.objects.filter(project=demo).order_by("id")[0]
    version = AppVersionFactory(app__project=demo, app__name="demo_credit_app", version_num=300)
    UserCreditFactory(project=demo, user=host.owner, team=TeamFactory(project=demo, name="crunchers"))
    wu = WorkunitFactory(app=version.app, name="demo_credit_wu", rsc_fpops_est=1e12, need_validate=True)
    result = ResultFactory(workunit=wu, host=host, app_version=version, reported=True)
    FileFactory(result=result, md5_cksum="a")
    validator.run_once(project=demo, now=NOW, batch_size=10, credit_by_app=True)
    Account.for_user(host.owner, demo)  # the volunteer's account key, as the account page makes it
    for name in daemon_names():
        run_pass(name, project=demo, now=NOW)


def a_world(*argv: str) -> World:
    # A cushion of 8 unsent results instead of two files' worth (tests/world/test_world.py:
    # SMALL_CUSHION): two hosts drain it in the same rounds that make every kind of row (hosts,
    # results of each outcome, files, events, credit), which the test asserts before migrating;
    # the deeper default cushion only adds more rows of the same kinds, and minutes of drain.
    call_command("world", "--hosts", "2", "--days", "1", "--set", "cushion=8", *argv, stdout=io.StringIO())
    return World.objects.latest("pk")


def signed_file(world: World) -> None:
    """A signed file of the world's app version, as protocol's add_app_version makes one."""
    assert world.app_id is not None
    version = AppVersion.objects.filter(app_id=world.app_id).order_by("id")[0]
    AppVersionFile.objects.create(
        project_id=version.project_id,
        app_version=version,
        name=f"{version.app.name}_exe",
        nbytes=10,
        md5_cksum="0" * 32,
        file_signature="sig",
    )


@pytest.fixture
def files(settings, tmp_path):
    settings.BOINCWEB_DATA_DIR = tmp_path
    settings.DOWNLOAD_DIR = tmp_path / "download"
    settings.UPLOAD_DIR = tmp_path / "upload"


@pytest.mark.database
@pytest.mark.django_db(transaction=True)
def test_a_database_made_before_projects_migrates_each_row_into_its_makers_project(files, settings):
    makers = Makers()
    makers.run("demo", lambda: call_command("seed_demo", "--workunits", "4", "--hosts", "2", stdout=io.StringIO()))
    makers.run("demo", lambda: demo_credit(settings))
    plain = makers.run("world A", lambda: a_world("--locality", "--seed", "2"))
    engine = makers.run("world B", lambda: a_world("--seed", "3", "--set", 'engine_hosts=[{"count": 1}]'))
    makers.run("world A", lambda: signed_file(plain))
    # a world of volunteers for the demo's app: its hosts work for the demo project
    volunteers = makers.run("demo", lambda: live.start_demo(hosts=2, now=NOW))
    worlds = {"world A": plain.pk, "world B": engine.pk}

    models = project_models()
    before = rows_of(models)
    # every kind of row was made, and each maker made some
    assert all(before[label] for label in models), [label for label in models if not before[label]]
    assert set(makers.made.values()) == {"demo", "world A", "world B"}

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    executor = MigrationExecutor(connection)
    old = executor.loader.project_state(BEFORE).apps
    assert not any(f.name == "project" for f in old.get_model("backend", "Workunit")._meta.fields)
    executor.migrate(latest)
    new = executor.loader.project_state(latest).apps
    migrated = {label: new.get_model(*label.split(".")) for label in models}
    after = rows_of(migrated)

    World = new.get_model("world", "World")
    demo = new.get_model("backend", "Project").objects.get(slug=Project.DEMO_SLUG)
    project_of = {"demo": demo.pk, **{maker: World.objects.get(pk=pk).project_id for maker, pk in worlds.items()}}
    assert len(set(project_of.values())) == 3
    assert World.objects.get(pk=volunteers.pk).project_id == demo.pk

    for label, old_rows in before.items():
        new_rows = after[label]
        assert set(new_rows) == set(old_rows), label
        for key, old_row in old_rows.items():
            new_row = new_rows[key]
            kept = {name: value for name, value in new_row.items() if name not in NEW_COLUMNS}
            assert kept == {name: value for name, value in old_row.items() if name not in NEW_COLUMNS}, (label, key)
            if label.endswith(".DaemonStatus"):
                assert new_row["project_id"] == demo.pk
            else:
                assert new_row["project_id"] == project_of[makers.made[(label, key)]], (label, key)
    # the worlds' own daemon status had no place before projects (one row per daemon name)
    assert set(migrated["backend.DaemonStatus"].objects.values_list("project_id", flat=True)) == {demo.pk}
