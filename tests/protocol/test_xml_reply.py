"""Writing scheduler replies (reference/protocol.md §4.3, §10.2-§10.7, appendix A)."""

from xml.etree import ElementTree

from backend.daemons.sched_types import (
    Message,
    RejectedReport,
    ReplyAppVersion,
    ReplyFile,
    ReplyResult,
    ReplyWorkunit,
    SchedulerReply,
)
from protocol.xml_reply import AppFile, ReplyContext, write_error_reply, write_reply

BASE = "http://127.0.0.1:8000/boinc/"


def job(name, wu_name, inputs, *, version=None):
    version = version or ReplyAppVersion("upper", 100, "anonymous")
    wu = ReplyWorkunit(wu_name, "upper", 1e9, 1e12, 5e8, 1e9, 86400, inputs)
    return ReplyResult(
        name=name,
        wu_name=wu_name,
        report_deadline=1_800_086_400,
        workunit=wu,
        app_version=version,
        output_files=[ReplyFile(f"{name}_r5_0", max_nbytes=100_000)],
    )


def context(**fields):
    return ReplyContext(download_url=BASE + "download/", upload_url=BASE + "file_upload_handler", **fields)


def parse(body):
    assert body.rstrip().endswith(b"</scheduler_reply>")
    return ElementTree.fromstring(body)


def test_a_job_for_the_anonymous_platform_has_what_the_client_needs_and_no_app_version():
    shared = ReplyFile("shared.in", 4096, "ab" * 16, 0, sticky=True)
    reply = SchedulerReply(
        hostid=3,
        request_delay=5,
        results=[job("wu_a_0", "wu_a", [shared]), job("wu_b_0", "wu_b", [shared])],
        result_acks=["old_0"],
        messages=[Message("hello", "notice")],
        delete_file_infos=["gone.in"],
        result_aborts=["x_0"],
        result_abort_if_not_started=["y_0"],
    )
    root = parse(write_reply(reply, context()))
    tags = [child.tag for child in root]
    assert root.findtext("hostid") == "3" and root.findtext("request_delay") == "5"
    assert root.find("master_url") is None
    assert root.find("app") is None and root.find("app_version") is None
    infos = root.findall("file_info")
    # The shared sticky input once, then the two outputs.
    assert [f.findtext("name") for f in infos] == ["shared.in", "wu_a_0_r5_0", "wu_b_0_r5_0"]
    assert infos[0].findtext("url") == BASE + "download/shared.in"
    assert infos[0].findtext("md5_cksum") == "ab" * 16 and infos[0].findtext("nbytes") == "4096"
    assert infos[0].find("sticky") is not None
    assert infos[0].find("report_on_rpc") is None  # only locality's big files carry it
    for out in infos[1:]:
        assert out.findtext("upload_url") == BASE + "file_upload_handler"
        assert out.find("url") is None
        assert out.findtext("max_nbytes") == "100000"
    # Workunits after the files they name, results after the workunits.
    assert tags.index("workunit") > max(i for i, t in enumerate(tags) if t == "file_info")
    assert tags.index("result") > tags.index("workunit")
    wu = root.find("workunit")
    assert wu.findtext("app_name") == "upper"
    assert float(wu.findtext("rsc_fpops_est")) == 1e9
    ref = wu.find("file_ref")
    assert (ref.findtext("file_name"), ref.findtext("open_name")) == ("shared.in", "in")
    assert ref.find("copy_file") is not None
    result = root.find("result")
    assert result.findtext("report_deadline") == "1800086400"
    assert result.find("platform") is None and result.find("version_num") is None
    out_ref = result.find("file_ref")
    assert (out_ref.findtext("file_name"), out_ref.findtext("open_name")) == ("wu_a_0_r5_0", "out")
    assert out_ref.find("copy_file") is not None
    assert [a.findtext("name") for a in root.findall("result_ack")] == ["old_0"]
    assert root.find("result_abort").findtext("name") == "x_0"
    assert root.find("result_abort_if_not_started").findtext("name") == "y_0"
    assert root.findtext("delete_file_info") == "gone.in"
    message = root.find("message")
    assert (message.text, message.get("priority")) == ("hello", "notice")


def test_every_reported_result_is_acked_and_a_rejected_one_says_why():
    reply = SchedulerReply(
        result_acks=["r1", "r2"], rejected=[RejectedReport("r2", "this result was sent to another host")]
    )
    root = parse(write_reply(reply, context()))
    assert [a.findtext("name") for a in root.findall("result_ack")] == ["r1", "r2"]
    assert "sent to another host" in root.findtext("message")
    assert root.find("result") is None


def test_a_signed_app_version_is_sent_with_its_executable_signature_and_the_key():
    version = ReplyAppVersion("upper", 200, "x86_64-pc-linux-gnu", avg_ncpus=1.0, flops=1e9)
    files = {("upper", 200, "x86_64-pc-linux-gnu", ""): [AppFile("upper_200.sh", 120, "cd" * 16, "00ff\n.\n")]}
    reply = SchedulerReply(results=[job("wu_a_0", "wu_a", [], version=version)])
    root = parse(write_reply(reply, context(anonymous=False, code_sign_key="1024\nab\n.\n", app_files=files)))
    assert root.findtext("code_sign_key").strip() == "1024\nab\n."
    assert root.find("app").findtext("name") == "upper"
    exe = root.find("file_info")
    assert exe.findtext("name") == "upper_200.sh"
    assert exe.findtext("url") == BASE + "download/upper_200.sh"
    assert exe.find("executable") is not None
    assert exe.findtext("file_signature").strip() == "00ff\n."
    av = root.find("app_version")
    assert (av.findtext("app_name"), av.findtext("version_num"), av.findtext("platform")) == (
        "upper",
        "200",
        "x86_64-pc-linux-gnu",
    )
    ref = av.find("file_ref")
    assert ref.findtext("file_name") == "upper_200.sh" and ref.find("main_program") is not None
    result = root.find("result")
    assert (result.findtext("platform"), result.findtext("version_num")) == ("x86_64-pc-linux-gnu", "200")


def test_an_error_reply_is_a_complete_reply_with_a_message_and_delay():
    body = write_error_reply("Invalid or missing account key", request_delay=3600)
    root = parse(body)
    assert root.findtext("message") == "Invalid or missing account key"
    assert root.findtext("request_delay") == "3600"


def test_a_locality_file_carries_report_on_rpc_beside_sticky():
    big = ReplyFile("h1_0001", 10**6, "cd" * 16, 0, sticky=True, report_on_rpc=True)
    root = parse(write_reply(SchedulerReply(results=[job("h1_0001__0_0", "h1_0001__0", [big])]), context()))
    info = root.find("file_info")
    assert info.findtext("name") == "h1_0001"
    assert info.find("sticky") is not None and info.find("report_on_rpc") is not None
