"""The figures of BOINC's server status page (html/user/server_status.php), read from the database
and from Redis.

Every count of ``server_status`` runs over an index the daemons already rely on
(reference/server.md §1.10), and none runs over the whole result or workunit table: OVER results
are never counted. The users, computers and run-time figures of ``community`` do read the host
table and the results received in the past day, so, as BOINC does with its own status page, they
are cached (COMMUNITY_TTL) and shown by status.json, status.xml and a panel of the HTML page of
their own that polls once a minute, never by the panel that polls every 2 s.

The HTML page, status.json and status.xml read the queue counts and the tasks by app from
``cached_figures``, as BOINC's page reads its "task data" from a cache (STATUS_PAGE_TTL, an hour)
and says how old it is: the periodic daemon job refreshes them after every pass
(``record_history``), and a page that finds them older than FIGURES_MAX_AGE (no periodic job
running, or Redis gone) counts again and stores what it counted for the other web processes. So
a page view makes no count over the result or workunit table while the periodic job runs.

The recent history of the queues is a list of samples in Redis, one per pass of the periodic
daemon job (``record_history``), drawn as small charts on the HTML page.
"""

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast
from xml.etree import ElementTree

import redis
from django.conf import settings
from django.core.cache import cache
from django.db.models import Avg, Count, Max, Min, Q, Sum
from django.utils import timezone
from rq import Worker
from rq.queue import Queue

from backend.daemons import daemon_names
from backend.models import (
    App,
    AssimilateState,
    DaemonStatus,
    Host,
    Project,
    Result,
    ServerState,
    UserCredit,
    ValidateState,
    Workunit,
)

# A daemon whose last pass is older than this is shown as not running.
RUNNING_WINDOW = timedelta(minutes=2)

DAY = 86400
# Seconds the community figures are reused; BOINC keeps its own for an hour and asks readers of
# the XML not to poll more often than every ten minutes.
COMMUNITY_TTL = 60
COMMUNITY_CACHE_KEY = "boincweb:server_status:community"


@dataclass(frozen=True)
class Daemon:
    name: str
    status: str  # "running", "not running" or "disabled"
    last_pass_time: str  # ISO 8601, or "" when it never ran
    last_work_done: int
    passes: int
    last_error: str

    @property
    def last_pass(self) -> datetime | None:
        """``last_pass_time`` as an aware datetime for the page (None when it never ran)."""
        return datetime.fromisoformat(self.last_pass_time) if self.last_pass_time else None


@dataclass(frozen=True)
class AppTasks:
    id: int
    name: str
    unsent: int
    in_progress_cpu: int
    in_progress_gpu: int
    need_validate: int
    ready_to_assimilate: int

    @property
    def in_progress(self) -> int:
        return self.in_progress_cpu + self.in_progress_gpu


@dataclass(frozen=True)
class AppRuntime:
    """Run times in hours (rounded up to 1/100 h, as BOINC shows them) of an app's valid
    results received in the past day, and how many users returned them."""

    avg_runtime: float = 0.0
    min_runtime: float = 0.0
    max_runtime: float = 0.0
    users: int = 0


@dataclass(frozen=True)
class Community:
    """BOINC's users and computers figures, with the per-app run times; users' credit is
    their UserCredit rows' (what the validator grants them, server_status.php's user table),
    and the floating-point speed their recent average credit summed / 200."""

    update_time: int
    users_with_recent_credit: int
    users_with_credit: int
    users_registered_in_past_24_hours: int
    hosts_with_recent_credit: int
    hosts_with_credit: int
    hosts_registered_in_past_24_hours: int
    current_floating_point_speed: float  # GigaFLOPS: recent average credit per day / 200
    runtimes: dict[int, AppRuntime] = field(default_factory=dict)  # app id -> AppRuntime

    def runtime(self, app_id: int) -> AppRuntime:
        return self.runtimes.get(app_id, AppRuntime())


@dataclass(frozen=True)
class RQQueue:
    index: int
    name: str
    queued: int
    started: int
    failed: int


@dataclass(frozen=True)
class RQState:
    ok: bool
    error: str
    workers: int
    queues: list[RQQueue] = field(default_factory=list)


@dataclass(frozen=True)
class ServerStatus:
    update_time: int
    figures_time: int  # when the counts and the tasks by app were counted (Unix seconds)
    daemons: list[Daemon]
    results_ready_to_send: int
    results_in_progress: int
    workunits_waiting_for_validation: int
    workunits_waiting_for_assimilation: int
    workunits_waiting_for_deletion: int
    results_waiting_for_deletion: int
    transitioner_backlog_workunits: int
    transitioner_backlog_hours: float
    apps: list[AppTasks]
    rq: RQState
    community: Community | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["apps"] = [dict(asdict(app), in_progress=app.in_progress) for app in self.apps]
        if self.community is not None:
            for row in data["apps"]:
                row.update(asdict(self.community.runtime(row["id"])))
            del data["community"]["runtimes"]
        return data


def daemon_states(now_dt: datetime, project: Project) -> list[Daemon]:
    """Every registered daemon and every daemon that has reported a pass over the project, by
    name."""
    rows = {row.name: row for row in DaemonStatus.objects.filter(project=project)}
    names = list(daemon_names()) + sorted(set(rows) - set(daemon_names()))
    daemons = []
    for name in names:
        row = rows.get(name)
        if row is None:
            daemons.append(Daemon(name, "not running", "", 0, 0, ""))
            continue
        if not row.enabled:
            status = "disabled"
        elif row.last_pass_time and now_dt - row.last_pass_time <= RUNNING_WINDOW:
            status = "running"
        else:
            status = "not running"
        last = row.last_pass_time.isoformat() if row.last_pass_time else ""
        daemons.append(Daemon(name, status, last, row.last_work_done, row.passes, row.last_error))
    return daemons


def app_tasks(project: Project) -> list[AppTasks]:
    """Per app of the project: unsent results, in-progress results split by CPU/GPU version,
    WUs waiting."""
    results = (
        Result.objects.filter(project=project, server_state__lte=ServerState.IN_PROGRESS)
        .values("app_id", "server_state")
        .annotate(
            n=Count("id"),
            gpu=Count("id", filter=Q(app_version__gpu_usage__gt=0)),
        )
    )
    unsent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    gpu: dict[int, int] = {}
    for row in results:
        app_id = row["app_id"]
        if row["server_state"] == ServerState.IN_PROGRESS:
            gpu[app_id] = gpu.get(app_id, 0) + row["gpu"]
            cpu[app_id] = cpu.get(app_id, 0) + row["n"] - row["gpu"]
        else:
            unsent[app_id] = unsent.get(app_id, 0) + row["n"]
    validating = dict(
        Workunit.objects.filter(project=project, need_validate=True)
        .values("app_id")
        .annotate(n=Count("id"))
        .values_list("app_id", "n")
    )
    assimilating = dict(
        Workunit.objects.filter(project=project, assimilate_state=AssimilateState.READY)
        .values("app_id")
        .annotate(n=Count("id"))
        .values_list("app_id", "n")
    )
    return [
        AppTasks(
            app.id,
            app.name,
            unsent.get(app.id, 0),
            cpu.get(app.id, 0),
            gpu.get(app.id, 0),
            validating.get(app.id, 0),
            assimilating.get(app.id, 0),
        )
        for app in App.objects.filter(project=project).only("id", "name")
    ]


def rq_state() -> RQState:
    """The RQ queues of settings.RQ_QUEUES with their job counts, and the live workers."""
    client = _redis()
    try:
        queues = []
        for index, name in enumerate(settings.RQ_QUEUES):
            queue = Queue(name, connection=client)
            queues.append(
                RQQueue(index, name, queue.count, queue.started_job_registry.count, queue.failed_job_registry.count)
            )
        return RQState(True, "", len(Worker.all(connection=client)), queues)
    except (redis.exceptions.RedisError, OSError) as exc:
        return RQState(False, str(exc), 0, [])
    finally:
        client.close()


def hours(seconds: float) -> float:
    """``seconds`` in hours rounded up to 1/100 h (BOINC's status page)."""
    return math.ceil(round(seconds / 36, 6)) / 100


def app_runtimes(now: int, project: Project) -> dict[int, AppRuntime]:
    """{app id: AppRuntime} over the valid results received in the day before ``now``."""
    rows = (
        Result.objects.filter(project=project, validate_state=ValidateState.VALID, received_time__gt=now - DAY)
        .values("app_id")
        .annotate(
            avg=Avg("elapsed_time"),
            low=Min("elapsed_time"),
            high=Max("elapsed_time"),
            users=Count("user_id", distinct=True),
        )
    )
    return {
        row["app_id"]: AppRuntime(hours(row["avg"]), hours(row["low"]), hours(row["high"]), row["users"])
        for row in rows
    }


def community(now: int, project: Project) -> Community:
    """The users and computers figures of ``project`` at Unix time ``now`` (the project's
    clock): "recent credit" is a recent average credit above 1, "credit" a total credit above
    1, as on BOINC's page."""
    hosts = Host.objects.filter(project=project).aggregate(
        with_credit=Count("id", filter=Q(total_credit__gt=1)),
        with_recent_credit=Count("id", filter=Q(expavg_credit__gt=1)),
        registered=Count("id", filter=Q(create_time__gt=now - DAY)),
    )
    # the users' credit rows in the project, as the validator grants it (server_status.php:
    # the user table)
    users = UserCredit.objects.filter(project=project).aggregate(
        with_credit=Count("id", filter=Q(total_credit__gt=1)),
        with_recent_credit=Count("id", filter=Q(expavg_credit__gt=1)),
        expavg_credit=Sum("expavg_credit"),
    )
    return Community(
        update_time=now,
        users_with_recent_credit=users["with_recent_credit"],
        users_with_credit=users["with_credit"],
        users_registered_in_past_24_hours=users_registered(now, project),
        hosts_with_recent_credit=hosts["with_recent_credit"],
        hosts_with_credit=hosts["with_credit"],
        hosts_registered_in_past_24_hours=hosts["registered"],
        current_floating_point_speed=round((users["expavg_credit"] or 0.0) / 200, 2),
        runtimes=app_runtimes(now, project),
    )


def users_registered(now: int, project: Project) -> int:
    """The project's users who joined it in the day before ``now``: server_status.php counts
    the project's user rows with ``create_time`` in the past day.

    A BOINC user row is made when the volunteer makes an account at the project, and the
    client attaches its host with it at once (the attach's scheduler RPC makes the host row).
    A volunteer's first host in the project is therefore what matches ``user.create_time``
    best: the credit row (UserCredit) is made only at the first valid result, days later, and
    the Django user (``date_joined``) is one person's login across every project, made once.
    So a user joined the project when their first host in it was created (``create_time`` on
    the project's clock), and a volunteer with credit in the project always has a host there.
    """
    first_hosts = Host.objects.filter(project=project).values("owner_id").annotate(first=Min("create_time"))
    return first_hosts.filter(first__gt=now - DAY).count()


def cached_community(now: int, project: Project) -> Community:
    """``community(now)``, reused for COMMUNITY_TTL seconds."""
    # get_or_set gives the cached Community or a new one; django-stubs types it Any | None
    return cast(
        Community,
        cache.get_or_set(f"{COMMUNITY_CACHE_KEY}:{project.slug}", lambda: community(now, project), COMMUNITY_TTL),
    )


QUEUE_FIELDS = [
    "results_ready_to_send",
    "results_in_progress",
    "workunits_waiting_for_validation",
    "workunits_waiting_for_assimilation",
    "workunits_waiting_for_deletion",
    "results_waiting_for_deletion",
    "transitioner_backlog_workunits",
    "transitioner_backlog_hours",
]


def queue_counts(now: int, project: Project) -> dict[str, int | float]:
    """The counts of BOINC's "database state" of the project at Unix time ``now``, by
    status.json's names."""
    wus, results = Workunit.objects.filter(project=project), Result.objects.filter(project=project)
    due = wus.transition_due(now).aggregate(n=Count("id"), oldest=Min("transition_time"))
    backlog_hours = (now - due["oldest"]) / 3600 if due["oldest"] is not None else 0.0
    return {
        "results_ready_to_send": results.unsent().count(),
        "results_in_progress": results.in_progress().count(),
        "workunits_waiting_for_validation": wus.need_validation().count(),
        "workunits_waiting_for_assimilation": wus.ready_to_assimilate().count(),
        "workunits_waiting_for_deletion": wus.files_ready_to_delete().count(),
        "results_waiting_for_deletion": results.files_ready_to_delete().count(),
        "transitioner_backlog_workunits": due["n"],
        "transitioner_backlog_hours": round(backlog_hours, 2),
    }


def task_figures(now: int, project: Project) -> dict[str, Any]:
    """The counts of ``queue_counts(now)`` and the tasks by app, as one JSON-able dict with
    the ``time`` they were counted."""
    return {"time": now, **queue_counts(now, project), "apps": [asdict(app) for app in app_tasks(project)]}


# The key of the newest task figures, and the age past which a page counts again; the periodic
# daemon job refreshes them every 5 s (boincweb/cron.py) plus the length of its pass.
FIGURES_KEY = "boincweb:server_status:figures"
FIGURES_MAX_AGE = 30


def figures_key(project: Project) -> str:
    """The Redis key of a project's newest task figures (the demo project's is FIGURES_KEY)."""
    return FIGURES_KEY if project.slug == Project.DEMO_SLUG else f"{FIGURES_KEY}:{project.slug}"


def history_key(project: Project) -> str:
    return HISTORY_KEY if project.slug == Project.DEMO_SLUG else f"{HISTORY_KEY}:{project.slug}"


def cached_figures(now: int, project: Project) -> dict[str, Any]:
    """``task_figures`` as the periodic daemon job or another web process last stored them,
    when they are at most FIGURES_MAX_AGE seconds older than ``now``; else counted afresh and
    stored (the counts themselves need no Redis: without it every call counts)."""
    client = _redis()
    try:
        raw = client.get(figures_key(project))
        if raw is not None:
            figures = json.loads(raw)
            if 0 <= now - figures["time"] <= FIGURES_MAX_AGE:
                return figures
        figures = task_figures(now, project)
        client.set(figures_key(project), json.dumps(figures))
        return figures
    except (redis.exceptions.RedisError, OSError):
        return task_figures(now, project)
    finally:
        client.close()


def server_status(now: int, *, project: Project, with_community: bool = False, cached: bool = False) -> ServerStatus:
    """The whole status page at Unix time ``now``: the daemons and the job queues as they are
    now, the counts and the tasks by app counted now, or with ``cached`` as ``cached_figures``
    gives them; ``with_community`` adds the (cached) users, computers and run-time figures."""
    figures = cached_figures(now, project) if cached else task_figures(now, project)
    counts = {name: figures[name] for name in QUEUE_FIELDS}
    return ServerStatus(
        update_time=now,
        figures_time=figures["time"],
        daemons=daemon_states(timezone.now(), project),
        **counts,
        apps=[AppTasks(**app) for app in figures["apps"]],
        rq=rq_state(),
        community=cached_community(now, project) if with_community else None,
    )


# --- the recent history of the queues -----------------------------------------------------------

HISTORY_KEY = "boincweb:server_status:history"
# Samples kept: an hour of the periodic daemon job's passes, one every 10 s (boincweb/cron.py).
HISTORY_SAMPLES = 360
HISTORY_FIELDS = [
    "results_ready_to_send",
    "results_in_progress",
    "workunits_waiting_for_validation",
    "workunits_waiting_for_assimilation",
    "workunits_waiting_for_deletion",
    "results_waiting_for_deletion",
    "transitioner_backlog_workunits",
]


# This process's connection pools by Redis URL: a page makes a dozen Redis calls, and a new
# connection for each would add its handshake's round trips to every one.
_POOLS: dict[str, redis.ConnectionPool] = {}


def _redis() -> redis.Redis:
    """A client of settings.REDIS_URL on this process's pool (closing it keeps the pool)."""
    pool = _POOLS.get(settings.REDIS_URL)
    if pool is None:
        pool = _POOLS[settings.REDIS_URL] = redis.ConnectionPool.from_url(
            settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1
        )
    return redis.Redis(connection_pool=pool)


def record_history(now: int, project: Project) -> str:
    """Store the queue counts at Unix time ``now`` as the newest sample of the history, which
    keeps the last HISTORY_SAMPLES, and the task figures as the ones pages read
    (``cached_figures``). Several web and worker processes share them through Redis."""
    figures = task_figures(now, project)
    sample = json.dumps({"time": now, **{name: figures[name] for name in HISTORY_FIELDS}})
    client = _redis()
    try:
        with client.pipeline(transaction=True) as pipe:
            pipe.lpush(history_key(project), sample)
            pipe.ltrim(history_key(project), 0, HISTORY_SAMPLES - 1)
            pipe.set(figures_key(project), json.dumps(figures))
            pipe.execute()
    finally:
        client.close()
    return sample


def queue_history(project: Project) -> list[dict[str, int]]:
    """The recorded samples, oldest first: dicts of ``time`` and HISTORY_FIELDS; none when
    Redis is not reachable (the page says so in its RQ panel)."""
    client = _redis()
    try:
        raw = client.lrange(history_key(project), 0, HISTORY_SAMPLES - 1)
    except (redis.exceptions.RedisError, OSError):
        return []
    finally:
        client.close()
    return [json.loads(item) for item in reversed(raw)]


COMMUNITY_FIELDS = [
    "users_with_recent_credit",
    "users_with_credit",
    "users_registered_in_past_24_hours",
    "hosts_with_recent_credit",
    "hosts_with_credit",
    "hosts_registered_in_past_24_hours",
    "current_floating_point_speed",
]


def status_xml(status: ServerStatus) -> str:
    """BOINC's ``server_status.php?xml=1`` document for ``status``: the daemons, then the
    database figures with the tasks by app inside them, as BOINC nests them. The users,
    computers and run-time elements are there when ``status`` has its community figures."""
    root = ElementTree.Element("server_status")
    ElementTree.SubElement(root, "update_time").text = str(status.update_time)
    daemons = ElementTree.SubElement(root, "daemon_status")
    for daemon in status.daemons:
        node = ElementTree.SubElement(daemons, "daemon")
        ElementTree.SubElement(node, "host").text = "localhost"
        ElementTree.SubElement(node, "command").text = daemon.name
        ElementTree.SubElement(node, "status").text = daemon.status
        ElementTree.SubElement(node, "last_pass_time").text = daemon.last_pass_time
        ElementTree.SubElement(node, "last_work_done").text = str(daemon.last_work_done)
    states = ElementTree.SubElement(root, "database_file_states")
    for name in [
        "results_ready_to_send",
        "results_in_progress",
        "workunits_waiting_for_validation",
        "workunits_waiting_for_assimilation",
        "workunits_waiting_for_deletion",
        "results_waiting_for_deletion",
        "transitioner_backlog_hours",
    ]:
        ElementTree.SubElement(states, name).text = str(getattr(status, name))
    extra = status.community
    if extra is not None:
        for name in COMMUNITY_FIELDS:
            ElementTree.SubElement(states, name).text = str(getattr(extra, name))
    apps = ElementTree.SubElement(states, "tasks_by_app")
    for app in status.apps:
        node = ElementTree.SubElement(apps, "app")
        for name in ["id", "name", "unsent", "in_progress"]:
            ElementTree.SubElement(node, name).text = str(getattr(app, name))
        if extra is not None:
            runtime = extra.runtime(app.id)
            for name in ["avg_runtime", "min_runtime", "max_runtime", "users"]:
                ElementTree.SubElement(node, name).text = str(getattr(runtime, name))
        for name in ["in_progress_cpu", "in_progress_gpu"]:
            ElementTree.SubElement(node, name).text = str(getattr(app, name))
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)
