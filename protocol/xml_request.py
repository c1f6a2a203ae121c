"""Reading a real client's ``<scheduler_request>`` (reference/protocol.md §4.2, §4.4, §10.12).

``parse_request(body) -> ParsedRequest`` turns the raw POST body into the scheduler's
``SchedulerRequest`` (backend.daemons.sched_types) plus what only the wire layer needs: the
authenticator and whether the client already holds the project's code-signing key.

Parsing is lenient where a real client is known to send text a strict XML parser refuses:

- ``<stderr_out>`` holds the application's stderr inside CDATA, which the application controls:
  it may contain ``]]>``, ``</stderr_out>``, stray ``<``, bytes that are not UTF-8 or control
  characters XML forbids. Each ``<stderr_out>`` block is cut out of the body before parsing (it
  ends at the ``]]>`` directly followed by ``</stderr_out>``) and its text kept aside, the CDATA
  markers the client wrapped it in removed;
- bytes that are not UTF-8 elsewhere are replaced, and control characters XML 1.0 forbids are
  dropped.

Top-level ``<file_info>`` elements are the sticky files the client holds (locality
scheduling), told apart from the ``<file_info>`` elements inside a reported ``<result>``, which
describe its uploaded outputs (§4.2, §10.12).

Anything else wrong (not XML after that, no ``<scheduler_request>`` root, a number that is not
a number) raises ``RequestParseError`` with the reason; the caller answers with an error reply.
The XML is read with defusedxml, so entity tricks are refused rather than expanded.

Reading is bounded in time and memory whatever the body holds, since it runs before the account
is known: the stderr blocks are found by one forward scan (no pattern that backtracks), and the
XML is fed to the parser a slice at a time while the elements are counted, so a body over
``MAX_ELEMENTS`` elements or nested deeper than ``MAX_DEPTH`` is refused as soon as the parser
meets the element over the limit, the reason naming the limit (a body with millions of tags is
refused before parsing, by a count of its ``<``). Only the first ``MAX_REPORTS``
reported results are kept (``ParsedRequest.reports_over`` counts the rest): like BOINC's
``<report_max>`` (reference/server.md §3.5), the rest go unacknowledged and the client reports
them at its next request.
"""

import codecs
import re
from dataclasses import dataclass
from xml.etree.ElementTree import Element, TreeBuilder

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from backend.daemons.sched_types import (
    ClientAppVersion,
    GlobalPrefs,
    GpuRequest,
    HostInfo,
    ReportedFile,
    ReportedResult,
    SchedulerRequest,
    StickyFile,
    TimeStats,
)
from backend.models import GpuType
from scheduling.engine import xml_fields

# The coprocessor elements a client describes its GPUs with, and our GpuType for each.
COPROC_TYPES = {
    "coproc_cuda": GpuType.NVIDIA,
    "coproc_ati": GpuType.ATI,
    "coproc_intel_gpu": GpuType.INTEL,
    "coproc_apple_gpu": GpuType.APPLE,
}

# The bounds of a scheduler request, checked while it is read. A real request is 6-8 KB, 300-odd
# elements at most 5 deep, plus 63 KB of stderr and some 25 elements per reported result.
MAX_REQUEST_BYTES = 16 << 20
MAX_ELEMENTS = 50_000
MAX_DEPTH = 32
MAX_REPORTS = 1000
# Bytes handed to the XML parser at a time, so that a limit stops the reading early.
FEED_BYTES = 1 << 16

STDERR_OPEN, STDERR_CLOSE, CDATA_OPEN = b"<stderr_out>", b"</stderr_out>", b"<![CDATA["
# The end of a stderr block in CDATA: the ``]]>`` right before ``</stderr_out>``, so that the
# application's own ``]]>`` or ``</stderr_out>`` text does not end it.
CDATA_STDERR_END = re.compile(rb"\]\]>\s*</stderr_out>")
XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
# Characters XML 1.0 does not allow, even escaped.
FORBIDDEN_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class RequestParseError(ValueError):
    """The body is not a scheduler request we can read; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ParsedRequest:
    """A scheduler request as the client sent it, before the account is looked up."""

    authenticator: str
    request: SchedulerRequest
    code_sign_key: str = ""
    # reported results past MAX_REPORTS, left out of ``request.results``
    reports_over: int = 0
    # the <mod_time> of the preferences the client holds from a project (its top-level
    # <global_preferences>, not the working ones); 0 when it holds none
    global_prefs_mod_time: float = 0.0


def parse_request(body: bytes) -> ParsedRequest:
    """Parse the raw body of a scheduler RPC (bytes) into a ParsedRequest."""
    root, stderrs = read_xml(body)
    if root.tag != "scheduler_request":
        raise RequestParseError(f"expected <scheduler_request>, found <{root.tag}>")
    reports = root.findall("result")
    major = text(root, "core_client_major_version")
    minor = text(root, "core_client_minor_version")
    release = text(root, "core_client_release")
    version = ".".join(v for v in (major, minor, release) if v)
    request = SchedulerRequest(
        hostid=integer(root, "hostid"),
        rpc_seqno=integer(root, "rpc_seqno"),
        core_client_version=version,
        platform_name=text(root, "platform_name") or "x86_64-pc-linux-gnu",
        alt_platforms=[text(alt, "name") for alt in root.findall("alt_platform") if text(alt, "name")],
        host_info=host_info(root.find("host_info"), root),
        time_stats=time_stats(root.find("time_stats")),
        global_prefs=global_prefs(root),
        work_req_seconds=number(root, "work_req_seconds"),
        cpu_req_secs=number(root, "cpu_req_secs"),
        cpu_req_instances=number(root, "cpu_req_instances"),
        estimated_delay=number(root, "estimated_delay"),
        gpu_requests=gpu_requests(root),
        dont_send_work=xml_fields.flag(root, "dont_send_work"),
        results=[reported_result(r, stderrs) for r in reports[:MAX_REPORTS]],
        file_infos=[sticky_file(f) for f in root.findall("file_info")],
        app_versions=client_app_versions(root.find("app_versions")),
        other_results=other_results(root.find("other_results")),
    )
    return ParsedRequest(
        authenticator=text(root, "authenticator"),
        request=request,
        code_sign_key=text(root, "code_sign_key"),
        reports_over=max(len(reports) - MAX_REPORTS, 0),
        global_prefs_mod_time=number(root.find("global_preferences"), "mod_time"),
    )


def read_xml(body: bytes) -> tuple[Element, list[str]]:
    """(root element, list of stderr_out texts) of ``body``, the stderr blocks cut out."""
    if not isinstance(body, bytes):
        raise RequestParseError("the request body must be bytes")
    if len(body) > MAX_REQUEST_BYTES:
        raise RequestParseError(f"it is over {MAX_REQUEST_BYTES} bytes long (the limit)")
    cleaned, stderrs = cut_stderr_blocks(body)
    if not cleaned.strip():
        raise RequestParseError("the request body is empty")
    # Every element but a self-closing one has a closing tag, so this bounds the elements from
    # above; counted at the speed of a byte search, it refuses a body of millions at once.
    if cleaned.count(b"<") - cleaned.count(b"</") > MAX_ELEMENTS:
        raise RequestParseError(f"it has more than {MAX_ELEMENTS} elements (the limit)")
    builder = LimitedTreeBuilder()
    parser = ElementTree.XMLParser(target=builder)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        for at in range(0, len(cleaned), FEED_BYTES):
            piece = FORBIDDEN_CHARS.sub("", decoder.decode(cleaned[at : at + FEED_BYTES]))
            if at == 0:
                # ElementTree refuses an encoding declaration in text; the text is decoded already.
                piece = XML_DECLARATION.sub("", piece)
            parser.feed(piece)
        parser.feed(FORBIDDEN_CHARS.sub("", decoder.decode(b"", final=True)))
        return parser.close(), stderrs
    except DefusedXmlException as exc:
        raise RequestParseError(f"refused XML construct: {exc}") from None
    except ElementTree.ParseError as exc:
        raise RequestParseError(f"not well-formed XML: {exc}") from None


class LimitedTreeBuilder(TreeBuilder):
    """ElementTree's tree builder, refusing the element past MAX_ELEMENTS or MAX_DEPTH."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0
        self.depth = 0

    def start(self, tag: str, attrs: dict[str, str]) -> Element:
        self.elements += 1
        self.depth += 1
        if self.elements > MAX_ELEMENTS:
            raise RequestParseError(f"it has more than {MAX_ELEMENTS} elements (the limit)")
        if self.depth > MAX_DEPTH:
            raise RequestParseError(f"its elements are nested more than {MAX_DEPTH} deep (the limit)")
        return super().start(tag, attrs)

    def end(self, tag: str) -> Element:
        self.depth -= 1
        return super().end(tag)


def cut_stderr_blocks(body: bytes) -> tuple[bytes, list[str]]:
    """``body`` with each ``<stderr_out>`` block's text replaced by its index in the list of
    their texts, found in one forward scan: a block in CDATA ends at the ``]]>`` right before
    ``</stderr_out>``, else (or when no such end follows) at the first ``</stderr_out>``; a
    block with no end is left as it is. A search that found nothing is not repeated further on,
    where it would find nothing either, so the scan stays linear in the body's length."""
    parts: list[bytes] = []
    stderrs: list[str] = []
    at = 0
    cdata_ends = True
    while True:
        opening = body.find(STDERR_OPEN, at)
        if opening < 0:
            break
        start = opening + len(STDERR_OPEN)
        close = body.find(STDERR_CLOSE, start)
        if close < 0:
            break  # no block after this one has an end either
        end = -1
        cdata = body.find(CDATA_OPEN, start, close)
        if cdata >= 0 and cdata_ends:
            match = CDATA_STDERR_END.search(body, cdata + len(CDATA_OPEN))
            if match:
                end = match.end() - len(STDERR_CLOSE)
            else:
                cdata_ends = False
        if end < 0:
            end = close
        parts.append(body[at:start])
        parts.append(b"%d" % len(stderrs))
        stderrs.append(stderr_text(body[start:end]))
        at = end
    parts.append(body[at:])
    return b"".join(parts), stderrs


def stderr_text(raw: bytes) -> str:
    """The text of one stderr_out block: CDATA markers removed, invalid characters dropped."""
    text_ = raw.decode("utf-8", errors="replace")
    start = text_.find("<![CDATA[")
    if start >= 0:
        end = text_.rfind("]]>")
        if end > start:
            text_ = text_[:start] + text_[start + len("<![CDATA[") : end] + text_[end + 3 :]
        else:
            text_ = text_[:start] + text_[start + len("<![CDATA[") :]
    return FORBIDDEN_CHARS.sub("", text_).strip()


def text(element: Element | None, tag: str) -> str:
    return xml_fields.text(element, tag) or ""


def number(element: Element | None, tag: str, default: float = 0.0) -> float:
    try:
        return xml_fields.number(element, tag, default)
    except xml_fields.FieldError as exc:
        raise field_error(exc) from None


def integer(element: Element | None, tag: str, default: int = 0) -> int:
    try:
        return xml_fields.integer(element, tag, default)
    except xml_fields.FieldError as exc:
        raise field_error(exc) from None


def field_error(exc: xml_fields.FieldError) -> RequestParseError:
    """The reply's reason for a value its element cannot hold."""
    problem = "not a finite number" if exc.problem == xml_fields.NOT_FINITE else exc.problem
    return RequestParseError(f"<{exc.tag}> is {problem}: {exc.text[:40]!r}")


def host_info(element: Element | None, root: Element | None = None) -> HostInfo:
    """``<host_info>``, with the disk BOINC uses (``<disk_usage>``) and the download speed it
    measured (``<net_stats>``), both at the request's top level (sched_types.cpp
    SCHEDULER_REQUEST::parse, HOST::parse_disk_usage, HOST::parse_net_stats)."""
    info = HostInfo()
    if root is not None:
        usage = root.find("disk_usage")
        info.d_boinc_used_total = number(usage, "d_boinc_used_total")
        info.d_boinc_used_project = number(usage, "d_boinc_used_project")
        info.n_bwdown = number(root.find("net_stats"), "bwdown")
    if element is None:
        return info
    for name in ("domain_name", "host_cpid", "ip_addr", "p_vendor", "p_model", "os_name", "os_version", "p_features"):
        setattr(info, name, text(element, name))
    info.timezone = integer(element, "timezone")
    info.p_ncpus = integer(element, "p_ncpus", 1)
    for name in ("p_fpops", "p_iops"):
        setattr(info, name, number(element, name, 1e9))
    for name in ("m_nbytes", "d_total", "d_free"):
        setattr(info, name, number(element, name))
    return info


def global_prefs(root: Element) -> GlobalPrefs:
    """The preferences the scheduler decides with (handle_request.cpp handle_global_prefs):
    ``<working_global_preferences>`` when the client sends them, else
    ``<global_preferences>``, else BOINC's defaults. Only the top level counts: the host has
    no venue here, and BOINC then leaves every ``<venue>`` out (parse.cpp extract_venue).
    RAM limits are percentages (GLOBAL_PREFS::parse)."""
    element = root.find("working_global_preferences")
    if element is None:
        element = root.find("global_preferences")
    prefs = GlobalPrefs()
    if element is None:
        return prefs
    for name in ("disk_max_used_gb", "disk_max_used_pct", "disk_min_free_gb"):
        setattr(prefs, name, number(element, name))
    prefs.ram_max_used_busy_frac = number(element, "ram_max_used_busy_pct") / 100
    prefs.ram_max_used_idle_frac = number(element, "ram_max_used_idle_pct") / 100
    return prefs


def time_stats(element: Element | None) -> TimeStats:
    stats = TimeStats()
    if element is None:
        return stats
    for name in ("on_frac", "connected_frac", "cpu_and_network_available_frac", "active_frac", "gpu_active_frac"):
        # A client that has never been connected reports connected_frac -1: "unknown".
        value = number(element, name, 1.0)
        setattr(stats, name, value if 0 <= value <= 1 else 1.0)
    return stats


def gpu_requests(root: Element) -> list[GpuRequest]:
    """Per-GPU work requests: the coprocessor elements of ``<coprocs>``, which BOINC's client
    writes at the top of the request (cs_scheduler.cpp make_scheduler_request); a
    ``host_info/coprocs`` is read when there is none there."""
    coprocs = root.find("coprocs")
    host = root.find("host_info")
    if coprocs is None and host is not None:
        coprocs = host.find("coprocs")
    if coprocs is None:
        return []
    requests: list[GpuRequest] = []
    for child in coprocs:
        gpu_type = COPROC_TYPES.get(child.tag)
        if gpu_type is None or any(r.type == gpu_type for r in requests):
            continue
        requests.append(
            GpuRequest(
                type=gpu_type,
                count=integer(child, "count", 1),
                peak_flops=number(child, "peak_flops"),
                req_secs=number(child, "req_secs"),
                req_instances=number(child, "req_instances"),
                estimated_delay=number(child, "estimated_delay"),
                # what plan classes check (COPROC_NVIDIA::parse's names)
                gpu_ram=number(child, "totalGlobalMem"),
                driver_version=integer(child, "drvVersion"),
                compute_capability=integer(child, "major") * 100 + integer(child, "minor"),
                cuda_version=integer(child, "cudaVersion"),
            )
        )
    return requests


def reported_result(element: Element, stderrs: list[str]) -> ReportedResult:
    """A completed job (§4.4), its uploaded outputs in the nested ``<file_info>`` elements."""
    stderr = ""
    marker = text(element, "stderr_out")
    if marker.isdigit() and int(marker) < len(stderrs):
        stderr = stderrs[int(marker)]
    return ReportedResult(
        name=text(element, "name"),
        client_state=integer(element, "state"),
        exit_status=integer(element, "exit_status"),
        final_elapsed_time=number(element, "final_elapsed_time"),
        final_cpu_time=number(element, "final_cpu_time"),
        stderr_out=stderr,
        output_files=[
            ReportedFile(
                name=text(f, "name"),
                nbytes=int(number(f, "nbytes")),
                md5_cksum=text(f, "md5_cksum"),
                max_nbytes=int(number(f, "max_nbytes")),
                error_msg=text(f, "error_msg"),
            )
            for f in element.findall("file_info")
        ],
        app_version_num=integer(element, "app_version_num") or integer(element, "version_num"),
        platform=text(element, "platform"),
        plan_class=text(element, "plan_class"),
    )


def sticky_file(element: Element) -> StickyFile:
    return StickyFile(
        name=text(element, "name"), nbytes=int(number(element, "nbytes")), status=integer(element, "status", 1)
    )


def client_app_versions(element: Element | None) -> list[ClientAppVersion]:
    if element is None:
        return []
    versions = []
    for av in element.findall("app_version"):
        gpu_type, gpu_usage = "", 0.0
        coproc = av.find("coproc")
        if coproc is not None:
            gpu_type = {
                "CUDA": GpuType.NVIDIA,
                "NVIDIA": GpuType.NVIDIA,
                "ATI": GpuType.ATI,
                "intel_gpu": GpuType.INTEL,
                "apple_gpu": GpuType.APPLE,
            }.get(text(coproc, "type"), "")
            gpu_usage = number(coproc, "count") if gpu_type else 0.0
        versions.append(
            ClientAppVersion(
                app_name=text(av, "app_name"),
                version_num=integer(av, "version_num"),
                platform=text(av, "platform"),
                plan_class=text(av, "plan_class"),
                avg_ncpus=number(av, "avg_ncpus", 1.0),
                flops=number(av, "flops"),
                gpu_type=gpu_type,
                gpu_usage=gpu_usage,
            )
        )
    return versions


def other_results(element: Element | None) -> list[str] | None:
    """Names of the jobs still in progress on the host; None when the list is absent."""
    if element is None:
        return None
    return [text(r, "name") for r in element.findall("other_result") if text(r, "name")]
