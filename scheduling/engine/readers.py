"""Scenario readers: the P(C, D, R) notation, BOINC's client_state.xml, and our JSON format.

- `read_pcdr(text)`: reference/debt-era.md §8 (seed 001's notation; times in hours).
- `read_client_state(directory)`: client_state.xml with optional global_prefs.xml,
  global_prefs_override.xml and cc_config.xml beside it, read as BOINC's emulator reads them
  (reference/client.md §2), plus our extensions `<scheduler_url>`, `<downtime>`,
  `<checkpoint_period>` and `<resume_cost>`.
- `read_json(text)` / `scenario_to_dict(scenario)`: our own format, the dataclasses of
  `scenario.py` as nested objects; it may list initial jobs one by one.
- `load_scenario(path)`: picks the reader by the path (`*.txt`, a directory or `*.xml`,
  `*.json`).

Every reader raises `ScenarioError` naming the line, element or key that is wrong, and
every scenario it returns meets the limits of scenario.py. Input is bounded before it is
parsed: at most `MAX_TEXT` characters of P(C, D, R) text, `MAX_FILE_BYTES` of JSON or XML,
and JSON nested at most `MAX_JSON_DEPTH` deep, so no input reaches a recursion limit.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import reprlib

from . import xml_fields
from .scenario import (
    MAX_BUFFER_DAYS,
    MAX_CPUS,
    MAX_PROJECTS,
    MAX_SCENARIO_NAME,
    MAX_SCHEDULING_PERIOD_MINUTES,
    MAX_SHARE,
    MAX_TIME,
    MIN_JOB_SECONDS,
    MIN_SCHEDULING_PERIOD_MINUTES,
    App,
    AppVersion,
    Availability,
    GpuType,
    Host,
    InitialJob,
    Prefs,
    Project,
    Scenario,
    ScenarioError,
    SchedulerUrl,
    check_number,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    # imported when a client_state.xml is read (_parse_xml), not by every run of the engine
    import xml.etree.ElementTree as ET

HOUR = 3600.0
PCDR_CPU_FLOPS = 1e9
MAX_TEXT = 100_000  # characters of P(C, D, R) text: 40 projects and comments fit many times over
MAX_FILE_BYTES = 5 * 1024 * 1024  # a JSON scenario or a client_state.xml and its prefs files
MAX_JSON_DEPTH = 16  # our format nests 7 deep (scenario, projects, apps, versions)

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlong = 40
_brief = _repr.repr  # a value quoted in a message, shortened: the input may be megabytes

# --------------------------------------------------------------------------- P(C, D, R)

_PROJECT_RE = re.compile(r"([A-Za-z_][\w.-]*)\s*\(\s*([^()]*?)\s*\)")
_PARAM_RE = re.compile(r"([A-Za-z_]\w*)\s*=\s*([^\s=]+)")
_PCDR_PARAMS = {
    "ncpus": "NCPUS",
    "min_queue": "hours",
    "leave_in_memory": "bool",
    "cpu_scheduling_period": "hours",
    "checkpoint_period": "hours",
    "resume_cost": "hours",
    "work_buf_additional": "hours",
}


def _finite(text: str, what: str) -> float:
    """`text` as a finite number; a ScenarioError that starts with `what` otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{what} is not a number: {_brief(text)}") from None
    if not math.isfinite(value):
        raise ScenarioError(f"{what} is not finite: {_brief(text)}")
    return value


def _pcdr_number(text: str, line_no: int, what: str) -> float:
    return _finite(text, f"line {line_no}: {what}")


def _pcdr_bool(text: str, line_no: int, name: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ScenarioError(f"line {line_no}: {name} must be true or false, got {text!r}")


def read_pcdr(text: str, *, name: str = "pcdr") -> Scenario:
    """Read seed 001's notation (reference/debt-era.md §8).

    `P(C, D, R)`: tasks of C hours of CPU time, delay bound D hours, fractional share R.
    Parameters `NAME = VALUE`: `NCPUS` (default 1), `min_queue`, `cpu_scheduling_period`,
    `checkpoint_period`, `resume_cost`, `work_buf_additional` (hours) and `leave_in_memory`
    (true/false). Several items may share a line; `#` starts a comment. The host has CPUs
    of 1 GFLOPS that are always on; projects start with no jobs.
    """
    if len(text) > MAX_TEXT:
        raise ScenarioError(f"the text has {len(text)} characters; the limit is {MAX_TEXT}")
    projects: list[tuple[str, float, float, float, int]] = []
    params: dict[str, tuple[str, int]] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        rest = line
        for m in _PROJECT_RE.finditer(line):
            parts = [p.strip() for p in m.group(2).split(",")]
            if len(parts) != 3:
                raise ScenarioError(f"line {line_no}: {_brief(m.group(0))} needs three values P(C, D, R)")
            c = _pcdr_number(parts[0], line_no, "C")
            d = _pcdr_number(parts[1], line_no, "D")
            r = _pcdr_number(parts[2], line_no, "R")
            if c <= 0 or d <= 0 or r < 0:
                raise ScenarioError(f"line {line_no}: {_brief(m.group(0))} needs C > 0, D > 0 and R >= 0")
            where = f"line {line_no}: project {_brief(m.group(1))}"
            check_number(c, f"{where}: C", MIN_JOB_SECONDS / HOUR, MAX_TIME / HOUR, unit="hours")
            check_number(d, f"{where}: D", 0.0, MAX_TIME / HOUR, unit="hours")
            check_number(r, f"{where}: R", 0.0, MAX_SHARE)
            projects.append((m.group(1), c, d, r, line_no))
            if len(projects) > MAX_PROJECTS:
                raise ScenarioError(f"line {line_no}: more than {MAX_PROJECTS} projects; the limit is {MAX_PROJECTS}")
        rest = _PROJECT_RE.sub(" ", rest)
        for m in _PARAM_RE.finditer(rest):
            key = m.group(1).lower()
            if key not in _PCDR_PARAMS:
                raise ScenarioError(f"line {line_no}: unknown parameter {_brief(m.group(1))}")
            params[key] = (m.group(2), line_no)
        leftover = _PARAM_RE.sub(" ", rest).strip()
        if leftover:
            raise ScenarioError(f"line {line_no}: expected P(C, D, R) or NAME = VALUE, got {_brief(leftover)}")
    if not projects:
        raise ScenarioError("line 1: no project P(C, D, R) in the scenario")
    seen = set()
    for pname, _c, _d, _r, line_no in projects:
        if pname in seen:
            raise ScenarioError(f"line {line_no}: project {_brief(pname)} is listed twice")
        seen.add(pname)

    def hours(key, default, low=0.0, high=MAX_TIME / HOUR):
        if key not in params:
            return default
        value = _pcdr_number(params[key][0], params[key][1], key)
        if value < 0:
            raise ScenarioError(f"line {params[key][1]}: {key} cannot be negative")
        check_number(value, f"line {params[key][1]}: {key}", low, high, unit="hours")
        return value * HOUR

    ncpus = 1
    if "ncpus" in params:
        value, line_no = params["ncpus"]
        n = _pcdr_number(value, line_no, "NCPUS")
        if n < 1 or n != int(n):
            raise ScenarioError(f"line {line_no}: NCPUS must be a positive whole number")
        ncpus = check_number(int(n), f"line {line_no}: NCPUS", 1, MAX_CPUS, whole=True)
    leave = False
    if "leave_in_memory" in params:
        leave = _pcdr_bool(*params["leave_in_memory"], "leave_in_memory")
    period = hours(
        "cpu_scheduling_period", HOUR, MIN_SCHEDULING_PERIOD_MINUTES / 60, MAX_SCHEDULING_PERIOD_MINUTES / 60
    )
    if period <= 0:
        raise ScenarioError(f"line {params['cpu_scheduling_period'][1]}: cpu_scheduling_period must be positive")
    buffer_hours = MAX_BUFFER_DAYS * 24
    prefs = Prefs(
        work_buf_min_days=hours("min_queue", 0.1 * 86400, high=buffer_hours) / 86400,
        work_buf_additional_days=hours("work_buf_additional", 0.0, high=buffer_hours) / 86400,
        cpu_scheduling_period_minutes=period / 60,
        leave_apps_in_memory=leave,
    )
    checkpoint = hours("checkpoint_period", 0.0)
    resume = hours("resume_cost", 0.0)
    built = []
    for pname, c, d, r, line_no in projects:
        try:
            app = App(
                name=f"{pname}_app",
                versions=(AppVersion(avg_ncpus=1.0, flops=PCDR_CPU_FLOPS),),
                latency_bound=d * HOUR,
                fpops_est=c * HOUR * PCDR_CPU_FLOPS,
                checkpoint_period=checkpoint,
                resume_cost=resume,
            )
            built.append(Project(name=pname, resource_share=r, apps=(app,)))
        except ScenarioError as exc:
            raise ScenarioError(f"line {line_no}: {exc}") from None
    return Scenario(
        host=Host(ncpus=ncpus, cpu_flops=PCDR_CPU_FLOPS),
        projects=tuple(built),
        prefs=prefs,
        name=name,
        source="pcdr",
    )


# --------------------------------------------------------------------------- client_state.xml

# <no_rsc_apps> names a processor type as BOINC's rsc_index() does
_RSC_NAMES = {"CPU": "cpu", "cpu": "cpu", "NVIDIA": "NVIDIA", "ATI": "ATI", "intel_gpu": "intel_gpu"}
_COPROC_TAGS = {"coproc_cuda": "NVIDIA", "coproc_ati": "ATI", "coproc_intel_gpu": "intel_gpu"}


def _num(elem: ET.Element, tag: str, default, where: str) -> float:
    try:
        value = xml_fields.number(elem, tag)
    except xml_fields.FieldError as exc:
        raise ScenarioError(f"{where}: <{tag}> is {exc.problem}: {_brief(exc.text)}") from None
    if value is None:
        if default is None:
            raise ScenarioError(f"{where}: missing <{tag}>")
        return default
    return value


def _flag(elem: ET.Element, tag: str, default: bool) -> bool:
    """BOINC booleans: `<tag/>` or `<tag>1</tag>` is true, `<tag>0</tag>` or `false` false."""
    return xml_fields.flag(elem, tag, default, false=("0", "false"))


def _availability(elem: ET.Element | None, where: str, frac_tag="frac", lambda_tag="lambda") -> Availability:
    if elem is None:
        return Availability()
    try:
        return Availability(_num(elem, frac_tag, 1.0, where), _num(elem, lambda_tag, 3600.0, where))
    except ScenarioError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _parse_xml(path: str) -> ET.Element:
    from xml.etree.ElementTree import ParseError

    from defusedxml import ElementTree as SafeET
    from defusedxml.common import DefusedXmlException

    name = os.path.basename(path)
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ScenarioError(f"{name}: {size} bytes; the limit is {MAX_FILE_BYTES}")
        return SafeET.parse(path).getroot()
    except ParseError as exc:
        raise ScenarioError(f"{name}: malformed XML: {exc}") from None
    except DefusedXmlException as exc:
        raise ScenarioError(f"{name}: forbidden XML construct: {exc}") from None
    except (ValueError, LookupError) as exc:  # e.g. an encoding Python does not know
        raise ScenarioError(f"{name}: cannot be read as XML: {_brief(str(exc))}") from None
    except OSError as exc:
        raise ScenarioError(f"{name}: cannot read: {exc.strerror or exc}") from None


def _read_prefs(directory: str, options: dict) -> None:
    for fname in ("global_prefs.xml", "global_prefs_override.xml"):
        path = os.path.join(directory, fname)
        if not os.path.exists(path):
            continue
        root = _parse_xml(path)
        where = f"{fname} <{root.tag}>"
        for tag in (
            "work_buf_min_days",
            "work_buf_additional_days",
            "cpu_scheduling_period_minutes",
            "max_ncpus_pct",
            "cpu_usage_limit",
        ):
            if root.find(tag) is not None:
                options[tag] = _num(root, tag, None, where)
        if root.find("leave_apps_in_memory") is not None:
            options["leave_apps_in_memory"] = _flag(root, "leave_apps_in_memory", False)
    path = os.path.join(directory, "cc_config.xml")
    if os.path.exists(path):
        root = _parse_xml(path)
        opts = root.find("options")
        if opts is None:
            opts = root
        where = "cc_config.xml <options>"
        if opts.find("rec_half_life_days") is not None:
            days = _num(opts, "rec_half_life_days", None, where)
            options["rec_half_life_days"] = days if days > 0 else 10.0
        if opts.find("ncpus") is not None:
            n = int(_num(opts, "ncpus", None, where))
            if n > 0:
                options["ncpus"] = n
        for tag in ("report_results_immediately", "fetch_minimal_work"):
            if opts.find(tag) is not None:
                options[tag] = _flag(opts, tag, False)


def _read_host(root: ET.Element) -> dict:
    host = root.find("host_info")
    if host is None:
        raise ScenarioError("client_state.xml: missing <host_info>")
    where = "client_state.xml <host_info>"
    ncpus = _num(host, "p_ncpus", None, where)
    if ncpus < 1 or ncpus != int(ncpus):
        raise ScenarioError(f"{where}: <p_ncpus> must be a positive whole number")
    gpus = []
    coprocs = host.find("coprocs")
    if coprocs is not None:
        for i, c in enumerate(coprocs, start=1):
            cwhere = f"{where} <coprocs> <{c.tag}> #{i}"
            if c.tag in _COPROC_TAGS:
                name = _COPROC_TAGS[c.tag]
            elif c.tag == "coproc":
                coproc_type = xml_fields.text(c, "type")
                if not coproc_type:
                    raise ScenarioError(f"{cwhere}: missing <type>")
                name = coproc_type
            else:
                raise ScenarioError(f"{cwhere}: unknown coprocessor element")
            count = _num(c, "count", None, cwhere)
            if count < 1 or count != int(count):
                raise ScenarioError(f"{cwhere}: <count> must be a positive whole number")
            try:
                gpus.append(GpuType(name, int(count), _num(c, "peak_flops", None, cwhere)))
            except ScenarioError as exc:
                raise ScenarioError(f"{cwhere}: {exc}") from None
    ts = root.find("time_stats")
    fields = {}
    if ts is not None:
        twhere = "client_state.xml <time_stats>"
        for key in ("on", "connected", "active", "gpu_active"):
            fields[key] = _availability(ts, twhere, f"{key}_frac", f"{key}_lambda")
    try:
        return dict(ncpus=int(ncpus), cpu_flops=_num(host, "p_fpops", None, where), gpus=tuple(gpus), **fields)
    except ScenarioError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


class _ProjectDraft:
    def __init__(self, elem: ET.Element, index: int):
        self.where = f"client_state.xml <project> #{index}"
        name = xml_fields.text(elem, "project_name") or xml_fields.text(elem, "master_url")
        if not name:
            raise ScenarioError(f"{self.where}: missing <project_name> and <master_url>")
        self.name = name
        self.where += f" ({self.name})"
        self.master_url = xml_fields.text(elem, "master_url") or ""
        self.share = _num(elem, "resource_share", 100.0, self.where)
        self.available = _availability(elem.find("available"), f"{self.where} <available>")
        # only an element at fraction 1 says more than the fraction does (scenario.Project)
        self.available_stated = elem.find("available") is not None and self.available.frac >= 1.0
        urls = []
        for i, u in enumerate(elem.findall("scheduler_url"), start=1):
            url = (u.text or "").strip() or xml_fields.text(u, "url")
            if not url:
                raise ScenarioError(f"{self.where} <scheduler_url> #{i}: empty URL")
            urls.append(SchedulerUrl(url, _availability(u.find("available"), f"{self.where} <scheduler_url> #{i}")))
        self.urls = tuple(urls)
        downtime = []
        for i, d in enumerate(elem.findall("downtime"), start=1):
            dwhere = f"{self.where} <downtime> #{i}"
            start, end = _num(d, "start", None, dwhere), _num(d, "end", None, dwhere)
            if end <= start:
                raise ScenarioError(f"{dwhere}: <end> must be after <start>")
            downtime.append((start, end))
        self.downtime = tuple(downtime)
        self.no_rsc_apps = tuple(
            _RSC_NAMES.get(n, n) for n in ((e.text or "").strip() for e in elem.findall("no_rsc_apps")) if n
        )
        self.apps: list[ET.Element] = []
        self.versions: list[ET.Element] = []
        self.workunits: list[ET.Element] = []
        self.results: list[ET.Element] = []


def _build_project(d: _ProjectDraft) -> Project | None:
    wus = {}
    for i, wu in enumerate(d.workunits, start=1):
        where = f"{d.where} <workunit> #{i}"
        name = xml_fields.text(wu, "name")
        if not name:
            raise ScenarioError(f"{where}: missing <name>")
        wus[name] = (xml_fields.text(wu, "app_name"), _num(wu, "rsc_fpops_est", None, f"{where} ({name})"))
    results = []
    for i, r in enumerate(d.results, start=1):
        where = f"{d.where} <result> #{i}"
        name = xml_fields.text(r, "name")
        if not name:
            raise ScenarioError(f"{where}: missing <name>")
        where += f" ({name})"
        wu_name = xml_fields.text(r, "wu_name")
        if wu_name not in wus:
            raise ScenarioError(f"{where}: <wu_name> {wu_name!r} names no <workunit> of this project")
        received = _num(r, "received_time", 0.0, where)
        deadline = _num(r, "report_deadline", None, where)
        if deadline <= received:
            raise ScenarioError(f"{where}: <report_deadline> is not after <received_time>")
        plan_class = xml_fields.text(r, "plan_class") or ""
        results.append((name, wus[wu_name], received, deadline, plan_class, where))

    versions: dict[str, list[AppVersion]] = {}
    for i, v in enumerate(d.versions, start=1):
        where = f"{d.where} <app_version> #{i}"
        app_name = xml_fields.text(v, "app_name")
        if not app_name:
            raise ScenarioError(f"{where}: missing <app_name>")
        where += f" ({app_name})"
        gpu_type, gpu_usage = None, 0.0
        coproc = v.find("coproc")
        if coproc is not None:
            gpu_type = xml_fields.text(coproc, "type")
            if not gpu_type:
                raise ScenarioError(f"{where} <coproc>: missing <type>")
            gpu_usage = _num(coproc, "count", None, f"{where} <coproc>")
        try:
            versions.setdefault(app_name, []).append(
                AppVersion(
                    avg_ncpus=_num(v, "avg_ncpus", None, where),
                    flops=_num(v, "flops", None, where),
                    gpu_type=gpu_type,
                    gpu_usage=gpu_usage,
                    plan_class=xml_fields.text(v, "plan_class") or "",
                )
            )
        except ScenarioError as exc:
            raise ScenarioError(f"{where}: {exc}") from None

    apps = []
    for i, a in enumerate(d.apps, start=1):
        where = f"{d.where} <app> #{i}"
        name = xml_fields.text(a, "name")
        if not name:
            raise ScenarioError(f"{where}: missing <name>")
        where += f" ({name})"
        if name not in versions:
            continue  # no usable version: BOINC's emulator ignores the app (§2)
        # defaults from an existing workunit / result (get_app_params, §2)
        est_default, latency_default = 3600e11, 864000.0
        for rname, (wu_app, wu_est), received, deadline, _pc, _w in results:
            if wu_app == name:
                est_default, latency_default = wu_est, deadline - received
                break
        fpops = a.find("fpops")
        mean, std = None, 0.0
        if fpops is not None:
            if fpops.find("stdev") is not None:
                raise ScenarioError(f"{where} <fpops>: the tag is <std_dev>, not <stdev>")
            mean = _num(fpops, "mean", None, f"{where} <fpops>")
            std = _num(fpops, "std_dev", 0.0, f"{where} <fpops>")
        try:
            apps.append(
                App(
                    name=name,
                    versions=tuple(versions[name]),
                    latency_bound=_num(a, "latency_bound", latency_default, where),
                    fpops_est=_num(a, "fpops_est", est_default, where),
                    fpops_mean=mean,
                    fpops_std_dev=std,
                    weight=_num(a, "weight", 1.0, where),
                    checkpoint_period=_num(a, "checkpoint_period", 0.0, where),
                    resume_cost=_num(a, "resume_cost", 0.0, where),
                    max_concurrent=int(_num(a, "max_concurrent", 0, where)),
                )
            )
        except ScenarioError as exc:
            raise ScenarioError(f"{where}: {exc}") from None
    if not apps:
        return None  # cull_projects (§2)
    app_names = {a.name for a in apps}
    jobs = []
    for name, (wu_app, wu_est), received, deadline, plan_class, where in results:
        if wu_app not in app_names:
            continue
        app = next(a for a in apps if a.name == wu_app)
        resource = next((v.resource for v in app.versions if v.plan_class == plan_class), None)
        # re-based to the start of the run; the job's real size is its estimate (§2)
        jobs.append(
            InitialJob(
                name=name,
                app=wu_app,
                fpops=wu_est,
                fpops_est=wu_est,
                received=0.0,
                deadline=deadline - received,
                resource=resource,
            )
        )
    return Project(
        name=d.name,
        resource_share=d.share,
        apps=tuple(apps),
        available=d.available,
        master_url=d.master_url,
        scheduler_urls=d.urls,
        downtime=d.downtime,
        jobs=tuple(jobs),
        no_rsc_apps=d.no_rsc_apps,
        available_stated=d.available_stated,
    )


def project_dir(master_url: str) -> str:
    """PROJECT::project_dir (client/project.cpp, lib/url.cpp's escape_project_url): the
    project's folder, projects/ and its master URL without the scheme, with every character
    but letters, digits, '.', '-' and '_' written '_', less one trailing '_'."""
    rest = master_url.split("://", 1)[1] if "://" in master_url else master_url
    escaped = "".join(c if (c.isascii() and c.isalnum()) or c in ".-_" else "_" for c in rest)
    if escaped.endswith("_"):
        escaped = escaped[:-1]
    return os.path.join("projects", escaped)


def read_app_config(directory: str, project: Project) -> Project:
    """The project with its app_config.xml put into effect, as check_app_config and
    APP_CONFIGS::config_app_versions (client/app_config.cpp) do; the project as it is when
    it has none (`project_dir(master_url)/app_config.xml` beside client_state.xml).

    - `<app>`: the named app's max_concurrent becomes the element's (0 when it has none);
      the smallest non-zero max_concurrent of all `<app>` elements, named apps or not, is
      the project's `app_config_min_mc` (APP_CONFIGS::parse's project_min_mc);
      `<gpu_versions>` with both `<gpu_usage>` and `<cpu_usage>` sets those of the app's GPU
      versions. An app the project does not have is passed over, as BOINC warns and goes on.
    - `<app_version>` (`<app_name>`, `<plan_class>`): a non-zero `<avg_ncpus>` or `<ngpus>`
      sets that usage of the app's versions of that plan class (ngpus only of GPU versions),
      after the `<app>` elements.
    - `<project_max_concurrent>` above 0, and `<report_results_immediately>` set, are refused
      (ScenarioError): the engine has no project-wide limit nor per-project reporting.
    Other elements are passed over, as BOINC notes them and goes on."""
    if not project.master_url:
        return project
    relative = os.path.join(project_dir(project.master_url), "app_config.xml")
    path = os.path.join(directory, relative)
    if not os.path.isfile(path):
        return project
    root = _parse_xml(path)
    where = f"{relative} ({project.name})"
    if root.tag != "app_config":
        raise ScenarioError(f"{where}: root element is <{root.tag}>, expected <app_config>")
    apps = {a.name: a for a in project.apps}
    min_mc = 0
    try:
        for elem in root:
            if elem.tag == "app":
                name = xml_fields.text(elem, "name")
                mc = _num(elem, "max_concurrent", 0.0, f"{where} <app> {name}")
                if mc < 0 or mc != int(mc):
                    raise ScenarioError(f"{where} <app> {name}: <max_concurrent> must be a whole number, 0 or more")
                if mc:
                    min_mc = min(min_mc, int(mc)) if min_mc else int(mc)
                if name not in apps:
                    continue
                app = dataclasses.replace(apps[name], max_concurrent=int(mc))
                gpu = elem.find("gpu_versions")
                if gpu is not None:
                    gwhere = f"{where} <app> {name} <gpu_versions>"
                    gpu_usage, cpu_usage = _num(gpu, "gpu_usage", 0.0, gwhere), _num(gpu, "cpu_usage", 0.0, gwhere)
                    if gpu_usage < 0 or cpu_usage < 0:
                        raise ScenarioError(f"{gwhere}: <gpu_usage> and <cpu_usage> must not be negative")
                    if gpu_usage and cpu_usage:
                        versions = tuple(
                            dataclasses.replace(v, gpu_usage=gpu_usage, avg_ncpus=cpu_usage) if v.gpu_type else v
                            for v in app.versions
                        )
                        app = dataclasses.replace(app, versions=versions)
                apps[name] = app
            elif elem.tag == "project_max_concurrent":
                if _num(root, "project_max_concurrent", 0.0, where) > 0:
                    raise ScenarioError(
                        f"{where}: <project_max_concurrent> is not modelled: the engine limits apps, not projects"
                    )
            elif elem.tag == "report_results_immediately":
                if _flag(root, "report_results_immediately", False):
                    raise ScenarioError(
                        f"{where}: <report_results_immediately> is not modelled per project (cc_config.xml has it)"
                    )
        for elem in root.findall("app_version"):
            name = xml_fields.text(elem, "app_name")
            if name not in apps:
                continue
            vwhere = f"{where} <app_version> {name}"
            plan_class = xml_fields.text(elem, "plan_class") or ""
            avg_ncpus, ngpus = _num(elem, "avg_ncpus", 0.0, vwhere), _num(elem, "ngpus", 0.0, vwhere)
            if avg_ncpus < 0 or ngpus < 0:
                raise ScenarioError(f"{vwhere}: <avg_ncpus> and <ngpus> must not be negative")
            changed = []
            for v in apps[name].versions:
                if v.plan_class == plan_class:
                    if avg_ncpus:
                        v = dataclasses.replace(v, avg_ncpus=avg_ncpus)
                    if ngpus and v.gpu_type:
                        v = dataclasses.replace(v, gpu_usage=ngpus)
                changed.append(v)
            apps[name] = dataclasses.replace(apps[name], versions=tuple(changed))
        return dataclasses.replace(
            project, apps=tuple(apps[a.name] for a in project.apps), app_config=True, app_config_min_mc=min_mc
        )
    except ScenarioError as exc:
        message = str(exc)
        raise ScenarioError(message if message.startswith(where) else f"{where}: {message}") from None


def read_client_state(path: str) -> Scenario:
    """Read a directory holding client_state.xml (or the file itself) as reference/client.md §2."""
    directory = path if os.path.isdir(path) else os.path.dirname(path) or "."
    state_file = os.path.join(path, "client_state.xml") if os.path.isdir(path) else path
    if not os.path.exists(state_file):
        raise ScenarioError(f"{path}: no client_state.xml")
    root = _parse_xml(state_file)
    if root.tag != "client_state":
        raise ScenarioError(f"client_state.xml: root element is <{root.tag}>, expected <client_state>")
    host_fields = _read_host(root)
    drafts: list[_ProjectDraft] = []
    for elem in root:
        if elem.tag == "project":
            drafts.append(_ProjectDraft(elem, len(drafts) + 1))
        elif elem.tag in ("app", "app_version", "workunit", "result"):
            if not drafts:
                raise ScenarioError(f"client_state.xml: <{elem.tag}> before any <project>")
            getattr(
                drafts[-1],
                {"app": "apps", "app_version": "versions", "workunit": "workunits", "result": "results"}[elem.tag],
            ).append(elem)
    projects = tuple(read_app_config(directory, p) for p in (_build_project(d) for d in drafts) if p is not None)
    options: dict = {}
    _read_prefs(directory, options)
    try:
        prefs = Prefs(**options)
        host = Host(**host_fields)
        return Scenario(
            host=host,
            projects=projects,
            prefs=prefs,
            name=(os.path.basename(os.path.normpath(directory)) or "client_state")[:MAX_SCENARIO_NAME],
            source="client_state",
        )
    except ScenarioError as exc:
        raise ScenarioError(f"client_state.xml: {exc}") from None


# --------------------------------------------------------------------------- JSON

_NESTED = {
    (Scenario, "host"): Host,
    (Scenario, "prefs"): Prefs,
    (Scenario, "projects"): [Project],
    (Host, "gpus"): [GpuType],
    (Host, "on"): Availability,
    (Host, "connected"): Availability,
    (Host, "active"): Availability,
    (Host, "gpu_active"): Availability,
    (Project, "apps"): [App],
    (Project, "available"): Availability,
    (Project, "scheduler_urls"): [SchedulerUrl],
    (Project, "jobs"): [InitialJob],
    (App, "versions"): [AppVersion],
    (SchedulerUrl, "available"): Availability,
}


# the scalar types a field's annotation names (the annotations are text: `from __future__
# import annotations`), read without `typing`, whose import and evaluation of each annotation
# were about a tenth of `python -m scheduling.engine`'s start-up on a JSON scenario (issue 33)
_SCALARS: dict[str, object] = {"bool": bool, "float": float, "int": int, "str": str, "None": type(None)}


def _split_top(text: str) -> list[str]:
    """`text` split at its commas outside brackets, each part stripped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _hint(annotation: str) -> tuple[bool, list]:
    """(whether a tuple, what it allows) for a field's annotation text: for `tuple[...]` its
    items' types (`...` as Ellipsis, a nested tuple as its text), otherwise the types of the
    union; a name that is not a scalar stays text."""
    text = annotation.strip()
    if text.startswith("tuple[") and text.endswith("]"):
        items: list[object] = [... if a == "..." else _SCALARS.get(a, a) for a in _split_top(text[len("tuple[") : -1])]
        return True, items
    return False, [_SCALARS.get(a.strip(), a.strip()) for a in text.split("|")]


def _check_scalar(value, hint: tuple[bool, list], where):
    is_tuple, args = hint
    if is_tuple:
        if isinstance(value, list) and len(args) == 2 and args[1] is ... and args[0] in (str, float, int):
            # a list of one scalar type: the names of no_rsc_apps
            return tuple(_check_scalar(item, (False, [args[0]]), f"{where}[{i}]") for i, item in enumerate(value))
        # downtime windows: a list of [start, end] pairs
        if isinstance(value, list) and all(
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pair)
            for pair in value
        ):
            return tuple((_json_float(a, where), _json_float(b, where)) for a, b in value)
        raise ScenarioError(f"{where}: unexpected value {_brief(value)}")
    if value is None:
        if type(None) in args:
            return None
        raise ScenarioError(f"{where}: null is not allowed")
    if bool in args:
        if isinstance(value, bool):
            return value
    if float in args and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = _json_float(value, where)
        if not math.isfinite(value):
            raise ScenarioError(f"{where}: {value!r} is not finite")
        return value
    if int in args and isinstance(value, int) and not isinstance(value, bool):
        return value
    if str in args and isinstance(value, str):
        return value
    raise ScenarioError(f"{where}: unexpected value {_brief(value)}")


def _json_float(value, where) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ScenarioError(f"{where}: a number too large to be a float") from None


def _build(cls, data, where):
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected an object, got {type(data).__name__}")
    hints = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    names = set(hints)
    unknown = sorted(set(data) - names)
    if unknown:
        raise ScenarioError(f"{where}: unknown key {_brief(unknown[0])}")
    kwargs = {}
    for key, value in data.items():
        sub = f"{where}.{key}"
        nested = _NESTED.get((cls, key))
        if isinstance(nested, list):
            if not isinstance(value, list):
                raise ScenarioError(f"{sub}: expected a list")
            kwargs[key] = tuple(_build(nested[0], item, f"{sub}[{i}]") for i, item in enumerate(value))
        elif nested is not None:
            kwargs[key] = _build(nested, value, sub)
        else:
            kwargs[key] = _check_scalar(value, _hint(hints[key]), sub)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    except ScenarioError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth_ok(text: str) -> bool:
    """Whether no array or object in `text` lies more than MAX_JSON_DEPTH deep, judged
    without parsing (strings blanked out first), so deep input never reaches the parser's
    recursion."""
    depth = 0
    for m in _JSON_BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if m.group() in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return False
        else:
            depth -= 1
    return True


def read_json(text: str) -> Scenario:
    """Read our JSON format: the dataclasses of scenario.py as nested objects."""
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(f"the JSON has {len(text)} characters; the limit is {MAX_FILE_BYTES}")
    if not _json_depth_ok(text):
        raise ScenarioError(
            f"the JSON is nested more than {MAX_JSON_DEPTH} levels deep; a scenario needs no more than 7"
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"line {exc.lineno}: malformed JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more digits than Python converts
        raise ScenarioError(f"malformed JSON: {_brief(str(exc))}") from None
    scenario = _build(Scenario, data, "scenario")
    return dataclasses.replace(scenario, source="json")


def scenario_to_dict(scenario: Scenario) -> dict:
    """The JSON form of a scenario; `read_json(json.dumps(scenario_to_dict(s)))` gives `s` back."""
    data = dataclasses.asdict(scenario)
    data.pop("source", None)
    for project in data["projects"]:
        for key in ("available_stated", "app_config", "app_config_min_mc"):
            if not project[key]:
                del project[key]  # the default: the JSON of scenarios without them is unchanged
    return data


# --------------------------------------------------------------------------- dispatch


def load_scenario(path: str) -> Scenario:
    """Read the scenario at `path`: `*.txt` P(C, D, R), a directory or `*.xml` client_state, `*.json`."""
    if os.path.isdir(path) or path.endswith(".xml"):
        return read_client_state(path)
    if not os.path.exists(path):
        raise ScenarioError(f"{path}: no such file")
    name = os.path.splitext(os.path.basename(path))[0][:MAX_SCENARIO_NAME]
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise ScenarioError(f"{path}: {os.path.getsize(path)} bytes; the limit is {MAX_FILE_BYTES}")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read: {exc}") from None
    if path.endswith(".txt"):
        return read_pcdr(text, name=name)
    if path.endswith(".json"):
        scenario = read_json(text)
        return scenario if scenario.name != "scenario" else dataclasses.replace(scenario, name=name)
    raise ScenarioError(f"{path}: unknown scenario type (expected .txt, .json, .xml or a directory)")
