"""Reading settings from the environment, loudly.

Each helper returns the parsed value or raises ``ImproperlyConfigured`` naming the variable
and what was wrong with it, so a bad value stops start-up with a message instead of a
traceback deep inside a request.
"""

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envstr(name, default=None, environ=None):
    environ = os.environ if environ is None else environ
    value = environ.get(name)
    return default if value is None else value


def envbool(name, default, environ=None):
    raw = envstr(name, None, environ)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off.")


def envint(name, default, *, minimum=None, environ=None):
    raw = envstr(name, None, environ)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}.")
    return value


def envlist(name, default, environ=None):
    raw = envstr(name, None, environ)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def envpair(name, environ=None):
    """Two comma-separated values as a tuple (``SECURE_PROXY_SSL_HEADER``), or None when unset."""
    raw = envstr(name, None, environ)
    if raw is None or not raw.strip():
        return None
    parts = [part.strip() for part in raw.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not two comma-separated values such as HTTP_X_FORWARDED_PROTO,https."
        )
    return tuple(parts)


def envhosts(name, default, environ=None):
    """A host list such as ``ALLOWED_HOSTS``: bare host names or addresses, ``.domain``
    wildcards or ``*``; a scheme, port, path or an empty list is refused by name."""
    hosts = envlist(name, default, environ)
    if not hosts:
        raise ImproperlyConfigured(f"{name} is empty; list at least one host name.")
    for host in hosts:
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if host != "*" and (
            not bare or any(c in bare for c in "/@ ?#") or (":" in bare and host == bare and bare.count(":") == 1)
        ):
            raise ImproperlyConfigured(
                f"{name} entry {host!r} is not a host name; give names such as example.org "
                "or .example.org, without a scheme, port or path."
            )
    return hosts


def database_config(url, base_dir):
    """``DATABASES['default']`` from ``DATABASE_URL``; a SQLite file under var/ when unset."""
    import dj_database_url

    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(base_dir / "var" / "boincweb.sqlite3"),
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    try:
        config = dj_database_url.parse(url, conn_max_age=60)
    except Exception as exc:  # dj_database_url raises several types for bad URLs
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} is not a database URL: {exc}") from None
    engine = config.get("ENGINE", "")
    if engine not in ("django.db.backends.sqlite3", "django.db.backends.postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} names an unsupported database; use postgres:// or sqlite://.")
    if engine == "django.db.backends.sqlite3":
        config["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    return config


def redis_url(url, base_dir):
    """The Redis URL from ``REDIS_URL``; the embedded server's socket under var/ when unset."""
    if not url:
        return f"unix://{embedded_redis_socket(base_dir)}"
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(f"REDIS_URL={url!r} is not a Redis URL; use redis://host:port/db or unix:///path.")
    return url


def embedded_redis_socket(base_dir, environ=None):
    """Where the embedded Redis listens: ``EMBEDDED_REDIS_SOCKET``, else var/redis.sock."""
    return envstr("EMBEDDED_REDIS_SOCKET", str(base_dir / "var" / "redis.sock"), environ)
