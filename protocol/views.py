"""The project's endpoints for real BOINC clients (reference/protocol.md §3-§5).

- ``/boinc/``: the master page, naming the scheduler both ways a client finds it (§3, §10.1);
- ``/boinc/cgi``: the scheduler RPC, a raw XML body (§4.1, §10.9);
- ``/boinc/file_upload_handler``: uploads, streamed (§5.2, §10.10);
- ``/boinc/download/<name>``: input files and executables, with ``Range`` (§5.1);
- ``/boinc/account/``: the signed-in user's account key, for attaching a client.

The scheduler and upload handler are csrf-exempt: a client POSTs raw bodies labelled as forms
and holds no cookie. They never read ``request.POST`` or ``request.body``, and read a body sent
in chunks as well as one with a ``Content-Length`` (``body_stream``).
"""

import re
import time
from collections.abc import Iterator
from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from backend.daemons.hierarchy import download_path
from backend.daemons.sched_types import project_config
from protocol import uploads
from protocol.models import Account
from protocol.scheduler_rpc import scheduler_rpc
from protocol.uploads import Stream
from protocol.xml_reply import PROJECT_NAME, write_error_reply
from protocol.xml_request import MAX_REQUEST_BYTES

SAFE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class AuthenticatedHttpRequest(HttpRequest):
    """The request a view behind ``login_required`` gets: its user has signed in."""

    user: User


def master_url(request: HttpRequest) -> str:
    return request.build_absolute_uri(reverse("boinc:master"))


def master(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "protocol/master.html",
        {
            "project_name": PROJECT_NAME,
            "master_url": master_url(request),
            "scheduler_url": request.build_absolute_uri(reverse("boinc:scheduler")),
            "account_url": reverse("boinc:account"),
            "workunits_url": reverse("project:workunit_list"),
            "status_url": reverse("project:status"),
        },
    )


@login_required
def account(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(
        request,
        "protocol/account.html",
        {
            "account": Account.for_user(request.user),
            "master_url": master_url(request),
        },
    )


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
def scheduler(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    body = body_stream(request).read(MAX_REQUEST_BYTES + 1)
    if len(body) > MAX_REQUEST_BYTES:
        # A 200, not a 413: the client reads the message only from a 2xx reply (§4.1).
        return xml_response(
            write_error_reply(f"Can't parse scheduler request: it is over {MAX_REQUEST_BYTES} bytes long (the limit)")
        )
    status, reply = scheduler_rpc(body, now=int(time.time()), base_url=master_url(request), config=project_config())
    return xml_response(reply, status=status)


@csrf_exempt
def file_upload_handler(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    return HttpResponse(uploads.handle(body_stream(request)), content_type="text/plain")


def download(request: HttpRequest, name: str) -> HttpResponseBase:
    if not SAFE_NAME.match(name):
        raise Http404("no such file")
    path = download_path(name)
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
