"""One scheduler RPC from a real client to one project, from request body to reply body
(reference/protocol.md §4).

The scheduling itself is ``backend.daemons.scheduler.handle_request``, the same function the
simulated volunteers call; this module only stands between it and the wire:

0. a world's project is simulated: a real client is refused, with a message that says so and
   REFUSED_DELAY before it asks again, and nothing is read or written;
1. the body is parsed (``xml_request``); a body that is not a scheduler request gets an error
   reply and changes nothing. Like BOINC's scheduler (sched/handle_request.cpp), that reply
   is an ordinary HTTP 200 scheduler reply whose message says what is wrong: the client
   treats a 4xx status as a bare HTTP error and backs off without reading the body
   (reference/protocol.md §4.1), so a 400 would hide the reason from its user;
2. the account is found by its authenticator among the project's accounts (each project has
   its own, as in BOINC); an unknown one, another project's included, is refused with a
   message and changes nothing;
3. the request is checked (``check_request``) before anything reads or writes the database
   with its values: a value that does not fit its column (a negative ``rpc_seqno``, a
   ``domain_name`` over its length, a count beyond a PostgreSQL integer ...) refuses the
   request whole with the element named, and changes nothing;
4. a ``hostid`` that is unknown, belongs to another account or to another project is treated as
   a new host, as BOINC's scheduler does, so the client gets a fresh hostid in this project;
5. reported results are screened: a report of a result that was not sent to this host is not
   passed on (it is acked, so the client forgets it, and counted in one log line for the
   request); reports past ``xml_request.MAX_REPORTS`` are not read at all, nor acked, and the
   reply says so (the client reports them next time, as with BOINC's ``<report_max>``,
   reference/server.md §3.5); a reported success whose
   output never arrived, or whose ``<file_info>`` carries an ``<error_msg>`` (a permanent
   upload error, §5.2, §10.5) is passed on as UPLOAD_FAILED, so it is recorded as a client
   error, with the reason added to its stderr;
6. the reply is written (``xml_reply``) with the project's name, the account's project
   preferences (its resource share, as BOINC's scheduler sends user.project_prefs in every
   reply to a known user), its download and upload URLs, the signed executables of its app
   versions sent, and its code-signing key for a client that lacks it; and the host's
   computing preferences (``Host``'s PREF_FIELDS, edited on its preferences page) when they
   were changed after the ones the client holds (``host_prefs``), as BOINC's scheduler sends a
   user's newer global preferences (handle_request.cpp handle_global_prefs), and its venue.
"""

import logging
from collections.abc import Iterable

from backend.daemons.hierarchy import upload_path
from backend.daemons.sched_types import ReplyResult, ReportedFile, SchedulerConfig, SchedulerRequest
from backend.daemons.scheduler import Message, SchedulerRequestError, check_request, handle_request
from backend.models import PREF_FIELDS, ClientState, Host, Project, Result
from protocol import signing
from protocol.models import Account, AppVersionFile
from protocol.xml_reply import AppFile, ReplyContext, write_error_reply, write_reply
from protocol.xml_request import MAX_REPORTS, RequestParseError, parse_request

log = logging.getLogger("protocol.scheduler")

# Seconds a client refused for a bad account key or request waits before asking again.
REFUSED_DELAY = 3600
# Names of ignored reports a log line gives (the rest are counted).
LOGGED_NAMES = 5


def scheduler_rpc(
    body: bytes, *, project: Project, now: int, base_url: str, config: SchedulerConfig = SchedulerConfig()
) -> tuple[int, bytes]:
    """(HTTP status, reply bytes) for the raw request ``body`` to ``project``, whose master
    URL ``base_url`` ends in ``/``."""
    if not project.is_live:
        log.warning("scheduler request to %s, a simulated world's project: refused", project.slug)
        return 200, write_error_reply(
            f"{project.name} is a simulated world's project: its hosts are simulated and real clients "
            "cannot join it. To fix, remove this project.",
            request_delay=REFUSED_DELAY,
        )
    try:
        parsed = parse_request(body)
    except RequestParseError as exc:
        log.warning("unreadable scheduler request: %s", exc.reason)
        return 200, write_error_reply(f"Can't parse scheduler request: {exc.reason}")
    account = Account.by_key(project, parsed.authenticator)
    if account is None:
        log.warning("scheduler request to %s with an unknown account key", project.slug)
        return 200, write_error_reply(
            "Invalid or missing account key. To fix, remove and add this project.", request_delay=REFUSED_DELAY
        )
    request = parsed.request
    request.userid = account.user_id
    try:
        check_request(request)
    except SchedulerRequestError as exc:
        return refused(exc)
    if (
        request.hostid
        and not Host.objects.filter(project=project, pk=request.hostid, owner_id=account.user_id).exists()
    ):
        log.warning("account %s sent hostid %s, not one of its hosts: new host", account.user_id, request.hostid)
        request.hostid = 0
    ignored = screen_reports(project, request)
    mark_missing_outputs(project, request)
    try:
        reply = handle_request(request, project=project, now=now, config=config)
    except SchedulerRequestError as exc:
        return refused(exc)
    for name in ignored:
        reply.result_acks.append(name)
        reply.messages.append(Message(f"Report of {name} ignored: not sent to this host"))
    if parsed.reports_over:
        log.warning(
            "host %s: %d reported result(s) over the limit of %d per request, left for its next request",
            request.hostid,
            parsed.reports_over,
            MAX_REPORTS,
        )
        reply.messages.append(
            Message(
                f"Only the first {MAX_REPORTS} reported results were handled (the limit per request); "
                f"the other {parsed.reports_over} are reported at the next request"
            )
        )
    anonymous = request.platform_name == "anonymous"
    context = ReplyContext(
        download_url=f"{base_url}download/",
        upload_url=f"{base_url}file_upload_handler",
        anonymous=anonymous,
        project_name=project.name,
        code_sign_key="" if anonymous or parsed.code_sign_key else signing.load_public_key_text(project.keys_dir),
        app_files={} if anonymous else app_files(project, reply.results),
        resource_share=account.resource_share,
    )
    host = host_prefs(project, reply.hostid)
    if host is not None:
        context.host_venue = host.pop("venue")
        mod_time = host.pop("prefs_mod_time")
        if mod_time > max(parsed.global_prefs_mod_time, 0):
            context.global_prefs_mod_time, context.global_prefs = mod_time, host
    return 200, write_reply(reply, context)


def host_prefs(project: Project, hostid: int) -> dict | None:
    """The host's venue, prefs_mod_time and preferences (element -> value); None for no host.

    The preferences are sent only when edited after the ones the client holds (their
    ``<mod_time>``): a host never edited (prefs_mod_time 0) is sent none, and its client keeps
    its own."""
    if not hostid:
        return None
    return Host.objects.filter(project=project, pk=hostid).values("venue", "prefs_mod_time", *PREF_FIELDS).first()


def refused(exc: SchedulerRequestError) -> tuple[int, bytes]:
    log.warning("scheduler request refused: %s", exc.reason)
    return 200, write_error_reply(f"Scheduler request refused: {exc.reason}", request_delay=REFUSED_DELAY)


def screen_reports(project: Project, request: SchedulerRequest) -> list[str]:
    """Drop reports of results not sent to the requesting host; return their names."""
    if not request.results:
        return []
    names = [report.name for report in request.results]
    ours = set()
    if request.hostid:
        ours = set(
            Result.objects.filter(project=project, name__in=names, host_id=request.hostid).values_list(
                "name", flat=True
            )
        )
    ignored = [name for name in names if name not in ours]
    if ignored:
        log.warning(
            "host %s: %d reported result(s) not sent to it, ignored: %s%s",
            request.hostid or "(new)",
            len(ignored),
            ", ".join(ignored[:LOGGED_NAMES]),
            " ..." if len(ignored) > LOGGED_NAMES else "",
        )
    request.results = [report for report in request.results if report.name in ours]
    return ignored


def mark_missing_outputs(project: Project, request: SchedulerRequest) -> None:
    """Keep only outputs that arrived; a success missing its output is UPLOAD_FAILED (§10.5)."""
    if not request.results:
        return
    expected = dict(
        Result.objects.filter(project=project, name__in=[r.name for r in request.results]).values_list("name", "random")
    )
    for report in request.results:
        output = f"{report.name}_r{expected[report.name]}_0"
        declared = {f.name: f for f in report.output_files}
        report.output_files = [f for f in report.output_files if arrived(project, f)]
        if report.client_state != ClientState.FILES_UPLOADED:
            continue
        info = declared.get(output)
        if info is None:
            problem = f"output {output} was not reported"
        elif info.error_msg:
            problem = f"output {output} failed to upload: {info.error_msg}"
        elif not arrived(project, info):
            problem = f"output {output} never arrived"
        else:
            continue
        report.client_state = ClientState.UPLOAD_FAILED
        report.stderr_out = f"{report.stderr_out}\n<message>server: {problem}</message>"
        log.warning("%s reported as a success but %s", report.name, problem)


def arrived(project: Project, reported_file: ReportedFile) -> bool:
    """Whether the project's upload handler holds the whole of a reported output file."""
    name = reported_file.name
    if not name or "/" in name or name.startswith("."):
        return False
    try:
        path = upload_path(project, name)
        return not reported_file.error_msg and path.exists() and path.stat().st_size == reported_file.nbytes
    except (OSError, ValueError):
        # A name the file system cannot hold (too long in bytes, say) was never uploaded.
        return False


def app_files(project: Project, jobs: Iterable[ReplyResult]) -> dict[tuple, list[AppFile]]:
    """(app_name, version_num, platform, plan_class) -> AppFiles of the jobs' app versions."""
    keys = {
        (j.app_version.app_name, j.app_version.version_num, j.app_version.platform, j.app_version.plan_class)
        for j in jobs
    }
    if not keys:
        return {}
    rows = AppVersionFile.objects.filter(
        project=project,
        app_version__app__name__in={k[0] for k in keys},
        app_version__version_num__in={k[1] for k in keys},
    ).select_related("app_version__app")
    found: dict[tuple, list[AppFile]] = {}
    for row in rows:
        av = row.app_version
        key = (av.app.name, av.version_num, av.platform, av.plan_class)
        if key in keys:
            found.setdefault(key, []).append(
                AppFile(
                    name=row.name,
                    nbytes=row.nbytes,
                    md5_cksum=row.md5_cksum,
                    file_signature=row.file_signature,
                    main_program=row.main_program,
                    open_name=row.open_name,
                )
            )
    return found
