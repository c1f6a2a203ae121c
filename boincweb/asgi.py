"""The ASGI application: what the production server runs (docs/deploy.md).

gunicorn's asyncio worker (``--worker-class asgi``) reads each request whole, headers and body,
without holding a thread, and Django's ASGI handler reads the body to its end before a view
runs, in a thread of its own; so clients that send slowly cost an open connection each, never
a worker. The views stay synchronous.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")
application = get_asgi_application()
