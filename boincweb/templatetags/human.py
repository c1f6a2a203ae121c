"""Template filters over boincweb/human.py: the human form shown, the raw value on hover.

{% load human %}
{{ result.granted_credit|num }}  {{ file.size|bytes }}  {{ r.elapsed|duration }}
{{ event.time|simtime:run_start }}
"""

from typing import Any

from django import template
from django.utils.html import format_html

from boincweb import human

register = template.Library()


def _titled(raw: Any, shown: str) -> str:
    return format_html('<span title="{}">{}</span>', raw, shown)


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@register.filter
def num(value: Any, digits: int = 3) -> Any:
    """A number with ``digits`` significant digits (its integer part whole); raw on hover."""
    number = _float(value)
    if number is None or value == "":
        return value
    return _titled(value, human.number(number, int(digits)))


@register.filter(name="bytes")
def bytes_(value: Any) -> Any:
    """Bytes in decimal SI units ("2.18 GB"); the byte count on hover."""
    number = _float(value)
    if number is None or value == "":
        return value
    return _titled(f"{int(number):,} bytes", human.data_size(number))


@register.filter
def duration(value: Any) -> Any:
    """Seconds as "3 h 20 min"; the seconds on hover."""
    number = _float(value)
    if number is None or value == "":
        return value
    return _titled(f"{human.number(number, 6)} s", human.duration(number))


@register.filter
def simtime(value: Any, start: Any = 0) -> Any:
    """A simulated clock: seconds (less ``start``) as "day 1, 13:08"; the seconds on hover."""
    number, origin = _float(value), _float(start) or 0.0
    if number is None or value == "":
        return value
    return _titled(f"{human.number(number - origin, 9)} s", human.sim_time(number - origin))
