"""Deleting a world, and on request its project: every row of the project and its files.

A world's project (``world-<id>``) is BOINC's unit of everything (DESIGN.md "Projects"), so
deleting it removes every row that names it (every table with the project foreign key: apps,
hosts, workunits, results, files, credit, lifecycle events, daemons' status, ...) and the
project's data directory (``backend.daemons.hierarchy.projects_root``). Without the project, only the world's own rows
go (the World, its samples and its engine hosts' records) and the project stays, with its pages.

With the project go its simulated volunteers' Django users (``volunteers``): the owners of its
hosts who are no one else. A user who has any row outside the project (a host, an account or
credit in another project, a scenario of the lab, an entry of the admin's log, a group), who
is staff, or who has ever logged in is a real person, and stays.

Deleting is one bulk DELETE per table, in one transaction, in dependency order (a table before
the tables it refers to), never the ORM's per-row cascade with its signals: a world of 10,000
hosts has hundreds of thousands of rows, and the statements' count does not grow with them.
Every statement names the project or the world, so another project's rows are not touched; if
a row of another project still refers to one of this project's (which nothing in boincweb
makes), the database's foreign-key check refuses the commit and nothing is deleted.

Refused, with nothing changed (``Refused``): a world that is running (its chain of RQ slices or
the live demo's driver may write at any moment: pause it first), a world one of whose slices
is still in flight (it holds the world's Redis lock, ``world.jobs.lock_key``), and with the
project, a live project (the demo, or any project real clients use) or a project another world
also uses.
"""

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import django_rq
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, models, router, transaction

from backend.daemons.hierarchy import projects_root
from backend.models import Host, Project
from world import jobs
from world.models import EngineHostRun, EngineRecordChunk, World, WorldSample


class Refused(Exception):
    """Why a world (or its project) cannot be deleted now; nothing was changed."""


@dataclass
class Deleted:
    """What a deletion removed: rows per table (``app_label.Model``), the project's slug ("" when
    it was kept or there was none), its volunteers' Django users and the directories and files
    it removed."""

    world: int
    name: str
    project: str = ""
    rows: dict[str, int] = field(default_factory=dict)
    volunteers: int = 0
    paths: list[str] = field(default_factory=list)

    @property
    def project_rows(self) -> int:
        return sum(n for label, n in self.rows.items() if not label.startswith("world."))


def project_tables() -> list[type[models.Model]]:
    """Every model whose rows belong to a project (its non-null foreign key to Project, which
    ``backend.models.project_field`` makes), in deletion order: each before the models its
    non-null foreign keys refer to. The nullable ones (a workunit's canonical result) may point
    either way: the database checks them at commit (Django makes foreign keys deferred)."""
    owned = [
        model
        for model in apps.get_models()
        if any(f.many_to_one and f.related_model is Project and not f.null for f in model._meta.fields)
    ]
    ordered: list[type[models.Model]] = []
    remaining = list(owned)
    while remaining:
        free = next(
            (
                model
                for model in remaining
                if not any(refers_to(other, model) for other in remaining if other is not model)
            ),
            None,
        )
        if free is None:
            raise RuntimeError(f"the project's tables refer to each other in a cycle: {remaining}")
        ordered.append(free)
        remaining.remove(free)
    return ordered


def refers_to(model: type[models.Model], target: type[models.Model]) -> bool:
    """Whether ``model`` has a non-null foreign key (or one-to-one) to ``target``."""
    return any((f.many_to_one or f.one_to_one) and f.related_model is target and not f.null for f in model._meta.fields)


def link_tables(tables: list[type[models.Model]]) -> list[tuple[type[models.Model], str]]:
    """The many-to-many tables of the project's models (a workunit's input files), each with
    the name of its foreign key to the owning side, whose project its rows follow."""
    links = []
    for model in tables:
        for m2m in model._meta.local_many_to_many:
            through = m2m.remote_field.through
            if through is not None and through._meta.auto_created:
                links.append((through, m2m.m2m_field_name()))
    return links


def outside_references(world: World, project: Project, tables: list[type[models.Model]]) -> list[str]:
    """Rows outside the project's tables, but for the world's own, that refer to its rows:
    another world whose app or engine host is the project's, say. Their foreign keys would be
    broken, so the deletion is refused while there are any."""
    found = []
    own: dict[type[models.Model], dict[str, object]] = {World: {"pk": world.pk}, EngineHostRun: {"world": world}}
    for model in apps.get_models():
        if model in tables:
            continue
        for f in model._meta.fields:
            if (f.many_to_one or f.one_to_one) and f.related_model in tables:
                rows = model._default_manager.filter(**{f"{f.name}__project": project}).exclude(**own.get(model, {}))
                n = rows.count()
                if n:
                    found.append(f"{n} {model._meta.label} row(s) by {f.name}")
    return found


def delete_world(world_id: int, *, with_project: bool) -> Deleted:
    """Delete world ``world_id`` and with ``with_project`` its project; raise ``Refused`` with
    the reason (and change nothing) when it may not be deleted now."""
    world = World.objects.defer("state").select_related("project").filter(pk=world_id).first()
    if world is None:
        raise Refused(f"No world {world_id}.")
    if world.status == World.Status.RUNNING:
        jobs.check_world(world)  # a world whose job died is failed, and may go
    if world.status == World.Status.RUNNING:
        raise Refused(f"World {world.pk} ({world.name}) is running: pause it, or let it finish, before deleting it.")
    project = world.project if with_project else None
    if project is not None:
        refuse_project(world, project)
    redis = django_rq.get_queue(jobs.QUEUE).connection
    lock = redis.lock(jobs.lock_key(world.pk), timeout=jobs.LOCK_SECONDS, blocking=False)
    if not lock.acquire():
        raise Refused(f"A slice of world {world.pk} ({world.name}) is still running; try again in a few seconds.")
    deleted = Deleted(world.pk, world.name, project.slug if project else "")
    try:
        try:
            with transaction.atomic():
                deleted.rows.update(delete_world_rows(world.pk))
                if project is not None:
                    # first, while the project's hosts still say whose they are; the hosts,
                    # accounts and credit that refer to the users go next, before the
                    # database checks the foreign keys at the commit
                    deleted.volunteers = raw_delete(volunteers(project))
                    deleted.rows.update(delete_project_rows(project))
        except IntegrityError as exc:
            what = f"project {project.slug}" if project else f"world {world.pk}"
            raise Refused(
                f"Rows of another project still refer to rows of {what}; nothing was deleted ({exc})."
            ) from None
        redis.delete(jobs.chain_key(world.pk))
    finally:
        lock.release()
    deleted.paths = remove_files(world, project)
    return deleted


def refuse_project(world: World, project: Project) -> None:
    if project.is_live or project.slug == Project.DEMO_SLUG:
        raise Refused(
            f"Project {project.slug} is a live project (the world volunteers for its app); it is not "
            "deleted with a world. Delete the world alone."
        )
    others = list(World.objects.filter(project=project).exclude(pk=world.pk).values_list("pk", flat=True))
    if others:
        raise Refused(f"Project {project.slug} is also world {', '.join(map(str, others))}'s; delete the world alone.")
    found = outside_references(world, project, project_tables())
    if found:
        raise Refused(f"Rows outside project {project.slug} refer to its rows: {'; '.join(found)}.")


def raw_delete(queryset: models.QuerySet[models.Model]) -> int:
    """One DELETE for the rows of ``queryset``: no signals, no per-row cascade."""
    return queryset._raw_delete(router.db_for_write(queryset.model))


def delete_world_rows(world_id: int) -> dict[str, int]:
    """The world's own rows, the world last; the world only while it is not running (a
    compare-and-set: a start that won the race keeps it, and the transaction is undone)."""
    rows = {
        "world.EngineRecordChunk": raw_delete(EngineRecordChunk.objects.filter(run__world_id=world_id)),
        "world.EngineHostRun": raw_delete(EngineHostRun.objects.filter(world_id=world_id)),
        "world.WorldSample": raw_delete(WorldSample.objects.filter(world_id=world_id)),
    }
    rows["world.World"] = raw_delete(World.objects.filter(pk=world_id).exclude(status=World.Status.RUNNING))
    if not rows["world.World"]:
        raise Refused(f"World {world_id} started meanwhile; pause it before deleting it.")
    return rows


def volunteers(project: Project) -> models.QuerySet[models.Model]:
    """The project's simulated volunteers: the users who own its hosts and are no one else
    (not staff, never logged in, and with no row outside the project that names them). One
    query whatever the number of hosts: a subquery per table that refers to users."""
    User = get_user_model()
    users = User._default_manager.filter(
        pk__in=Host.objects.filter(project=project).values("owner_id"),
        is_staff=False,
        is_superuser=False,
        last_login=None,
    )
    for model in apps.get_models(include_auto_created=True):
        for f in model._meta.fields:
            if not ((f.many_to_one or f.one_to_one) and f.related_model is User):
                continue
            rows = model._default_manager.filter(**{f"{f.name}__isnull": False})
            if any(g.many_to_one and g.related_model is Project for g in model._meta.fields):
                rows = rows.exclude(project=project)
            users = users.exclude(pk__in=rows.values(f.name))
    return users


def delete_project_rows(project: Project) -> dict[str, int]:
    """Every row of ``project``: its many-to-many links, then each table in dependency order,
    then the project itself."""
    tables = project_tables()
    rows = {}
    for through, owner in link_tables(tables):
        rows[through._meta.label] = raw_delete(through._default_manager.filter(**{f"{owner}__project": project}))
    for model in tables:
        rows[model._meta.label] = raw_delete(model._default_manager.filter(project=project))
    rows[Project._meta.label] = raw_delete(Project.objects.filter(pk=project.pk))
    return rows


def remove_files(world: World, project: Project | None) -> list[str]:
    """After the commit: the project's data directory, and the world's own files (its plan
    classes' spec, world.simulation.Simulation.plan_class_spec). Returns what was there."""
    removed = []
    spec = Path(settings.BOINCWEB_DATA_DIR) / "worlds" / f"{world.prefix}_plan_class_spec.xml"
    if spec.exists():
        spec.unlink()
        removed.append(str(spec))
    root = projects_root(project) if project is not None else None
    if root is not None and root.exists():
        shutil.rmtree(root)
        removed.append(str(root))
    return removed
