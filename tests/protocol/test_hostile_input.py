"""Hostile scheduler requests and uploads (issue 34's findings 1 and 5-9): each is read in
bounded time and memory before the account is checked, refused with a reply naming the limit,
and changes nothing; concurrent uploads of one output cannot mix their bytes; a body sent in
chunks is read (reference/protocol.md §4.1, §5.2).

The time and memory of a parse are measured in a forked child, so a parse that runs away (as
the old ones did, for 30 s and 700 MB) is killed at the bound instead of holding the test run.
"""

import hashlib
import io
import logging
import os
import pickle
import signal
import time
from xml.etree import ElementTree

import pytest
from django.test import Client

from backend.daemons.hierarchy import upload_path
from backend.models import Host, Result
from protocol import uploads
from protocol.xml_request import MAX_DEPTH, MAX_ELEMENTS, MAX_REPORTS, parse_request
from tests.factories import demo_project
from tests.protocol.conftest import account, make_app, make_jobs
from tests.protocol.requests import work_request
from tests.protocol.test_request_limits import snapshot

pytestmark = pytest.mark.django_db

# A parse that stays within these is bounded; the old ones took 13-30 s and up to 704 MB.
SECONDS = 3.0
GROWTH_BYTES = 64 << 20


def vm_kilobytes(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def bounded(call, *args):
    """(outcome, seconds, peak memory growth in bytes) of ``call(*args)`` run in a forked child:
    outcome is ("value", v) or ("error", str(exc)). Fails when the child takes over SECONDS."""
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: measure, report, leave without running the parent's cleanups
        os.close(read_end)
        base = vm_kilobytes("VmRSS")
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # the peak (VmHWM) starts again from now
        try:
            outcome = ("value", call(*args))
        except Exception as exc:  # noqa: BLE001 - the child reports whatever it met
            outcome = ("error", f"{type(exc).__name__}: {exc}")
        growth = (vm_kilobytes("VmHWM") - base) * 1024
        with os.fdopen(write_end, "wb") as out:
            pickle.dump((outcome, growth), out)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as result:
        while time.monotonic() - started < SECONDS:
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            time.sleep(0.01)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"{call.__name__} ran for more than {SECONDS} s")
        outcome, growth = pickle.load(result)
    return outcome, time.monotonic() - started, growth


def refusal(call, *args):
    """The reason ``call(*args)`` raised RequestParseError with, checked for time and memory."""
    outcome, _, growth = bounded(call, *args)
    assert growth < GROWTH_BYTES, f"peak memory grew by {growth >> 20} MB"
    kind, detail = outcome
    assert kind == "error", f"not refused: {detail!r}"[:300]
    assert detail.startswith("RequestParseError"), detail
    return detail


def rpc(body):
    response = Client().generic("POST", "/boinc/cgi", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 200
    return ElementTree.fromstring(response.content)


def test_unclosed_stderr_blocks_are_read_in_linear_time():
    # finding 1: 21 KB held a worker for 30 s in the stderr pattern's backtracking
    body = b"<scheduler_request>" + b"<stderr_out><![CDATA[" * 1000
    detail = refusal(parse_request, body)
    assert "not well-formed XML" in detail


def test_stderr_blocks_still_end_at_the_cdata_end_before_their_closing_tag():
    body = (
        b"<scheduler_request><result><name>r</name><stderr_out><![CDATA[a ]]> b </stderr_out> c]]>\n"
        b"</stderr_out></result><result><name>s</name><stderr_out>plain</stderr_out></result></scheduler_request>"
    )
    first, second = parse_request(body).request.results
    assert first.stderr_out == "a ]]> b </stderr_out> c"
    assert second.stderr_out == "plain"


def test_millions_of_nested_elements_are_refused_in_bounded_memory():
    # finding 5: 2.2 M nested elements (15.4 MB) peaked a worker at 704 MB
    depth = 2_200_000
    body = b"<scheduler_request>" + b"<a>" * depth + b"</a>" * depth + b"</scheduler_request>"
    detail = refusal(parse_request, body)
    assert f"more than {MAX_ELEMENTS} elements (the limit)" in detail


def test_elements_nested_past_the_depth_limit_are_refused_naming_it():
    depth = MAX_ELEMENTS // 2
    body = b"<scheduler_request>" + b"<a>" * depth + b"</a>" * depth + b"</scheduler_request>"
    detail = refusal(parse_request, body)
    assert f"nested more than {MAX_DEPTH} deep (the limit)" in detail


def test_millions_of_flat_elements_are_refused_at_the_element_limit_in_bounded_memory():
    body = b"<scheduler_request>" + b"<a/>" * 4_000_000 + b"</scheduler_request>"
    detail = refusal(parse_request, body)
    assert f"more than {MAX_ELEMENTS} elements (the limit)" in detail


def test_a_refusal_names_the_limit_in_the_error_reply_and_changes_nothing():
    key = account("volunteer")
    make_jobs(make_app(), ["wu_a"])
    before = snapshot()
    body = work_request(key.authenticator).replace(b"</scheduler_request>", b"<a/>" * (MAX_ELEMENTS + 1))
    root = rpc(body)
    assert root.findtext("message") == (
        f"Can't parse scheduler request: it has more than {MAX_ELEMENTS} elements (the limit)"
    )
    assert root.find("result") is None
    assert snapshot() == before


def test_reports_past_the_limit_are_left_unacked_with_one_log_line_for_the_request(caplog):
    # finding 6: 450,000 reports ran for 30 s and logged one line each
    key = account("volunteer")
    rpc(work_request(key.authenticator))
    host = Host.objects.get(owner=key.user)
    reports = b"".join(b"<result><name>unknown_%d</name></result>" % i for i in range(MAX_REPORTS + 200))
    body = work_request(key.authenticator, host.pk).replace(b"</scheduler_request>", reports + b"</scheduler_request>")
    before = snapshot()
    with caplog.at_level(logging.WARNING, logger="protocol.scheduler"):
        root = rpc(body)
    acks = [ack.findtext("name") for ack in root.findall("result_ack")]
    assert acks == [f"unknown_{i}" for i in range(MAX_REPORTS)]
    messages = [m.text for m in root.findall("message")]
    assert (
        f"Only the first {MAX_REPORTS} reported results were handled (the limit per request); "
        "the other 200 are reported at the next request"
    ) in messages
    lines = [r.getMessage() for r in caplog.records if r.name == "protocol.scheduler"]
    assert len(lines) == 2, lines[:5]
    assert f"{MAX_REPORTS} reported result(s) not sent to it, ignored: unknown_0, unknown_1" in lines[0]
    assert "200 reported result(s) over the limit of 1000 per request" in lines[1]
    assert snapshot()[1] == before[1]


def test_a_scheduler_request_sent_in_chunks_is_read():
    # finding 9: a chunked body (no Content-Length) read as empty under gunicorn
    key = account("volunteer")
    body = work_request(key.authenticator)
    response = Client().generic(
        "POST",
        "/boinc/cgi",
        b"",
        content_type="application/x-www-form-urlencoded",
        HTTP_TRANSFER_ENCODING="chunked",
        CONTENT_LENGTH="",
        **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True},
    )
    root = ElementTree.fromstring(response.content)
    assert root.findtext("hostid") == str(Host.objects.get(owner=key.user).pk), response.content[:500]


def upload_header(name, nbytes, md5):
    return (
        f"<data_server_request>\n<file_upload>\n<file_info>\n<name>{name}</name>\n</file_info>\n"
        f"<nbytes>{nbytes}</nbytes>\n<md5_cksum>{md5}</md5_cksum>\n<offset>0</offset>\n<data>\n"
    ).encode()


@pytest.mark.parametrize("opening", [b"<get_file_size>", b"<file_info>"])
def test_an_upload_header_of_repeated_openings_is_read_in_linear_time(opening):
    # finding 7: 127 KB of openings held a worker 13-17 s
    body = b"<data_server_request>\n<file_upload>\n" + opening * (uploads.HEADER_LIMIT // len(opening))
    outcome, _, _ = bounded(uploads.handle, demo_project(), io.BytesIO(body + b"<data>\n"))
    kind, reply = outcome
    assert kind == "value" and b"<status>-1</status>" in reply, outcome


def test_an_upload_header_over_the_limit_is_refused_naming_it():
    body = b"<data_server_request>\n" + b" " * (2 * uploads.HEADER_LIMIT) + b"<data>\n"
    reply = uploads.handle(demo_project(), io.BytesIO(body))
    assert f"request header over {uploads.HEADER_LIMIT} bytes (the limit)".encode() in reply


class Interleaved:
    """An upload body that, once its header and first bytes are in, lets another whole upload
    of the same file run before it sends the rest (two clients at once)."""

    def __init__(self, body, other):
        self.stream = io.BytesIO(body)
        self.other = other
        self.other_reply = None
        self.reads = 0

    def read(self, size):
        self.reads += 1
        if self.reads == 2:
            self.other_reply = uploads.handle(demo_project(), io.BytesIO(self.other))
        return self.stream.read(size)


def test_two_uploads_of_one_output_at_once_never_leave_a_client_told_success_with_the_others_bytes(settings):
    # finding 8: no lock per upload name
    key = account("volunteer")
    make_jobs(make_app(), ["wu_a"])
    rpc(work_request(key.authenticator))
    result = Result.objects.get(host__owner=key.user)
    name = result.output_file_name(0)
    first, second = b"A" * 90_000, b"B" * 90_000
    bodies = [upload_header(name, len(d), hashlib.md5(d).hexdigest()) + d for d in (first, second)]
    stream = Interleaved(bodies[0], bodies[1])
    first_reply = uploads.handle(demo_project(), stream)
    stored = upload_path(demo_project(), name).read_bytes() if upload_path(demo_project(), name).exists() else None
    for reply, data in [(first_reply, first), (stream.other_reply, second)]:
        if b"<status>0</status>" in reply:
            assert stored == data, "a client was told success, but the file holds other bytes"
    assert b"<status>1</status>" in stream.other_reply and b"in progress" in stream.other_reply
    assert stored == first
    assert not list(upload_path(demo_project(), name).parent.glob(".*.lock"))
    # the file is whole: the same bytes again are a success, others are refused, and it stays
    assert b"<status>0</status>" in uploads.handle(demo_project(), io.BytesIO(bodies[0]))
    assert b"<status>-1</status>" in uploads.handle(demo_project(), io.BytesIO(bodies[1]))
    assert upload_path(demo_project(), name).read_bytes() == first
