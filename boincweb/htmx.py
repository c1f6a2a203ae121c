"""How every page answers htmx: the whole template, or the partial a page's hx-get polls for,
and the answer that tells htmx to stop polling."""

from django.shortcuts import render
from django.template.loader import render_to_string
from django_htmx.http import HttpResponseStopPolling


def render_page(request, template, context, partial, *, status=200, polling_done=False):
    """``template`` whole, or for an htmx request its ``{% partialdef partial %}`` alone
    ("template#partial"). A polled partial with nothing more to wait for (``polling_done``)
    answers 286, HttpResponseStopPolling, so htmx swaps it in and stops polling."""
    if not request.htmx:
        return render(request, template, context, status=status)
    name = f"{template}#{partial}"
    if polling_done:
        return HttpResponseStopPolling(render_to_string(name, context, request))
    return render(request, name, context, status=status)
