from boincweb import health
from boincweb.htmx import render_page


def home(request):
    return render_page(request, "home.html", {"health": health.check()}, "health")
