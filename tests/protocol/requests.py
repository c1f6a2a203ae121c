"""Scheduler requests for the tests, made from one recorded from client 7.20.5.

``data/report_request.xml`` is the report RPC of a real run (anonymous platform, one result,
its output uploaded), with the authenticator, host id, result and output names and the server
address replaced by placeholders.
"""

import re
from pathlib import Path

RECORDED = (Path(__file__).parent / "data" / "report_request.xml").read_text()
RESULT_BLOCK = re.compile(r"<result>.*?</result>\n", re.DOTALL)


def report_request(
    authenticator,
    hostid,
    result_name,
    output_name,
    *,
    nbytes=4611,
    md5="5cf0301bb95378d016224e59a848c063",
    state=5,
    exit_status=0,
    error_msg="",
):
    """The recorded report of ``result_name`` with its output ``output_name``."""
    text = (
        RECORDED.replace("AUTHENTICATOR", authenticator)
        .replace("<hostid>HOSTID<", f"<hostid>{hostid}<")
        .replace("OUTPUT_NAME", output_name)
        .replace("RESULT_NAME", result_name)
        .replace("<nbytes>4611.000000</nbytes>", f"<nbytes>{nbytes}.000000</nbytes>")
        .replace("5cf0301bb95378d016224e59a848c063", md5)
        .replace("<state>5</state>", f"<state>{state}</state>")
        .replace("<exit_status>0</exit_status>", f"<exit_status>{exit_status}</exit_status>")
    )
    if error_msg:
        text = text.replace("</upload_url>\n", f"</upload_url>\n<error_msg>{error_msg}</error_msg>\n")
    return text.encode()


def work_request(authenticator, hostid=0, *, cpu_req_secs=1.0, cpu_req_instances=0.0, sticky=()):
    """The recorded request without its result, asking for work; ``sticky`` files held."""
    text = RESULT_BLOCK.sub("", RECORDED).replace("AUTHENTICATOR", authenticator)
    text = text.replace("<hostid>HOSTID<", f"<hostid>{hostid}<")
    text = text.replace("<cpu_req_secs>0.000000<", f"<cpu_req_secs>{cpu_req_secs:f}<")
    text = text.replace("<cpu_req_instances>0.000000<", f"<cpu_req_instances>{cpu_req_instances:f}<")
    files = "".join(
        f"<file_info>\n    <name>{name}</name>\n    <nbytes>{nbytes}.000000</nbytes>\n"
        f"    <status>1</status>\n</file_info>\n"
        for name, nbytes in sticky
    )
    return text.replace("<app_versions>", files + "<app_versions>").encode()
