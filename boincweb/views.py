from django.shortcuts import render

from boincweb import health


def home(request):
    context = {"health": health.check()}
    template = "home.html#health" if request.htmx else "home.html"
    return render(request, template, context)
