"""BOINC's times as a person reads them: Unix seconds as integers, 0 meaning "not yet", INT_MAX
meaning never.

A live project runs on the wall clock, so its times are dates and times (UTC). A world's
project runs on the world's simulated clock (``Project.simulated_time``), whose Unix seconds
are a made-up calendar: its times read as the world's clock from its start, "day 1, 13:08"
(boincweb.human.sim_time), the start being the world's ``start_time``. Either way the raw
seconds stay in the tooltip, since BOINC's own tools and logs speak in them.

``{{ t|unixtime }}`` is the wall-clock form; ``{% project_time t %}`` picks the form of the
project the page is of, and ``time_text`` is the same in plain text for the CSV exports.
"""

import datetime
from typing import Any

from django import template
from django.utils.html import format_html

from backend.models import INT_MAX, Project
from backend.templatetags.project_urls import page_project
from boincweb import human

register = template.Library()

_ORIGIN = "_clock_origin"


def clock_origin(project: Project | None) -> int | None:
    """The Unix seconds at a simulated project's t = 0 (its world's ``start_time``), or None
    for a project on the wall clock. A simulated project no world names (its world deleted)
    has no known start, and its times read as dates. Read once per project row."""
    if project is None or project.simulated_time is None:
        return None
    if _ORIGIN not in project.__dict__:
        # the world app's reverse relation: the back end reads the row without importing it
        worlds = getattr(project, "worlds", None)
        start = worlds.order_by("id").values_list("start_time", flat=True).first() if worlds is not None else None
        project.__dict__[_ORIGIN] = start
    return project.__dict__[_ORIGIN]


def _seconds(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def time_text(value: Any, origin: int | None, empty: str = "") -> str:
    """``value`` (Unix seconds) as text: "2026-11-22 01:29:23" on the wall clock (UTC), "day 1,
    13:08" from ``origin`` on a simulated clock; 0 or nothing is ``empty``, INT_MAX "never"."""
    seconds = _seconds(value)
    if seconds is None:
        return empty if value in (None, "") else str(value)
    if seconds == 0:
        return empty
    if seconds >= INT_MAX:
        return "never"
    if origin is not None:
        return human.sim_time(seconds - origin)
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@register.filter
def unixtime(value: Any, empty: str = "–") -> Any:
    """``1795310963`` -> ``<time title="1795310963">2026-11-22 01:29:23</time>`` (UTC).

    0 (BOINC's "not yet") shows ``empty``; INT_MAX shows "never".
    """
    return _time_html(value, None, empty)


def _time_html(value: Any, origin: int | None, empty: str) -> Any:
    seconds = _seconds(value)
    if seconds is None:
        return empty if value in (None, "") else value
    if seconds == 0:
        return empty
    if seconds >= INT_MAX:
        return "never"
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    if origin is not None:
        return format_html(
            '<time title="{} (Unix seconds on the world\'s clock, {} s from its start)">{}</time>',
            seconds,
            seconds - origin,
            human.sim_time(seconds - origin),
        )
    return format_html(
        '<time datetime="{}" title="{} (Unix seconds)">{}</time>',
        moment.isoformat(),
        seconds,
        moment.strftime("%Y-%m-%d %H:%M:%S"),
    )


@register.simple_tag(takes_context=True)
def project_time(context: template.Context, value: Any, empty: str = "–") -> Any:
    """``value`` (Unix seconds) on the clock of the project the page is of: a date and time
    for a live project, "day 1, 13:08" for a world's; the raw seconds on hover."""
    project = page_project(context.get("request"), context.get("boinc_project"))
    return _time_html(value, clock_origin(project), empty)
