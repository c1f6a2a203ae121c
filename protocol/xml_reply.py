"""Writing the ``<scheduler_reply>`` a real client reads (reference/protocol.md §4.3, §10).

``write_reply(reply, context) -> bytes`` turns the scheduler's ``SchedulerReply``
(backend.daemons.sched_types) into XML; ``ReplyContext`` carries what the scheduler leaves to
the web layer: the download and upload URLs, whether the client runs its own apps (anonymous
platform), the executables of signed app versions and the code-signing key.

What each job needs, and the pitfalls it avoids (§10):

- input ``<file_info>``: ``name``, ``url``, ``md5_cksum``, ``nbytes``, ``<sticky/>`` for
  files that stay on the host and ``<report_on_rpc/>`` for locality's big files (seed 004),
  once per file even when jobs share it;
- output ``<file_info>``: ``name``, ``upload_url`` (never a plain ``url``: §10.2) and
  ``max_nbytes``;
- ``<workunit>`` after the files it names, with realistic ``rsc_*`` figures and a ``file_ref``
  per input; ``<result>`` with ``report_deadline`` (§10.3) and a ``file_ref`` per output.
  Every ``file_ref`` has ``<copy_file/>``, so an application not linked with the BOINC API
  reads and writes plain files (§10.6). Input ``i`` is opened as ``in`` (``in1``, ``in2`` ...
  after the first), output ``i`` as ``out`` (``out1`` ...);
- ``<app>``/``<app_version>`` and the executables' ``<file_info>`` with their
  ``file_signature`` only for a client that is not on the anonymous platform (§7, §10.7);
- a ``<result_ack>`` for every reported result (§10.4), ``<result_abort>``,
  ``<result_abort_if_not_started>``, ``<delete_file_info>`` (locality scheduling),
  ``<request_delay>``, ``<hostid>`` and ``<message>`` elements;
- the volunteer's ``<project_preferences>`` (their ``<resource_share>`` in the project) in
  every reply to a known account, as BOINC's scheduler always sends them: the client keeps
  them in its account file and takes the project's share from them (§4.3). Each child is on a
  line of its own, since the client reads the element line by line;
- the host's ``<global_preferences>`` (its computing preferences, with their ``<mod_time>``)
  when they are newer than the ones the client holds, as BOINC's scheduler sends a user's
  global preferences (handle_request.cpp handle_global_prefs): the client writes them to its
  global_prefs.xml and applies them at once (§4.3). They too are one element to a line, as
  the client copies the element's lines verbatim. The host's ``<host_venue>`` (home, school,
  work) goes with every reply when it has one: a volunteer's computers at one venue share their
  preferences, and the client shows where it is.

``master_url`` is never sent: a URL differing from the one the client attached with in any way
but case raises an alert on the client (§10.15).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from xml.etree import ElementTree
from xml.etree.ElementTree import Element

if TYPE_CHECKING:
    from backend.daemons.sched_types import ReplyAppVersion, ReplyFile, ReplyResult, ReplyWorkunit, SchedulerReply

PROJECT_NAME = "boincweb"


@dataclass
class AppFile:
    """An executable (or other file) of a signed app version, served from the download dir."""

    name: str
    nbytes: int
    md5_cksum: str
    file_signature: str
    main_program: bool = True
    open_name: str = ""


@dataclass
class ReplyContext:
    """What the reply needs beyond the scheduler's answer.

    ``app_files`` maps ``(app_name, version_num, platform, plan_class)`` to the files of that
    app version; ``code_sign_key`` is sent when not empty (only to a client without one);
    ``resource_share`` is the account's project preference, sent when not None;
    ``global_prefs`` the host's computing preferences (element name -> value) and
    ``global_prefs_mod_time`` when they were last changed, sent when not None; ``host_venue``
    the host's venue, sent when not empty.
    """

    download_url: str
    upload_url: str
    anonymous: bool = True
    project_name: str = PROJECT_NAME
    code_sign_key: str = ""
    app_files: dict = field(default_factory=dict)
    resource_share: float | None = None
    global_prefs: dict[str, float | bool] | None = None
    global_prefs_mod_time: int = 0
    host_venue: str = ""


def open_name(stem: str, i: int) -> str:
    return stem if i == 0 else f"{stem}{i}"


def add(parent: Element, tag: str, value: object = None) -> Element:
    """Append ``<tag>value</tag>`` (an empty element, i.e. a flag, when value is None)."""
    child = ElementTree.SubElement(parent, tag)
    if value is not None:
        child.text = number_text(value) if isinstance(value, float) else str(value)
    return child


def number_text(value: float) -> str:
    return repr(value) if value != int(value) or abs(value) >= 1e16 else str(int(value))


def file_ref(parent: Element, name: str, open_as: str) -> Element:
    ref = add(parent, "file_ref")
    add(ref, "file_name", name)
    add(ref, "open_name", open_as)
    add(ref, "copy_file")
    return ref


def write_reply(reply: SchedulerReply, context: ReplyContext) -> bytes:
    """The ``<scheduler_reply>`` for ``reply`` (a SchedulerReply) as UTF-8 bytes."""
    root = ElementTree.Element("scheduler_reply")
    add(root, "scheduler_version", 720)
    add(root, "project_name", context.project_name)
    if context.resource_share is not None:
        add(add(root, "project_preferences"), "resource_share", float(context.resource_share))
    if context.global_prefs is not None:
        write_global_prefs(root, context.global_prefs, context.global_prefs_mod_time)
    if reply.hostid:
        add(root, "hostid", reply.hostid)
    if context.host_venue:
        add(root, "host_venue", context.host_venue)
    if reply.request_delay:
        add(root, "request_delay", float(reply.request_delay))
    for message in reply.messages:
        add(root, "message", message.text).set("priority", message.priority)
    for rejected in reply.rejected:
        add(root, "message", f"Report of {rejected.name} not accepted: {rejected.reason}").set("priority", "low")
    if context.code_sign_key:
        add(root, "code_sign_key", context.code_sign_key)
    if not context.anonymous:
        write_app_versions(root, reply.results, context)
    write_files(root, reply.results, context)
    for job in reply.results:
        write_workunit(root, job.workunit)
    for job in reply.results:
        write_result(root, job, context)
    for name in reply.result_acks:
        add(add(root, "result_ack"), "name", name)
    for name in reply.result_aborts:
        add(add(root, "result_abort"), "name", name)
    for name in reply.result_abort_if_not_started:
        add(add(root, "result_abort_if_not_started"), "name", name)
    for name in reply.delete_file_infos:
        add(root, "delete_file_info", name)
    return serialize(root)


def write_global_prefs(root: Element, prefs: dict[str, float | bool], mod_time: int) -> None:
    """``<global_preferences>`` as BOINC's client reads it (lib/prefs.cpp GLOBAL_PREFS::parse):
    ``<mod_time>`` in Unix seconds first, then each preference, a flag as 0 or 1."""
    element = add(root, "global_preferences")
    add(element, "mod_time", mod_time)
    for name, value in prefs.items():
        add(element, name, int(value) if isinstance(value, bool) else float(value))


def write_error_reply(text: str, *, request_delay: float = 0) -> bytes:
    """A reply carrying only a message (and a delay before the next RPC)."""
    root = ElementTree.Element("scheduler_reply")
    add(root, "project_name", PROJECT_NAME)
    add(root, "message", text).set("priority", "notice")
    if request_delay:
        add(root, "request_delay", float(request_delay))
    return serialize(root)


def serialize(root: Element) -> bytes:
    ElementTree.indent(root, space="")
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def version_key(app_version: ReplyAppVersion) -> tuple[str, int, str, str]:
    return (app_version.app_name, app_version.version_num, app_version.platform, app_version.plan_class)


def write_app_versions(root: Element, jobs: list[ReplyResult], context: ReplyContext) -> None:
    """``<app>``, executables' ``<file_info>`` and ``<app_version>`` of the jobs, once each."""
    apps: list[str] = []
    versions: dict[tuple[str, int, str, str], ReplyAppVersion] = {}
    for job in jobs:
        av = job.app_version
        if av.app_name not in apps:
            apps.append(av.app_name)
        versions.setdefault(version_key(av), av)
    for name in apps:
        add(add(root, "app"), "name", name)
    files = {f.name: f for key in versions for f in context.app_files.get(key, [])}
    for f in files.values():
        info = download_file_info(root, f, context)
        add(info, "executable")
        add(info, "file_signature", "\n" + f.file_signature)
    for key, av in versions.items():
        element = add(root, "app_version")
        add(element, "app_name", av.app_name)
        add(element, "version_num", av.version_num)
        add(element, "platform", av.platform)
        if av.plan_class:
            add(element, "plan_class", av.plan_class)
        add(element, "avg_ncpus", float(av.avg_ncpus))
        if av.flops:
            add(element, "flops", float(av.flops))
        if av.gpu_type and av.gpu_usage:
            coproc = add(element, "coproc")
            add(coproc, "type", av.gpu_type)
            add(coproc, "count", float(av.gpu_usage))
        for f in context.app_files.get(key, []):
            ref = add(element, "file_ref")
            add(ref, "file_name", f.name)
            if f.open_name:
                add(ref, "open_name", f.open_name)
            if f.main_program:
                add(ref, "main_program")


def write_files(root: Element, jobs: list[ReplyResult], context: ReplyContext) -> None:
    """Input files (each once), then the outputs to upload."""
    inputs = {f.name: f for job in jobs for f in job.workunit.input_files}
    for f in inputs.values():
        info = download_file_info(root, f, context)
        if f.sticky:
            add(info, "sticky")
        if f.report_on_rpc:
            add(info, "report_on_rpc")
    for job in jobs:
        for f in job.output_files:
            info = add(root, "file_info")
            add(info, "name", f.name)
            add(info, "upload_url", context.upload_url)
            add(info, "max_nbytes", f.max_nbytes)


def download_file_info(root: Element, f: ReplyFile | AppFile, context: ReplyContext) -> Element:
    """A ``<file_info>`` the client downloads and checks (§5.1)."""
    info = add(root, "file_info")
    add(info, "name", f.name)
    add(info, "url", context.download_url + f.name)
    add(info, "md5_cksum", f.md5_cksum)
    add(info, "nbytes", f.nbytes)
    return info


def write_workunit(root: Element, wu: ReplyWorkunit) -> None:
    element = add(root, "workunit")
    add(element, "name", wu.name)
    add(element, "app_name", wu.app_name)
    add(element, "rsc_fpops_est", float(wu.rsc_fpops_est))
    add(element, "rsc_fpops_bound", float(wu.rsc_fpops_bound))
    add(element, "rsc_memory_bound", float(wu.rsc_memory_bound))
    add(element, "rsc_disk_bound", float(wu.rsc_disk_bound))
    for i, f in enumerate(wu.input_files):
        file_ref(element, f.name, open_name("in", i))


def write_result(root: Element, job: ReplyResult, context: ReplyContext) -> None:
    element = add(root, "result")
    add(element, "name", job.name)
    add(element, "wu_name", job.wu_name)
    add(element, "report_deadline", int(job.report_deadline))
    if not context.anonymous:
        # The anonymous-platform client binds the job to its own newest version (§6.1).
        add(element, "platform", job.app_version.platform)
        add(element, "version_num", job.app_version.version_num)
        if job.app_version.plan_class:
            add(element, "plan_class", job.app_version.plan_class)
    for i, f in enumerate(job.output_files):
        file_ref(element, f.name, open_name("out", i))
