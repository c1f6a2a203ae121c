"""/project/worlds/: start, pause and watch volunteer worlds (DESIGN.md URL contracts).

Anyone may watch; only staff may start, pause or resume a world, since a running world writes
hosts, workunits and results into the project's own database.
"""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from world import jobs
from world.forms import WorldForm
from world.models import World


def world_list(request, form=None):
    worlds = World.objects.defer("state")[:50]
    context = {"worlds": worlds, "form": form or WorldForm(initial={"hosts": 200, "days": 3})}
    if request.htmx:
        return render(request, "world/world_list.html#panel", context)
    return render(request, "world/world_list.html", context)


def _require_staff(user):
    if not user.is_staff:
        raise PermissionDenied("starting and pausing worlds is for staff")


@login_required
@require_POST
def world_create(request):
    _require_staff(request.user)
    form = WorldForm(request.POST)
    if not form.is_valid():
        response = world_list(request, form)
        response.status_code = 400
        return response
    world = form.save()
    jobs.start(world.pk)
    return redirect("worlds:list")


@login_required
@require_POST
def world_action(request, pk, action):
    _require_staff(request.user)
    world = get_object_or_404(World.objects.defer("state"), pk=pk)
    if action == "pause":
        jobs.pause(world.pk)
    elif action in ("start", "resume"):
        jobs.start(world.pk)
    else:
        return HttpResponseBadRequest(f"unknown action {action!r}; use start or pause")
    return redirect("worlds:list")
