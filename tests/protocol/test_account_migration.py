"""Accounts per project (protocol migrations 0004-0005): every account of a database made when a
user had one key lands in the demo project with its key, so clients attached with it go on
working; after it, a user holds one key in each project they join."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("protocol", "0003_project_required")]


@pytest.mark.database
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("demo_exists", [True, False])
def test_existing_accounts_land_in_the_demo_project_with_their_keys(demo_exists):
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    old = executor.loader.project_state(BEFORE).apps
    Project = old.get_model("backend", "Project")
    Project.objects.filter(slug="demo").delete()
    if demo_exists:
        Project.objects.create(slug="demo", name="Demo project")
    Project.objects.create(slug="elsewhere", name="Another live project")
    User = old.get_model("auth", "User")
    keys = {}
    for name in ("alice", "bob"):
        user = User.objects.create(username=name)
        keys[user.pk] = old.get_model("protocol", "Account").objects.create(user=user, authenticator=f"key-{name}").pk
    User.objects.create(username="carol")  # no account: none is made

    executor = MigrationExecutor(connection)
    executor.migrate(latest)
    new = executor.loader.project_state(latest).apps
    Account = new.get_model("protocol", "Account")
    demo = new.get_model("backend", "Project").objects.get(slug="demo")
    rows = {row.user_id: row for row in Account.objects.all()}
    assert {user_id: (row.pk, row.project_id) for user_id, row in rows.items()} == {
        user_id: (pk, demo.pk) for user_id, pk in keys.items()
    }
    assert sorted(row.authenticator for row in rows.values()) == ["key-alice", "key-bob"]

    # one account per project: alice joins the other project with a key of her own
    alice = next(user_id for user_id, row in rows.items() if row.authenticator == "key-alice")
    elsewhere = new.get_model("backend", "Project").objects.get(slug="elsewhere")
    Account.objects.create(project=elsewhere, user_id=alice, authenticator="key-alice-elsewhere")
    with pytest.raises(IntegrityError), transaction.atomic():
        Account.objects.create(project=elsewhere, user_id=alice, authenticator="key-alice-again")
    with pytest.raises(IntegrityError), transaction.atomic():
        Account.objects.create(
            project=elsewhere, user_id=User.objects.get(username="carol").pk, authenticator="key-bob"
        )
