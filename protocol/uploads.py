"""The file upload handler (reference/protocol.md §5.2; BOINC's sched/file_upload_handler.cpp).

A client POSTs a ``<data_server_request>`` text header and, for an upload, the raw file bytes
after a ``<data>`` line. The body is not XML (nothing closes the tags after the data), so the
header is read up to the first ``<data>\\n`` and its few fields picked out by tag; the bytes
after it are streamed to disk in chunks, whatever their size (§10.10).

Two requests:

- ``<get_file_size>NAME</get_file_size>``: how many bytes of NAME we hold (the finished file,
  else the part received so far, else 0). Never more than we have: a size at least the
  client's makes it skip the upload (§10.11);
- ``<file_upload>``: ``<file_info><name>``, ``<nbytes>``, ``<md5_cksum>``, ``<offset>``, then
  the bytes from ``offset`` on. They are appended to ``.NAME.part`` (cut back to ``offset``
  first, so a resumed upload continues where the client says); when all ``nbytes`` are there
  the MD5 is checked and the part renamed to NAME in the upload directory.

Each project has its own handler, writing to its own upload directory (``upload_path``); a
world's project, whose hosts are simulated, takes no uploads. Only output files of the
project's results that were sent and not yet reported may be uploaded: the name must be a
result's output name, ``<result>_r<random>_<i>``, whose random part only the host the
result was sent to has seen. An upload larger than the app's ``max_output_nbytes`` is refused.

The header is read in bounded time: at most ``HEADER_LIMIT`` bytes, its fields found by plain
searches that each look at the text once (no pattern that backtracks), before the database is
asked anything. One upload of a name runs at a time: the handler holds a lock on the name
(``name_lock``) from its size check to its rename, and a second upload of that name meanwhile
gets a transient error, as with BOINC's handler, which locks the file it writes. A file held
whole is never written again: an upload of the same bytes is a success, of others a permanent
error.

Replies carry ``<status>``: 0 success; 1 transient (the client backs off the file and retries
with a fresh size query): a disk error, a body cut short, an MD5 mismatch, an offset past what
we hold; -1 permanent ("giving up on upload"): an unknown or foreign file name, a file over the
size limit, a header that cannot be read.
"""

import fcntl
import functools
import hashlib
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, overload

from django.db import connection

from backend.daemons.hierarchy import partial_upload_path, upload_path
from backend.models import App, Outcome, Project, Result, ServerState

log = logging.getLogger("protocol.upload")

CHUNK = 1 << 16
HEADER_LIMIT = 1 << 16
DATA_MARK = b"<data>\n"
OUTPUT_NAME = re.compile(r"^(?P<result>[A-Za-z0-9._-]+)_r(?P<random>\d+)_(?P<index>\d+)$")

STATUS_OK, STATUS_TRANSIENT, STATUS_PERMANENT = 0, 1, -1


class Stream(Protocol):
    """What the handler reads a request from: the HttpRequest, or a file in tests."""

    def read(self, size: int, /) -> bytes: ...


class UploadError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def transient(message: str) -> UploadError:
    return UploadError(STATUS_TRANSIENT, message)


def permanent(message: str) -> UploadError:
    return UploadError(STATUS_PERMANENT, message)


def reply(status: int, message: str = "", file_size: int | None = None) -> bytes:
    """The short ``<data_server_reply>`` the client reads into a small buffer (§5.2)."""
    parts = ["<data_server_reply>", f"    <status>{status}</status>"]
    if file_size is not None:
        parts.append(f"    <file_size>{file_size}</file_size>")
    if message:
        safe = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        parts.append(f"    <message>{safe[:200]}</message>")
    parts.append("</data_server_reply>\n")
    return "\n".join(parts).encode()


def field(header: str, tag: str) -> str | None:
    """The stripped text between the first ``<tag>`` and the ``</tag>`` after it, if any."""
    start = header.find(f"<{tag}>")
    if start < 0:
        return None
    start += len(tag) + 2
    end = header.find(f"</{tag}>", start)
    return header[start:end].strip() if end >= 0 else None


@overload
def integer_field(header: str, tag: str, *, required: Literal[True] = ...) -> int: ...
@overload
def integer_field(header: str, tag: str, *, required: bool) -> int | None: ...


def integer_field(header: str, tag: str, *, required: bool = True) -> int | None:
    value = field(header, tag)
    if value is None:
        if required:
            raise permanent(f"missing <{tag}>")
        return None
    try:
        return int(float(value))
    except (ValueError, OverflowError):
        raise permanent(f"<{tag}> is not a finite number: {value[:40]!r}") from None


def read_header(stream: Stream) -> tuple[str, bytes]:
    """(header text, bytes already read past the ``<data>`` line) of the request ``stream``."""
    buffer = b""
    while True:
        # only the last chunk and the few bytes before it can hold a mark not seen yet
        at = buffer.find(DATA_MARK, max(len(buffer) - CHUNK - len(DATA_MARK), 0))
        if at >= 0:
            if at > HEADER_LIMIT:
                break
            return buffer[:at].decode("utf-8", errors="replace"), buffer[at + len(DATA_MARK) :]
        if len(buffer) > HEADER_LIMIT:
            break
        chunk = stream.read(CHUNK)
        if not chunk:
            return buffer.decode("utf-8", errors="replace"), b""
        buffer += chunk
    raise permanent(f"request header over {HEADER_LIMIT} bytes (the limit)")


@dataclass
class Target:
    """An output file a client may upload to a project, and its limit."""

    project: Project
    name: str
    max_nbytes: int

    @functools.cached_property
    def path(self) -> Path:
        """Where the finished file goes (``upload_path``)."""
        return upload_path(self.project, self.name)

    @functools.cached_property
    def part(self) -> Path:
        """Where the part received so far is kept (``partial_upload_path``)."""
        return partial_upload_path(self.project, self.name)


RESULT_COLUMNS = ("random", "server_state", "outcome", "received_time", "host")


@functools.cache
def result_query() -> str:
    """The one query an upload asks: the named result's send state and its app's output limit.
    Written once (a statement the ORM would build afresh for every upload, most of the
    handler's time)."""
    q = connection.ops.quote_name
    result, app = Result._meta, App._meta

    def column(meta: Any, name: str) -> str:
        return q(meta.get_field(name).column)

    columns = ", ".join(f"r.{column(result, name)}" for name in RESULT_COLUMNS)
    return (
        f"SELECT {columns}, a.{column(app, 'max_output_nbytes')} FROM {q(result.db_table)} r"
        f" JOIN {q(app.db_table)} a ON a.{q(app.pk.column)} = r.{column(result, 'app')}"
        f" WHERE r.{column(result, 'project')} = %s AND r.{column(result, 'name')} = %s"
    )


def upload_target(project: Project, name: str | None) -> Target:
    """The Target for ``name`` in ``project``, or UploadError(-1) when no host may upload such
    a file there."""
    if not project.is_live:
        raise permanent(f"{project.name} is a simulated world's project and takes no uploads")
    match = OUTPUT_NAME.match(name or "")
    if not match or name is None:
        raise permanent(f"unknown file {name!r}")
    with connection.cursor() as cursor:
        cursor.execute(result_query(), [project.pk, match["result"]])
        found = cursor.fetchone()
    # the name is <result>_r<random>_0 (Result.output_file_name) of a result of this project
    if found is None or str(found[0]) != match["random"] or match["index"] != "0":
        raise permanent(f"unknown file {name}")
    _, server_state, outcome, received_time, host_id, max_nbytes = found
    sent = server_state == ServerState.IN_PROGRESS or (server_state == ServerState.OVER and outcome == Outcome.NO_REPLY)
    if not sent or received_time or host_id is None:
        raise permanent(f"{name} is not an output of a job in progress")
    return Target(project=project, name=name, max_nbytes=max_nbytes)


@contextmanager
def name_lock(target: Target) -> Iterator[None]:
    """Hold the upload lock of ``name`` (a ``.NAME.lock`` file beside its part, locked with
    flock and removed on release), or raise a transient UploadError when another upload holds
    it. A lock taken on a file that was removed meanwhile is dropped and taken again."""
    name = target.name
    path = target.part.with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise transient(f"another upload of {name} is in progress; retry later") from None
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        yield
    finally:
        os.unlink(path)
        os.close(fd)


def held_size(target: Target) -> int:
    """Bytes of the target we hold: the finished file, else the part received so far."""
    for path in (target.path, target.part):
        if path.exists():
            return path.stat().st_size
    return 0


def handle(project: Project, stream: Stream) -> bytes:
    """Answer one request to ``project``'s upload handler read from ``stream``; returns the
    reply bytes."""
    try:
        header, data = read_header(stream)
        if "<get_file_size>" in header:
            target = upload_target(project, field(header, "get_file_size"))
            return reply(STATUS_OK, file_size=held_size(target))
        if "<file_upload>" in header:
            return receive(project, header, data, stream)
        raise permanent("no <get_file_size> or <file_upload> in the request")
    except UploadError as exc:
        log.warning("upload refused (status %s): %s", exc.status, exc.message)
        return reply(exc.status, exc.message)


def receive(project: Project, header: str, data: bytes, stream: Stream) -> bytes:
    file_info = field(header, "file_info") or ""
    target = upload_target(project, field(file_info, "name"))
    nbytes = integer_field(header, "nbytes")
    md5 = (field(header, "md5_cksum") or "").lower()
    offset = integer_field(header, "offset", required=False) or 0
    if nbytes < 0 or offset < 0 or offset > nbytes:
        raise permanent(f"bad size {nbytes} or offset {offset}")
    if nbytes > target.max_nbytes:
        raise permanent(f"file size ({nbytes} bytes) exceeds limit ({target.max_nbytes} bytes)")
    final = target.path
    try:
        with name_lock(target):
            if final.exists():
                return already_uploaded(final, nbytes, md5)
            store(target, nbytes, md5, offset, data, stream)
    except OSError as exc:
        raise transient(f"server can't store {target.name}: {exc.strerror or exc}") from None
    log.info("received %s (%d bytes, from offset %d)", target.name, nbytes, offset)
    return reply(STATUS_OK)


def already_uploaded(final: Path, nbytes: int, md5: str) -> bytes:
    """The reply to an upload of a file held whole already: success for the same bytes, which
    are not written again, else a permanent error (the first complete upload stays)."""
    digest = hashlib.md5()
    with open(final, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    if final.stat().st_size == nbytes and (not md5 or digest.hexdigest() == md5):
        return reply(STATUS_OK)
    raise permanent(f"{final.name} is uploaded already, with other content")


def store(target: Target, nbytes: int, md5: str, offset: int, data: bytes, stream: Stream) -> None:
    """Write the bytes from ``offset`` on to the part file and finish it when complete."""
    part = target.part  # in the directory name_lock made
    have = part.stat().st_size if part.exists() else 0
    if offset > have:
        raise transient(f"offset {offset} is past the {have} bytes received so far")
    digest = hashlib.md5()
    with open(part, "r+b" if part.exists() else "w+b") as f:
        f.truncate(offset)
        f.seek(0)
        for chunk in iter(lambda: f.read(min(CHUNK, offset - f.tell())), b""):
            digest.update(chunk)
        f.seek(offset)
        remaining = nbytes - offset
        while True:
            if len(data) > remaining:
                f.truncate(offset)
                raise permanent(f"more than the declared {nbytes} bytes were sent")
            f.write(data)
            digest.update(data)
            remaining -= len(data)
            data = stream.read(CHUNK)
            if not data:
                break
    if remaining > 0:
        raise transient(f"the body ended {remaining} bytes short; resume later")
    if md5 and digest.hexdigest() != md5:
        part.unlink(missing_ok=True)
        raise transient("MD5 mismatch; send the file again")
    finish_upload(part, target.path)


def finish_upload(part: Path, final: Path) -> None:
    """Make the received file visible under its name (an atomic rename)."""
    os.replace(part, final)
