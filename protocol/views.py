"""Each project's endpoints for real BOINC clients (reference/protocol.md §3-§5).

Every project has its own, under ``/projects/<slug>/boinc/``; ``/boinc/`` is the demo
project's, as it was before there were projects (``Project.master_path``):

- ``.../boinc/``: the master page, naming the project's scheduler both ways a client finds it
  (§3, §10.1);
- ``.../boinc/cgi``: the scheduler RPC, a raw XML body (§4.1, §10.9);
- ``.../boinc/file_upload_handler``: uploads into the project's upload directory, streamed
  (§5.2, §10.10);
- ``.../boinc/download/<name>``: input files and executables from the project's download
  directory, with ``Range`` (§5.1);
- ``.../boinc/account/``: the signed-in user's account key in the project, for attaching;
- ``.../boinc/prefs/``: the signed-in user's preferences for the project (BOINC's
  user.project_prefs: the resource share), which every scheduler reply sends (§4.3).

Beside them, site-wide under ``/accounts/`` (``protocol.account_urls``), a volunteer's own
pages: ``signup/`` makes a Django user and logs them in, ``me/`` ("My account") lists their
account in each project, their computers there and the links to each one's preferences.

Each project's view looks the project up first (``boinc_project``). An unknown slug is a 404, but for
the scheduler, whose client reads only a scheduler reply: it gets BOINC's error reply, a 200
whose message says so (§4.1). A world's project is simulated, and real clients are refused
there: its scheduler replies with a message saying so and a long request delay, its upload
handler refuses every file for good, its downloads, account and preferences pages are 404s;
its master page is served, so that a client attached to it shows that message.

The scheduler and upload handler are csrf-exempt: a client POSTs raw bodies labelled as forms
and holds no cookie. They never read ``request.POST`` or ``request.body``, and read a body sent
in chunks as well as one with a ``Content-Length`` (``body_stream``).
"""

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from backend.daemons.hierarchy import download_path
from backend.models import Host, Project
from backend.server_config import ConfigError
from protocol import uploads
from protocol.forms import ProjectPrefsForm, SignupForm
from protocol.models import Account
from protocol.scheduler_rpc import REFUSED_DELAY, scheduler_rpc
from protocol.uploads import Stream
from protocol.xml_reply import write_error_reply
from protocol.xml_request import MAX_REQUEST_BYTES

log = logging.getLogger("protocol.scheduler")

SAFE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def boinc_project(slug: str) -> Project | None:
    """The project whose endpoints ``slug`` names, or None."""
    if slug == Project.DEMO_SLUG:
        return Project.demo()
    return Project.objects.filter(slug=slug).first()


def project_or_404(slug: str, *, live: bool = False) -> Project:
    project = boinc_project(slug)
    if project is None:
        raise Http404(f"no project {slug!r}")
    if live and not project.is_live:
        raise Http404(f"project {slug!r} is a simulated world's; real clients attach to live projects only")
    return project


def master_url(request: HttpRequest, project: Project) -> str:
    return request.build_absolute_uri(project.master_path())


def master(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(slug)
    base = master_url(request, project)
    return render(
        request,
        "protocol/master.html",
        {
            "project": project,
            "project_name": project.name,
            "master_url": base,
            "scheduler_url": f"{base}cgi",
            "upload_url": f"{base}file_upload_handler",
            "account_url": f"{project.master_path()}account/",
            "prefs_url": f"{project.master_path()}prefs/",
            "workunits_url": reverse("projects:workunit_list", kwargs={"project": project}),
            "status_url": reverse("projects:status", kwargs={"project": project}),
        },
    )


def account(request: HttpRequest, slug: str) -> HttpResponse:
    """The signed-in user's key in the project (made when missing: joining the project); an
    unknown project is a 404 before anyone is asked to sign in."""
    project = project_or_404(slug, live=True)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    account = Account.for_user(request.user, project)
    return render(
        request,
        "protocol/account.html",
        {
            "project": project,
            "boinc_project": project,  # the footer's links (backend.templatetags.project_urls)
            "account": account,
            "resource_share": share_text(account.resource_share),
            "master_url": master_url(request, project),
            "prefs_url": f"{project.master_path()}prefs/",
        },
    )


def share_text(share: float) -> str:
    """A resource share as people write it: 25, 12.5, 1234567."""
    return f"{share:.10g}"


def prefs(request: HttpRequest, slug: str) -> HttpResponse:
    """The signed-in user's preferences for the project, on their own account there (made
    when missing, as by the account page). Only one's own account is ever read or written: the
    page names no account. A bad value is a 400 with the form's reason and changes nothing."""
    project = project_or_404(slug, live=True)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    account = Account.for_user(request.user, project)
    if request.method == "POST":
        form = ProjectPrefsForm(request.POST, instance=account)
        if form.is_valid():
            old, new = form.initial["resource_share"], form.cleaned_data["resource_share"]
            if new == old:
                messages.info(request, "Nothing changed.")
            else:
                Account.objects.filter(pk=account.pk, user=request.user).update(resource_share=new)
                messages.success(
                    request,
                    f"Saved: resource share {share_text(new)} (was {share_text(old)}). Your computers attached to "
                    f"{project.name} take it from their next scheduler request.",
                )
            return redirect(f"{project.master_path()}prefs/")
        status = 400
    elif request.method == "GET":
        form = ProjectPrefsForm(instance=account)
        status = 200
    else:
        return HttpResponseNotAllowed(["GET", "POST"])
    return render(
        request,
        "protocol/prefs.html",
        {
            "project": project,
            "boinc_project": project,  # the footer's links (backend.templatetags.project_urls)
            "form": form,
            "account_url": f"{project.master_path()}account/",
        },
        status=status,
    )


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    """A visitor becomes a volunteer: a Django user, logged in at once, who then joins projects
    from My account. A bad form is a 400 with its reasons and makes no one."""
    if request.user.is_authenticated:
        return redirect("my_account")
    if request.method == "POST":
        form = SignupForm(request.POST)
        if form.is_valid():
            user = form.save()
            login(request, user, backend="boincweb.auth.RefuseDemoLoginBackend")
            messages.success(
                request,
                f"Welcome, {user.username}. Join a project below to get its account key, then attach a BOINC "
                "client with it.",
            )
            return redirect("my_account")
        status = 400
    else:
        form = SignupForm()
        status = 200
    return render(request, "registration/signup.html", {"form": form}, status=status)


@login_required
@require_GET
def my_account(request: HttpRequest) -> HttpResponse:
    """The volunteer's own page: their account in each project they joined (its key page and
    their preferences there), their computers in each, each with its preferences page, and
    the live projects they have not joined yet."""
    user_id = cast(int, request.user.pk)  # login_required: a user with a row
    accounts = {a.project_id: a for a in Account.objects.filter(user_id=user_id).select_related("project")}
    hosts: dict[int, list[Host]] = {}
    for host in Host.objects.filter(owner_id=user_id).select_related("project").order_by("project_id", "id"):
        hosts.setdefault(host.project_id, []).append(host)
    # a project where they have computers but no account (made before accounts were) is listed too
    mine = {a.project_id: a.project for a in accounts.values()} | {i: h[0].project for i, h in hosts.items()}
    Project.demo()  # the demo project is there to join from the first visit on
    others = [p for p in Project.objects.exclude(id__in=mine).order_by("id") if p.is_live]
    projects = [
        {
            "project": project,
            "account": accounts.get(project.id),
            "master_url": master_url(request, project),
            "account_url": f"{project.master_path()}account/",
            "prefs_url": f"{project.master_path()}prefs/",
            "hosts": [
                {
                    "host": host,
                    "url": reverse("projects:host_detail", args=[project.slug, host.pk]),
                    "prefs_url": reverse("projects:host_prefs", args=[project.slug, host.pk]),
                }
                for host in hosts.get(project.id, [])
            ],
        }
        for _, project in sorted(mine.items())
    ]
    joinable = [{"project": p, "account_url": f"{p.master_path()}account/"} for p in others]
    return render(request, "protocol/my_account.html", {"projects": projects, "joinable": joinable})


def body_stream(request: HttpRequest) -> Stream:
    """What to read a client's POST body from. Django's WSGI request reads no more than the
    ``Content-Length``, so a body sent with ``Transfer-Encoding: chunked`` (none) would read as
    empty; a WSGI server that decodes the chunks and ends the stream itself says so with
    ``wsgi.input_terminated`` (gunicorn does), and its stream is read instead. Under ASGI the
    request holds the whole body either way."""
    chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
    if chunked and request.META.get("wsgi.input_terminated"):
        return request.META["wsgi.input"]
    return request


def xml_response(body: bytes, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/xml; charset=utf-8")


@csrf_exempt
def scheduler(request: HttpRequest, slug: str) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    project = boinc_project(slug)
    if project is None:
        # a 200, as every refusal: the client reads the message only from a 2xx reply (§4.1)
        return xml_response(
            write_error_reply(
                f"There is no project {slug!r} at this URL. To fix, remove this project.", request_delay=REFUSED_DELAY
            )
        )
    body = body_stream(request).read(MAX_REQUEST_BYTES + 1)
    if len(body) > MAX_REQUEST_BYTES:
        return xml_response(
            write_error_reply(f"Can't parse scheduler request: it is over {MAX_REQUEST_BYTES} bytes long (the limit)")
        )
    try:
        config = project.scheduler_config()
    except ConfigError as exc:
        log.error("project %s: its config.xml cannot be read: %s", project.slug, exc)
        return xml_response(
            write_error_reply(
                f"The project's server configuration cannot be read ({exc}); try again later",
                request_delay=REFUSED_DELAY,
            )
        )
    status, reply = scheduler_rpc(
        body, project=project, now=int(time.time()), base_url=master_url(request, project), config=config
    )
    return xml_response(reply, status=status)


@csrf_exempt
def file_upload_handler(request: HttpRequest, slug: str) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    project = project_or_404(slug)
    return HttpResponse(uploads.handle(project, body_stream(request)), content_type="text/plain")


def download(request: HttpRequest, slug: str, name: str) -> HttpResponseBase:
    project = project_or_404(slug, live=True)
    if not SAFE_NAME.match(name):
        raise Http404("no such file")
    path = download_path(project, name)
    if not path.is_file():
        raise Http404("no such file")
    size = path.stat().st_size
    wanted = request.headers.get("Range", "")
    if not wanted:
        return FileResponse(open(path, "rb"), content_type="application/octet-stream")
    match = RANGE.match(wanted.strip())
    if not match or match.groups() == ("", ""):
        return range_not_satisfiable(size)
    first, last = match.groups()
    if first:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    else:  # bytes=-N: the last N bytes
        start, end = max(size - int(last), 0), size - 1
    if start >= size or start > end:
        return range_not_satisfiable(size)
    response = StreamingHttpResponse(
        file_range(path, start, end - start + 1), status=206, content_type="application/octet-stream"
    )
    response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["Content-Length"] = str(end - start + 1)
    response["Accept-Ranges"] = "bytes"
    return response


def range_not_satisfiable(size: int) -> HttpResponse:
    response = HttpResponse(status=416)
    response["Content-Range"] = f"bytes */{size}"
    return response


def file_range(path: Path, start: int, length: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        f.seek(start)
        while length > 0:
            chunk = f.read(min(length, 1 << 16))
            if not chunk:
                return
            length -= len(chunk)
            yield chunk
