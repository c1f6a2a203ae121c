"""Template filters for BOINC's times: Unix seconds as integers, INT_MAX meaning never."""

import datetime
from typing import Any

from django import template
from django.utils.html import format_html

from backend.models import INT_MAX

register = template.Library()


@register.filter
def unixtime(value: Any, empty: str = "–") -> Any:
    """``1795310963`` -> ``<time title="1795310963">2026-11-22 01:29:23</time>`` (UTC).

    0 (BOINC's "not yet") shows ``empty``; INT_MAX shows "never". The raw seconds stay in the
    tooltip, since BOINC's own tools and logs speak in them.
    """
    if value in (None, ""):
        return empty
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return value
    if seconds == 0:
        return empty
    if seconds >= INT_MAX:
        return "never"
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return format_html(
        '<time datetime="{}" title="{} (Unix seconds)">{}</time>',
        moment.isoformat(),
        seconds,
        moment.strftime("%Y-%m-%d %H:%M:%S"),
    )
