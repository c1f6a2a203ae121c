"""A host's name as a page may show it: as on BOINC's web pages, a host's domain name is shown to
its owner (and the project's staff) only; anyone else sees "host <id>"."""

from typing import Any

from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def host_name(context: template.Context, host: Any) -> str:
    """``host``'s domain name for its owner and staff, ``host <id>`` for anyone else."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and (user.is_staff or user.pk == host.owner_id):
        return str(host.domain_name)
    return f"host {host.pk}"
