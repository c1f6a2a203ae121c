"""Reading scheduler requests (reference/protocol.md §4.2, §4.4, §10.12)."""

import pytest

from backend.models import ClientState, GpuType
from protocol.xml_request import RequestParseError, parse_request
from tests.protocol.requests import RECORDED, report_request, work_request


def test_it_reads_the_recorded_report_of_client_7_20_5():
    parsed = parse_request(report_request("k" * 32, 7, "wu_0", "wu_0_r12_0"))
    assert parsed.authenticator == "k" * 32
    assert parsed.code_sign_key == ""
    request = parsed.request
    assert (request.hostid, request.rpc_seqno) == (7, 0)
    assert request.core_client_version == "7.20.5"
    assert request.platform_name == "anonymous"
    assert request.host_info.p_ncpus == 2
    assert request.host_info.domain_name == "vm"
    assert request.host_info.os_name == "Linux Debian"
    assert request.time_stats.on_frac == 1.0
    # A client never connected says -1, "unknown": read as always connected.
    assert request.time_stats.connected_frac == 1.0
    assert (request.cpu_req_secs, request.cpu_req_instances) == (0.0, 0.0)
    assert request.gpu_requests == []
    (report,) = request.results
    assert report.name == "wu_0"
    assert report.client_state == ClientState.FILES_UPLOADED and report.exit_status == 0
    assert report.app_version_num == 100
    assert "worker starting" in report.stderr_out
    assert "<![CDATA[" not in report.stderr_out
    (out,) = report.output_files
    assert (out.name, out.nbytes, out.max_nbytes) == ("wu_0_r12_0", 4611, 100000)
    assert out.md5_cksum == "5cf0301bb95378d016224e59a848c063" and out.error_msg == ""
    assert request.file_infos == []
    (version,) = request.app_versions
    assert (version.app_name, version.version_num) == ("upper", 100)
    assert request.other_results == []


def test_top_level_file_infos_are_sticky_files_and_those_in_a_result_are_outputs():
    body = report_request("k", 7, "wu_0", "wu_0_r12_0").replace(
        b"<app_versions>",
        b"<file_info>\n<name>shared.in</name>\n<nbytes>4096.000000</nbytes>\n"
        b"<status>1</status>\n</file_info>\n<app_versions>",
    )
    request = parse_request(body).request
    assert [(f.name, f.nbytes, f.status) for f in request.file_infos] == [("shared.in", 4096, 1)]
    assert [f.name for f in request.results[0].output_files] == ["wu_0_r12_0"]


def test_work_request_carries_the_cpu_request_and_new_host():
    request = parse_request(work_request("k", cpu_req_secs=1, cpu_req_instances=0)).request
    assert request.hostid == 0 and request.results == []
    assert request.cpu_req_secs == 1.0


def test_stderr_that_breaks_strict_xml_is_kept_and_the_rest_still_parses():
    nasty = ("line <one> & ]]> not the end </stderr_out> still stderr\x01\x07 \xff\xfe").encode("latin-1")
    body = report_request("k", 7, "wu_0", "wu_0_r12_0").replace(b"worker starting", b"worker starting " + nasty)
    request = parse_request(body).request
    stderr = request.results[0].stderr_out
    assert "line <one> & ]]> not the end </stderr_out> still stderr" in stderr
    assert "\x01" not in stderr
    assert request.results[0].output_files[0].name == "wu_0_r12_0"
    assert request.app_versions[0].app_name == "upper"


def test_two_results_keep_their_own_stderr():
    block = RECORDED[RECORDED.index("<result>") : RECORDED.index("</result>") + len("</result>\n")]
    second = block.replace("RESULT_NAME", "wu_1").replace("worker starting", "second one")
    body = report_request("k", 7, "wu_0", "wu_0_r12_0").replace(b"<app_versions>", second.encode() + b"<app_versions>")
    results = parse_request(body).request.results
    assert [r.name for r in results] == ["wu_0", "wu_1"]
    assert "worker starting" in results[0].stderr_out and "second" not in results[0].stderr_out
    assert "second one" in results[1].stderr_out


def test_gpu_work_requests_come_from_the_coprocessors_in_host_info():
    body = work_request("k").replace(
        b"</host_info>",
        b"<coprocs><coproc_cuda><count>2</count><peak_flops>5e12</peak_flops>"
        b"<req_secs>3600</req_secs><req_instances>1</req_instances>"
        b"<estimated_delay>10</estimated_delay></coproc_cuda></coprocs></host_info>",
    )
    (gpu,) = parse_request(body).request.gpu_requests
    assert (gpu.type, gpu.count, gpu.peak_flops, gpu.req_secs, gpu.req_instances, gpu.estimated_delay) == (
        GpuType.NVIDIA,
        2,
        5e12,
        3600.0,
        1.0,
        10.0,
    )


def test_code_sign_key_the_client_holds_is_read():
    body = work_request("k").replace(
        b"<platform_name>anonymous</platform_name>",
        b"<platform_name>x86_64-pc-linux-gnu</platform_name>\n<code_sign_key>\n1024\nabcd\n.\n</code_sign_key>",
    )
    parsed = parse_request(body)
    assert parsed.request.platform_name == "x86_64-pc-linux-gnu"
    assert parsed.code_sign_key == "1024\nabcd\n."


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"", "empty"),
        (b"<scheduler_request><hostid>1</hostid>", "not well-formed"),
        (b"<scheduler_reply></scheduler_reply>", "expected <scheduler_request>"),
        (b"<scheduler_request><hostid>one</hostid></scheduler_request>", "not a whole number"),
        (b"<scheduler_request><cpu_req_secs>nan</cpu_req_secs></scheduler_request>", "finite"),
        (b"<scheduler_request><hostid>99999999999999999999</hostid></scheduler_request>", "out of range"),
        (
            b'<!DOCTYPE r [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]>'
            b"<scheduler_request><authenticator>&b;</authenticator></scheduler_request>",
            "refused",
        ),
    ],
)
def test_malformed_requests_are_refused_with_a_reason(body, reason):
    with pytest.raises(RequestParseError) as exc:
        parse_request(body)
    assert reason in exc.value.reason
