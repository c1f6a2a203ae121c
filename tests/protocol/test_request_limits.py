"""Well-formed scheduler requests carrying values no column can hold (reference/protocol.md §4.2).

Each is refused whole with a reply naming the element (never a 500) and changes no row: the
request is checked against the columns' sizes on PostgreSQL (integers, max_length, no NUL)
before anything is read or written with its values, both through ``/boinc/cgi`` and through
``backend.daemons.scheduler.handle_request``, which the simulated volunteers call.
"""

import dataclasses
import re
import time
from xml.etree import ElementTree

import pytest
from django.test import Client

from backend.daemons.scheduler import (
    ClientAppVersion,
    GpuRequest,
    HostInfo,
    ReportedFile,
    ReportedResult,
    SchedulerRequest,
    SchedulerRequestError,
    StickyFile,
    TimeStats,
    handle_request,
)
from backend.models import File, Host, HostFile, LifecycleEvent, Result, ServerState
from tests.factories import demo_project
from tests.protocol.conftest import account, make_app, make_jobs
from tests.protocol.requests import report_request, work_request

pytestmark = pytest.mark.django_db

INT_MAX = 2**31 - 1
BIGINT_MAX = 2**63 - 1
LONG = "x" * 255  # one character over the 254 of every name column


def rpc(body):
    response = Client().generic("POST", "/boinc/cgi", body, content_type="application/x-www-form-urlencoded")
    return response, ElementTree.fromstring(response.content)


def snapshot():
    """Every row a scheduler request could change."""
    return (
        list(Host.objects.order_by("id").values()),
        list(Result.objects.order_by("id").values()),
        list(HostFile.objects.order_by("id").values()),
        list(File.objects.order_by("id").values()),
        LifecycleEvent.objects.count(),
    )


def element(tag, value, *, after=""):
    """Set the first ``<tag>`` of a request body (after the text ``after``) to ``value``."""

    def edit(body):
        start = body.index(after.encode())
        edited, n = re.subn(
            rf"<{tag}>[^<]*</{tag}>".encode(), f"<{tag}>{value}</{tag}>".encode(), body[start:], count=1
        )
        assert n == 1, tag
        return body[:start] + edited

    return edit


def inserted(before, xml):
    """Insert ``xml`` before the first ``before`` of a request body."""

    def edit(body):
        assert before.encode() in body
        return body.replace(before.encode(), xml.encode() + before.encode(), 1)

    return edit


def gpu(count):
    return inserted(
        "</host_info>",
        f"<coprocs><coproc_cuda><count>{count}</count>"
        "<peak_flops>1e12</peak_flops><req_secs>0</req_secs>"
        "</coproc_cuda></coprocs>\n",
    )


def sticky(name):
    return inserted(
        "<app_versions>", f"<file_info><name>{name}</name><nbytes>1000</nbytes><status>1</status></file_info>\n"
    )


def output_name(suffix):
    """Change the reported output file's name by appending ``suffix``."""

    def edit(body):
        return re.sub(
            rb"(<file_info>\s*<name>[^<]*)</name>", lambda m: m.group(1) + suffix.encode() + b"</name>", body, count=1
        )

    return edit


# (what is wrong, how the recorded report is changed, what the reply must say)
CASES = [
    ("negative rpc_seqno", element("rpc_seqno", -1), "rpc_seqno must be a whole number from 0 to 2147483647, not -1"),
    (
        "rpc_seqno over a PostgreSQL integer",
        element("rpc_seqno", 2**31),
        "rpc_seqno must be a whole number from 0 to 2147483647, not 2147483648",
    ),
    ("hostid over a bigint", element("hostid", 2**63), "<hostid> is out of range"),
    (
        "domain_name over its length",
        element("domain_name", LONG),
        "host_info.domain_name is 255 characters long; at most 254 are allowed",
    ),
    (
        "os_name over its length",
        element("os_name", LONG),
        "host_info.os_name is 255 characters long; at most 254 are allowed",
    ),
    (
        "platform_name over its length",
        element("platform_name", LONG),
        "platform_name is 255 characters long; at most 254 are allowed",
    ),
    (
        "p_ncpus over a PostgreSQL integer",
        element("p_ncpus", 2**31),
        "host_info.p_ncpus must be a whole number from 1 to 2147483647, not 2147483648",
    ),
    ("no CPU", element("p_ncpus", 0), "host_info.p_ncpus must be a whole number from 1 to 2147483647, not 0"),
    (
        "negative p_ncpus",
        element("p_ncpus", -4),
        "host_info.p_ncpus must be a whole number from 1 to 2147483647, not -4",
    ),
    ("zero p_fpops", element("p_fpops", 0), "host_info.p_fpops must be positive"),
    ("infinite p_fpops", element("p_fpops", "1e999"), "<p_fpops> is not a finite number"),
    (
        "GPU count over a PostgreSQL integer",
        gpu(2**31),
        "the NVIDIA count must be a whole number from 0 to 2147483647, not 2147483648",
    ),
    ("negative GPU count", gpu(-1), "the NVIDIA request has a negative value"),
    ("negative cpu_req_secs", element("cpu_req_secs", -1), "cpu_req_secs must not be negative"),
    ("negative cpu_req_instances", element("cpu_req_instances", -2), "cpu_req_instances must not be negative"),
    (
        "sticky file name over its length",
        sticky(LONG),
        "a sticky file_info's name is 255 characters long; at most 254 are allowed",
    ),
    (
        "exit_status over a PostgreSQL integer",
        element("exit_status", 2**31),
        "exit_status must be a whole number from -2147483648 to 2147483647, not 2147483648",
    ),
    (
        "exit_status under a PostgreSQL integer",
        element("exit_status", -(2**31) - 1),
        "exit_status must be a whole number from -2147483648 to 2147483647, not -2147483649",
    ),
    (
        "output nbytes over a bigint",
        element("nbytes", "1e19"),
        "nbytes must be a whole number from 0 to 9223372036854775807, not 10000000000000000000",
    ),
    (
        "negative output max_nbytes",
        element("max_nbytes", -5),
        "max_nbytes must be a whole number from 0 to 9223372036854775807, not -5",
    ),
    (
        "output md5_cksum over its length",
        element("md5_cksum", "0" * 33),
        "md5_cksum is 33 characters long; at most 32 are allowed",
    ),
    ("output file name over its length", output_name("0" * 254), "file_info.name is"),
    ("infinite final_cpu_time", element("final_cpu_time", "1e400"), "<final_cpu_time> is not a finite number"),
    (
        "app version_num over a PostgreSQL integer",
        element("version_num", 2**31, after="<app_versions>"),
        "version_num must be a whole number from 0 to 2147483647, not 2147483648",
    ),
    (
        "negative app avg_ncpus",
        element("avg_ncpus", -1, after="<app_versions>"),
        "avg_ncpus must not be negative, not -1.0",
    ),
]


@pytest.fixture
def sent():
    """An account whose host holds one IN_PROGRESS result (from a first RPC)."""
    make_jobs(make_app(), ["wu_a", "wu_b"], inputs=lambda name: b"input")
    key = account()
    response, root = rpc(work_request(key.authenticator, cpu_req_secs=1))
    assert response.status_code == 200
    result = Result.objects.get(name=root.find("result").findtext("name"))
    return key, result.host, result


@pytest.mark.parametrize("edit, reason", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_request_with_a_value_out_of_range_is_refused_naming_it_and_changes_nothing(sent, edit, reason):
    key, host, result = sent
    body = report_request(key.authenticator, host.pk, result.name, result.output_file_name(0))
    before = snapshot()
    response, root = rpc(edit(body))
    assert response.status_code == 200
    assert reason in root.findtext("message")
    assert root.find("result") is None and root.find("result_ack") is None
    assert snapshot() == before


def test_values_at_the_columns_limits_are_accepted_and_stored(sent):
    key, host, result = sent
    body = report_request(
        key.authenticator, host.pk, result.name, result.output_file_name(0), exit_status=-(2**31), state=3
    )
    for edit in (
        element("rpc_seqno", INT_MAX),
        element("domain_name", "d" * 254),
        element("os_name", "o" * 254),
        gpu(INT_MAX),
        sticky("s" * 254),
    ):
        body = edit(body)
    response, root = rpc(body)
    assert response.status_code == 200
    assert root.find("result_ack").findtext("name") == result.name
    host.refresh_from_db()
    assert (host.rpc_seqno, host.domain_name, host.os_name, host.gpu_count) == (INT_MAX, "d" * 254, "o" * 254, INT_MAX)
    assert HostFile.objects.get(host=host).name == "s" * 254
    result.refresh_from_db()
    assert result.server_state == ServerState.OVER and result.exit_status == -(2**31)


# --- the same limits through the scheduler function the simulated volunteers call ---------

# The wall clock, not the tests' shared NOW: make_jobs creates the work at the wall clock's now.
NOW = int(time.time())


@pytest.fixture
def host_with_job():
    """(request that reports the host's one job, the job) after a first handle_request."""
    make_jobs(make_app(), ["wu_a"], inputs=lambda name: b"input")
    user = account().user
    versions = [ClientAppVersion("upper", 100)]
    reply = handle_request(
        SchedulerRequest(
            userid=user.pk,
            platform_name="anonymous",
            app_versions=versions,
            cpu_req_secs=1,
            host_info=HostInfo(domain_name="vm", os_name="Linux", p_ncpus=2),
        ),
        project=demo_project(),
        now=NOW,
    )
    job = Result.objects.get(name=reply.results[0].name)
    request = SchedulerRequest(
        hostid=reply.hostid,
        userid=user.pk,
        rpc_seqno=1,
        platform_name="anonymous",
        app_versions=versions,
        host_info=HostInfo(domain_name="vm", os_name="Linux", p_ncpus=2),
        results=[
            ReportedResult(
                job.name, output_files=[ReportedFile(job.output_file_name(0), nbytes=5, max_nbytes=100, data=b"hello")]
            )
        ],
    )
    return request, job


def host_info(**fields):
    """The change of the request's host_info: ``fields`` set on the host's usual one."""
    return dict(host_info=HostInfo(**{"domain_name": "vm", "os_name": "Linux", "p_ncpus": 2, **fields}))


def reported(**fields):
    """The change of the request's report: ``fields`` set on it."""
    return lambda request: dict(results=[dataclasses.replace(request.results[0], **fields)])


def uploaded(**fields):
    """The change of the request's report: ``fields`` set on its output file."""
    return lambda request: dict(
        results=[
            dataclasses.replace(
                request.results[0], output_files=[dataclasses.replace(request.results[0].output_files[0], **fields)]
            )
        ]
    )


# (what is wrong, the request's changed fields, what the reason must say)
FUNCTION_CASES = [
    ("negative rpc_seqno", dict(rpc_seqno=-1), "rpc_seqno must be a whole number from 0"),
    ("hostid over a bigint", dict(hostid=2**63), "hostid must be a whole number from 0 to"),
    ("domain_name over its length", host_info(domain_name=LONG), "host_info.domain_name is 255 characters long"),
    ("NUL in domain_name", host_info(domain_name="v\x00m"), "host_info.domain_name contains a NUL character"),
    ("p_ncpus over a PostgreSQL integer", host_info(p_ncpus=2**31), "host_info.p_ncpus must be a whole number"),
    (
        "p_ncpus not a whole number",
        host_info(p_ncpus=1.5),
        "host_info.p_ncpus must be a whole number from 1 to 2147483647, not 1.5",
    ),
    ("NaN p_fpops", host_info(p_fpops=float("nan")), "host_info.p_fpops must be a finite number"),
    ("infinite p_fpops", host_info(p_fpops=float("inf")), "host_info.p_fpops must be a finite number"),
    ("p_fpops beyond a float", host_info(p_fpops=10**400), "host_info.p_fpops must be a finite number"),
    ("NaN on_frac", dict(time_stats=TimeStats(on_frac=float("nan"))), "time_stats.on_frac must be between 0 and 1"),
    ("infinite cpu_req_secs", dict(cpu_req_secs=float("inf")), "cpu_req_secs must be a finite number"),
    (
        "GPU count over a PostgreSQL integer",
        dict(gpu_requests=[GpuRequest("NVIDIA", count=2**31)]),
        "the NVIDIA count must be",
    ),
    (
        "infinite GPU peak_flops",
        dict(gpu_requests=[GpuRequest("NVIDIA", peak_flops=float("inf"))]),
        "the NVIDIA request has a negative value",
    ),
    (
        "sticky file name over its length",
        dict(file_infos=[StickyFile(LONG)]),
        "a sticky file_info's name is 255 characters long",
    ),
    (
        "exit_status over a PostgreSQL integer",
        reported(exit_status=2**31),
        "exit_status must be a whole number from -2147483648 to 2147483647",
    ),
    ("NaN final_elapsed_time", reported(final_elapsed_time=float("nan")), "final_elapsed_time must be a finite number"),
    ("NUL in stderr_out", reported(stderr_out="a\x00b"), "stderr_out contains a NUL character"),
    (
        "output nbytes over a bigint",
        uploaded(nbytes=2**63),
        "nbytes must be a whole number from 0 to 9223372036854775807",
    ),
    ("output md5_cksum over its length", uploaded(md5_cksum="0" * 33), "md5_cksum is 33 characters long"),
    (
        "NaN app avg_ncpus",
        dict(app_versions=[ClientAppVersion("upper", 100, avg_ncpus=float("nan"))]),
        "avg_ncpus must be a finite number",
    ),
    (
        "app version_num over a PostgreSQL integer",
        dict(app_versions=[ClientAppVersion("upper", 2**31)]),
        "version_num must be a whole number from 0 to 2147483647",
    ),
]


@pytest.mark.parametrize(
    "change, reason", [case[1:] for case in FUNCTION_CASES], ids=[case[0] for case in FUNCTION_CASES]
)
def test_handle_request_refuses_a_value_out_of_range_naming_it_and_changes_nothing(host_with_job, change, reason):
    request, job = host_with_job
    fields = change(request) if callable(change) else change
    before = snapshot()
    with pytest.raises(SchedulerRequestError) as refused:
        handle_request(dataclasses.replace(request, **fields), project=demo_project(), now=NOW + 10)
    assert reason in refused.value.reason
    assert snapshot() == before


def test_handle_request_takes_the_same_request_within_range(host_with_job):
    request, job = host_with_job
    reply = handle_request(request, project=demo_project(), now=NOW + 10)
    assert reply.result_acks == [job.name] and not reply.rejected
    job.refresh_from_db()
    assert job.server_state == ServerState.OVER
