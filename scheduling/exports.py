"""Writers that turn a scenario back into the formats the engine's readers take, and a run
into CSV.

- `write_pcdr(scenario)`: seed 001's P(C, D, R) notation (reference/debt-era.md §8). The
  notation only knows CPU-only projects with one app on always-on 1 GFLOPS CPUs, so what it
  cannot say is listed in `#` comments at the top rather than silently dropped.
- `write_client_state(scenario)`: client_state.xml, global_prefs.xml and cc_config.xml as
  `readers.read_client_state` reads them (reference/client.md §2), zipped together.
- `run_csv(records)`: one CSV of a run's slices, REC / debt series, buffer series, RPCs and
  figures, each row tagged with its table.
"""

from __future__ import annotations

import csv
import io
import zipfile
from xml.sax.saxutils import escape

from scheduling.engine.readers import HOUR, PCDR_CPU_FLOPS
from scheduling.engine.scenario import Availability, Scenario

_COPROC_TAG = {"NVIDIA": "coproc_cuda", "ATI": "coproc_ati", "intel_gpu": "coproc_intel_gpu"}


def _num(x: float) -> str:
    return repr(float(x)) if x != int(x) else str(int(x))


def pcdr_losses(scenario: Scenario) -> list[str]:
    """What of `scenario` the P(C, D, R) notation cannot express."""
    host = scenario.host
    lost = []
    if host.gpus:
        lost.append("the host's GPUs")
    if host.cpu_flops != PCDR_CPU_FLOPS:
        lost.append(f"the CPU speed ({host.cpu_flops / 1e9:g} GFLOPS; the notation assumes 1)")
    for key in ("on", "connected", "active", "gpu_active"):
        if getattr(host, key) != Availability():
            lost.append(f"the host's {key} availability")
    for project in scenario.projects:
        if len(project.apps) != 1:
            lost.append(f"project {project.name}: {len(project.apps)} apps (the notation has one)")
        if any(v.resource != "cpu" for a in project.apps for v in a.versions):
            lost.append(f"project {project.name}: GPU app versions")
        if project.jobs:
            lost.append(f"project {project.name}: {len(project.jobs)} initial jobs")
        if project.available != Availability() or project.downtime or project.scheduler_urls:
            lost.append(f"project {project.name}: scheduler availability, URLs and downtime")
    return lost


def write_pcdr(scenario: Scenario) -> str:
    """The scenario in P(C, D, R) notation; C is hours of one job on this host's CPU."""
    lines = [f"# {scenario.name}"]
    lost = pcdr_losses(scenario)
    if lost:
        lines.append("# not expressible in P(C, D, R), left out:")
        lines.extend(f"#   {item}" for item in lost)
    checkpoint = resume = 0.0
    for project in scenario.projects:
        cpu_apps = [a for a in project.apps if any(v.resource == "cpu" for v in a.versions)]
        if not cpu_apps:
            continue
        app = cpu_apps[0]
        version = next(v for v in app.versions if v.resource == "cpu")
        c = app.fpops_est / version.flops / HOUR
        d = app.latency_bound / HOUR
        lines.append(f"{project.name}({c:g}, {d:g}, {project.resource_share:g})")
        checkpoint = max(checkpoint, app.checkpoint_period)
        resume = max(resume, app.resume_cost)
    prefs = scenario.prefs
    lines.append(f"NCPUS = {scenario.n_usable_cpus}")
    lines.append(f"min_queue = {prefs.work_buf_min_days * 24:g}")
    lines.append(f"work_buf_additional = {prefs.work_buf_additional_days * 24:g}")
    lines.append(f"cpu_scheduling_period = {prefs.cpu_scheduling_period_minutes / 60:g}")
    lines.append(f"leave_in_memory = {'true' if prefs.leave_apps_in_memory else 'false'}")
    if checkpoint:
        lines.append(f"checkpoint_period = {checkpoint / HOUR:g}")
    if resume:
        lines.append(f"resume_cost = {resume / HOUR:g}")
    return "\n".join(lines) + "\n"


def _tag(name: str, value) -> str:
    if isinstance(value, bool):
        return f"<{name}>{1 if value else 0}</{name}>"
    if isinstance(value, (int, float)):
        return f"<{name}>{_num(value)}</{name}>"
    return f"<{name}>{escape(str(value))}</{name}>"


def _availability_xml(tag: str, a: Availability) -> str:
    return f"<{tag}>{_tag('frac', a.frac)}{_tag('lambda', a.mean_up)}</{tag}>"


def client_state_xml(scenario: Scenario) -> str:
    host = scenario.host
    out = ["<client_state>", "<host_info>", _tag("p_ncpus", host.ncpus), _tag("p_fpops", host.cpu_flops)]
    if host.gpus:
        out.append("<coprocs>")
        for g in host.gpus:
            tag = _COPROC_TAG.get(g.name)
            body = _tag("count", g.count) + _tag("peak_flops", g.peak_flops)
            out.append(f"<{tag}>{body}</{tag}>" if tag else f"<coproc>{_tag('type', g.name)}{body}</coproc>")
        out.append("</coprocs>")
    out.append("</host_info>")
    out.append("<time_stats>")
    for key in ("on", "connected", "active", "gpu_active"):
        a = getattr(host, key)
        out.append(_tag(f"{key}_frac", a.frac) + _tag(f"{key}_lambda", a.mean_up))
    out.append("</time_stats>")
    for p in scenario.projects:
        out.append("<project>")
        if p.master_url:
            out.append(_tag("master_url", p.master_url))
        out.append(_tag("project_name", p.name))
        out.append(_tag("resource_share", p.resource_share))
        if p.available.frac < 1.0 or p.available_stated:
            # BOINC's emulator starts a project's availability process, drawing twice, for
            # every <available> element, at fraction 1 too (docs/engine-fidelity.md)
            out.append(_availability_xml("available", p.available))
        for u in p.scheduler_urls:
            out.append(
                f"<scheduler_url>{_tag('url', u.url)}{_availability_xml('available', u.available)}</scheduler_url>"
            )
        for start, end in p.downtime:
            out.append(f"<downtime>{_tag('start', start)}{_tag('end', end)}</downtime>")
        out.append("</project>")
        for a in p.apps:
            out.append(
                "<app>"
                + "".join(
                    [
                        _tag("name", a.name),
                        _tag("latency_bound", a.latency_bound),
                        _tag("fpops_est", a.fpops_est),
                        (
                            f"<fpops>{_tag('mean', a.fpops_mean)}{_tag('std_dev', a.fpops_std_dev)}</fpops>"
                            if a.fpops_mean is not None
                            else ""
                        ),
                        _tag("weight", a.weight),
                        _tag("checkpoint_period", a.checkpoint_period),
                        _tag("resume_cost", a.resume_cost),
                        _tag("max_concurrent", a.max_concurrent),
                    ]
                )
                + "</app>"
            )
            for v in a.versions:
                coproc = (
                    f"<coproc>{_tag('type', v.gpu_type)}{_tag('count', v.gpu_usage)}</coproc>" if v.gpu_type else ""
                )
                out.append(
                    "<app_version>"
                    + _tag("app_name", a.name)
                    + _tag("plan_class", v.plan_class)
                    + _tag("avg_ncpus", v.avg_ncpus)
                    + _tag("flops", v.flops)
                    + coproc
                    + "</app_version>"
                )
        for j in p.jobs:
            app = p.app(j.app)
            assert app is not None  # a project's jobs name its own apps (Project checks)
            version = next((v for v in app.versions if v.resource == (j.resource or v.resource)), app.versions[0])
            out.append(
                "<workunit>"
                + _tag("name", j.name + "_wu")
                + _tag("app_name", j.app)
                + _tag("rsc_fpops_est", j.fpops_est)
                + "</workunit>"
            )
            out.append(
                "<result>"
                + _tag("name", j.name)
                + _tag("wu_name", j.name + "_wu")
                + _tag("received_time", j.received)
                + _tag("report_deadline", j.deadline)
                + _tag("plan_class", version.plan_class)
                + "</result>"
            )
    out.append("</client_state>")
    return "\n".join(out) + "\n"


def global_prefs_xml(scenario: Scenario) -> str:
    p = scenario.prefs
    body = "".join(
        [
            _tag("work_buf_min_days", p.work_buf_min_days),
            _tag("work_buf_additional_days", p.work_buf_additional_days),
            _tag("cpu_scheduling_period_minutes", p.cpu_scheduling_period_minutes),
            _tag("max_ncpus_pct", p.max_ncpus_pct),
            _tag("cpu_usage_limit", p.cpu_usage_limit),
            _tag("leave_apps_in_memory", p.leave_apps_in_memory),
        ]
    )
    return f"<global_preferences>{body}</global_preferences>\n"


def cc_config_xml(scenario: Scenario) -> str:
    p = scenario.prefs
    body = _tag("rec_half_life_days", p.rec_half_life_days)
    if p.ncpus:
        body += _tag("ncpus", p.ncpus)
    body += _tag("report_results_immediately", p.report_results_immediately)
    body += _tag("fetch_minimal_work", p.fetch_minimal_work)
    return f"<cc_config><options>{body}</options></cc_config>\n"


def write_client_state(scenario: Scenario) -> bytes:
    """A zip of client_state.xml, global_prefs.xml and cc_config.xml."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("client_state.xml", client_state_xml(scenario))
        z.writestr("global_prefs.xml", global_prefs_xml(scenario))
        z.writestr("cc_config.xml", cc_config_xml(scenario))
    return buf.getvalue()


CSV_TABLES = ("slices", "rec", "buffers", "rpcs", "decisions", "host_periods")


def run_csv(records: dict) -> str:
    """Every table of a run, one after the other, each with its own header row.

    The first column names the table, so a spreadsheet filter on it gives one table back.
    """
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["table", "figure", "value"])
    for key, value in records["figures"].items():
        w.writerow(["figures", key, value])
    projects = records["projects"]
    if projects:
        w.writerow(["table", *projects[0].keys()])
        for p in projects:
            w.writerow(["projects", *p.values()])
    for table in CSV_TABLES:
        rows = records.get(table) or []
        if not rows:
            continue
        w.writerow(["table", *rows[0].keys()])
        for row in rows:
            w.writerow([table, *(_cell(v) for v in row.values())])
    return out.getvalue()


def _cell(value):
    if isinstance(value, dict):
        return ";".join(f"{k}={v}" for k, v in value.items())
    return value
