"""The figures of BOINC's server status page (html/user/server_status.php), read from the database
and from Redis.

Every count here runs over an index the daemons already rely on (reference/server.md §1.10), and
no count runs over the whole result or workunit table: OVER results are never counted.
"""

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from xml.etree import ElementTree

import redis
from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone
from rq import Worker
from rq.queue import Queue

from backend.daemons import daemon_names
from backend.models import (
    App,
    AssimilateState,
    DaemonStatus,
    FileDeleteState,
    Result,
    ServerState,
    Workunit,
)

# A daemon whose last pass is older than this is shown as not running.
RUNNING_WINDOW = timedelta(minutes=2)


@dataclass(frozen=True)
class Daemon:
    name: str
    status: str  # "running", "not running" or "disabled"
    last_pass_time: str  # ISO 8601, or "" when it never ran
    last_work_done: int
    passes: int
    last_error: str


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
    def in_progress(self):
        return self.in_progress_cpu + self.in_progress_gpu


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
    queues: list = field(default_factory=list)


@dataclass(frozen=True)
class ServerStatus:
    update_time: int
    daemons: list
    results_ready_to_send: int
    results_in_progress: int
    workunits_waiting_for_validation: int
    workunits_waiting_for_assimilation: int
    workunits_waiting_for_deletion: int
    results_waiting_for_deletion: int
    transitioner_backlog_workunits: int
    transitioner_backlog_hours: float
    apps: list
    rq: RQState

    def as_dict(self):
        data = asdict(self)
        data["apps"] = [dict(asdict(app), in_progress=app.in_progress) for app in self.apps]
        return data


def daemon_states(now_dt):
    """Every registered daemon and every daemon that has reported a pass, by name."""
    rows = {row.name: row for row in DaemonStatus.objects.all()}
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


def app_tasks():
    """Per app: unsent results, in-progress results split by CPU/GPU version, WUs waiting."""
    results = (
        Result.objects.filter(server_state__lte=ServerState.IN_PROGRESS)
        .values("app_id", "server_state")
        .annotate(
            n=Count("id"),
            gpu=Count("id", filter=Q(app_version__gpu_usage__gt=0)),
        )
    )
    unsent, cpu, gpu = {}, {}, {}
    for row in results:
        app_id = row["app_id"]
        if row["server_state"] == ServerState.IN_PROGRESS:
            gpu[app_id] = gpu.get(app_id, 0) + row["gpu"]
            cpu[app_id] = cpu.get(app_id, 0) + row["n"] - row["gpu"]
        else:
            unsent[app_id] = unsent.get(app_id, 0) + row["n"]
    validating = dict(
        Workunit.objects.filter(need_validate=True)
        .values("app_id").annotate(n=Count("id")).values_list("app_id", "n")
    )
    assimilating = dict(
        Workunit.objects.filter(assimilate_state=AssimilateState.READY)
        .values("app_id").annotate(n=Count("id")).values_list("app_id", "n")
    )
    return [
        AppTasks(app.id, app.name, unsent.get(app.id, 0), cpu.get(app.id, 0), gpu.get(app.id, 0),
                 validating.get(app.id, 0), assimilating.get(app.id, 0))
        for app in App.objects.only("id", "name")
    ]


def rq_state():
    """The RQ queues of settings.RQ_QUEUES with their job counts, and the live workers."""
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        queues = []
        for index, name in enumerate(settings.RQ_QUEUES):
            queue = Queue(name, connection=client)
            queues.append(RQQueue(index, name, queue.count, queue.started_job_registry.count,
                                  queue.failed_job_registry.count))
        return RQState(True, "", len(Worker.all(connection=client)), queues)
    except (redis.exceptions.RedisError, OSError) as exc:
        return RQState(False, str(exc), 0, [])
    finally:
        client.close()


def server_status(now):
    """The whole status page at Unix time ``now``."""
    now_dt = timezone.now()
    due = Workunit.objects.transition_due(now).aggregate(n=Count("id"), oldest=Min("transition_time"))
    backlog_hours = (now - due["oldest"]) / 3600 if due["oldest"] is not None else 0.0
    return ServerStatus(
        update_time=now,
        daemons=daemon_states(now_dt),
        results_ready_to_send=Result.objects.unsent().count(),
        results_in_progress=Result.objects.in_progress().count(),
        workunits_waiting_for_validation=Workunit.objects.need_validation().count(),
        workunits_waiting_for_assimilation=Workunit.objects.ready_to_assimilate().count(),
        workunits_waiting_for_deletion=Workunit.objects.files_ready_to_delete().count(),
        results_waiting_for_deletion=Result.objects.files_ready_to_delete().count(),
        transitioner_backlog_workunits=due["n"],
        transitioner_backlog_hours=round(backlog_hours, 2),
        apps=app_tasks(),
        rq=rq_state(),
    )


def status_xml(status):
    """BOINC's ``server_status.php?xml=1`` document for ``status``."""
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
    for name in ["results_ready_to_send", "results_in_progress",
                 "workunits_waiting_for_validation", "workunits_waiting_for_assimilation",
                 "workunits_waiting_for_deletion", "results_waiting_for_deletion",
                 "transitioner_backlog_hours"]:
        ElementTree.SubElement(states, name).text = str(getattr(status, name))
    apps = ElementTree.SubElement(root, "tasks_by_app")
    for app in status.apps:
        node = ElementTree.SubElement(apps, "app")
        for name in ["id", "name", "unsent", "in_progress", "in_progress_cpu", "in_progress_gpu"]:
            ElementTree.SubElement(node, name).text = str(getattr(app, name))
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)
