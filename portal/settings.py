"""Settings of the Data Challenge Portal, read from the environment only.

Every variable is listed, with its default, in `.env.example`. A `.env` file beside manage.py is read
when present; variables already set in the environment win over it.
"""

from __future__ import annotations

import ipaddress
import secrets
from datetime import timedelta
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else a random key generated once in var/secret_key (never in the repo)."""
    key = env.str("SECRET_KEY", default="")
    if key:
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "portal.apps.PortalAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",  # request.htmx, and htmx itself as a static file ({% htmx_script %})
    "axes",  # failed logins counted per user name and address; a lockout answers 429
    "csp",  # Content-Security-Policy on every response (CONTENT_SECURITY_POLICY below)
    "common",
    "sites",
    "challenges",
    "reports",
    "results",
    "runs",
    "sweeps",
    "live",
    "challenge_report",
    "ingest",
    "testbed",
    "portal.apps.PortalConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "sites.middleware.PageTokenMiddleware",  # page exports read with an API token, as the API
    "portal.db_router.ReplicaReadsMiddleware",  # GET and HEAD read from DATABASE_REPLICA_URL when set
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out login
]

ROOT_URLCONF = "portal.urls"

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
                "portal.context_processors.roles",
            ],
        },
    },
]

WSGI_APPLICATION = "portal.wsgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/portal")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A streaming replica of the primary for the reads of pages and exports (portal.db_router); unset: none.
DATABASE_REPLICA_URL = env.str("DATABASE_REPLICA_URL", default="")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = env.db("DATABASE_REPLICA_URL")
    DATABASES["replica"]["CONN_MAX_AGE"] = DATABASES["default"]["CONN_MAX_AGE"]
    DATABASES["replica"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}  # tests read the primary's test database
DATABASE_ROUTERS = ["portal.db_router.ReplicaRouter"]

REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# Everything runs in UTC.
LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env.path("STATIC_ROOT", default=str(VAR_DIR / "static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# DJANGO_ENV=production: the portal behind HTTPS, as `manage.py check --deploy` wants it (tests/test_settings.py
# checks that it passes with no warning): secure cookies, HSTS, HTTPS redirect, no sniffing, no framing.
DJANGO_ENV = env.str("DJANGO_ENV", default="development")
PRODUCTION = DJANGO_ENV == "production"
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=PRODUCTION)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=PRODUCTION)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=PRODUCTION)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=PRODUCTION)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=PRODUCTION)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (gunicorn behind nginx, a Kubernetes ingress).
if env.bool("SECURE_PROXY_SSL", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
if PRODUCTION and DEBUG:
    raise environ.ImproperlyConfigured("DJANGO_ENV=production with DEBUG=true: set DEBUG=false")

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # The token class first: anonymous calls and bad tokens then get 401 with WWW-Authenticate: Token.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "sites.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "common.pagination.BoundedLimitOffsetPagination",
    # Database and parser errors a request caused answer 4xx with the reason (409 for what is referred to).
    "EXCEPTION_HANDLER": "portal.api_errors.api_exception_handler",
    # Rate limits on token and session use (per user; per address for anonymous calls), answered with 429 and
    # Retry-After. An ingestion batch is one request: 2,400 a minute is far above what FTS/Rucio relays send.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env.str("API_THROTTLE_ANON", default="120/minute"),
        "user": env.str("API_THROTTLE_USER", default="2400/minute"),
        "token_failures": env.str("API_TOKEN_FAILURES", default="30/minute"),
        # Per site agent (runs/agents): its claims, heartbeats and results (a 40-file run is some 100 calls).
        "agent": env.str("API_THROTTLE_AGENT", default="1200/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Data Challenge Portal API",
    "DESCRIPTION": "Plans, runs and results of grid data challenges. Rates are bytes per second, times ISO 8601 UTC.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v[0-9]+",  # operations are grouped by resource (sites, endpoints, ...)
    # Endpoints' third-party modes and activities' copy modes are the same set: one name for both.
    "ENUM_NAME_OVERRIDES": {
        "TransferModeEnum": "sites.choices.TpcMode",
        # Activities and their runs share these sets: one name each.
        "ActivityKindEnum": "challenges.choices.ActivityKind",
        "RunStateEnum": "runs.choices.RunState",
        "SweepStateEnum": "sweeps.choices.SweepState",
        "SweepStepStateEnum": "sweeps.choices.StepState",
    },
    # Swagger UI's files from the sidecar package, not a CDN: the portal must work on closed networks.
    "SWAGGER_UI_DIST": "SIDECAR",
    # The API reads JSON: the schema documents JSON bodies only (DRF's form parsers stay for the browsable API, but a
    # form turns "" and null into other things than JSON does, so a client generated from the schema sends JSON).
    "PARSER_WHITELIST": ["rest_framework.parsers.JSONParser"],
    # Request bodies their own components, so that they say what a write takes that an answer need not hold: a
    # name that may not be blank has minLength 1 (DRF refuses "" for it), read-only fields are left out.
    "COMPONENT_SPLIT_REQUEST": True,
    # Every error status each operation can answer, documented (portal/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.schema.error_responses_document",
    ],
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: broker and results in Redis; late acks and prefetch 1 so a lost worker's task is redelivered.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=6 * 3600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=6 * 3600 - 60)
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis redelivers a message not acked within this many seconds: longer than any task (a file copy or a probe),
# else a long copy would run twice. Lost workers' files are found sooner by the runs' reaper (heartbeats).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=6 * 3600 + 600)}
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "heartbeat": {"task": "portal.tasks.heartbeat", "schedule": 60.0},
    "runs-reap": {"task": "runs.runs_reap", "schedule": 30.0},
    "activities-auto-run": {"task": "runs.activities_auto_run", "schedule": 30.0},
    # A sweep's next step starts when its step's run ends; this catches a lost message or a restarted worker.
    "sweeps-advance": {"task": "sweeps.sweeps_advance", "schedule": 15.0},
    # Records of hosts registered after they were ingested attach to their sites.
    "ingest-records-attach": {"task": "ingest.records_attach", "schedule": 60.0},
    # The live alerts of the running challenges, and the deliveries whose task was lost.
    "live-alerts-evaluate": {"task": "live.alerts_evaluate", "schedule": 60.0},
    # The monthly partitions of the transfer records, made months ahead (a batch makes a missing one too).
    "results-partitions-ensure": {"task": "results.partitions_ensure", "schedule": 3600.0},
}

# The registry: whether storage endpoints may use file:// (only for the local testbed), API token lifetime,
# and whether anonymous visitors may read challenge pages.
SITES_ALLOW_FILE_ENDPOINTS = env.bool("SITES_ALLOW_FILE_ENDPOINTS", default=False)
API_TOKEN_DAYS = env.int("API_TOKEN_DAYS", default=365)
ANONYMOUS_READ = env.bool("ANONYMOUS_READ", default=False)

# The largest target rate a plan may set, bytes per second (10 Tb/s by default); checked by challenges.apps.
TARGET_RATE_MAX = env.float("TARGET_RATE_MAX", default=1.25e12)

# Optional OpenID Connect login (INDIGO IAM / WLCG tokens); off unless OIDC_ENABLED.
OIDC_ENABLED = env.bool("OIDC_ENABLED", default=False)
OIDC_RP_CLIENT_ID = env.str("OIDC_RP_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("OIDC_RP_CLIENT_SECRET", default="")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_OP_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_OP_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OIDC_OP_USER_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_OP_JWKS_ENDPOINT", default="")
OIDC_RP_SIGN_ALGO = env.str("OIDC_RP_SIGN_ALGO", default="RS256")
OIDC_RP_SCOPES = env.str("OIDC_RP_SCOPES", default="openid profile email wlcg.groups")
OIDC_GROUPS_CLAIM = env.str("OIDC_GROUPS_CLAIM", default="wlcg.groups")
# For example "/atlas/coordinators=coordinator,/atlas=viewer,/atlas/ddm=ddm:ATLAS,/cern/admins=site-admin:CERN-PROD"
OIDC_GROUP_ROLES = env.str("OIDC_GROUP_ROLES", default="")
# Content Security Policy (django-csp): scripts only from the portal itself (no inline script, no handler, no eval:
# the pages' behaviour is static/portal.js, figures are JSON data it draws); styles may be inline, as Plotly and
# htmx set them on the elements they draw; nothing from other hosts, no framing, no plugins.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out user name and address before any check
    "django.contrib.auth.backends.ModelBackend",
    "sites.backends.CoordinatorPermissionBackend",
]
# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins of one user name from one address, that
# pair is locked out for AXES_COOLOFF_MINUTES (HTTP 429, "try again later"); a success resets the count.
# Counted in the database, so every web process sees the same count. API tokens have their own throttle.
AXES_ENABLED = env.bool("AXES_ENABLED", default=True)
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
if env.bool("SECURE_PROXY_SSL", default=False):  # behind the TLS proxy: its X-Forwarded-For is the address
    AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"]
if OIDC_ENABLED:
    INSTALLED_APPS.append("mozilla_django_oidc")
    AUTHENTICATION_BACKENDS.append("sites.oidc.PortalOIDCBackend")

# The FROM x TO matrix is read from the stored unions (results/store/link_intervals.py); when they are not built (a bulk
# load without link_intervals_rebuild), a challenge with more transfers than this counts active time to the minute,
# from the rollup, rather than as the exact union of the transfers' intervals (results/matrix/minutes.py).
RESULTS_MATRIX_EXACT_LIMIT = env.int("RESULTS_MATRIX_EXACT_LIMIT", default=1_000_000)
# Days after a month (and every challenge overlapping it) ended before `manage.py records_retire` may drop its raw
# records: late messages have come in and no plan change will re-attribute them (results/store/retention.py).
RECORDS_FINAL_AFTER_DAYS = env.int("RECORDS_FINAL_AFTER_DAYS", default=7)

# Ingestion of DDM messages: the largest request body of a batch, and the STOMP broker `manage.py consume` reads.
INGEST_MAX_BODY_BYTES = env.int("INGEST_MAX_BODY_BYTES", default=64 * 1024 * 1024)
INGEST_STOMP_HOST = env.str("INGEST_STOMP_HOST", default="127.0.0.1")
INGEST_STOMP_PORT = env.int("INGEST_STOMP_PORT", default=61613)
INGEST_STOMP_USER = env.str("INGEST_STOMP_USER", default="")
INGEST_STOMP_PASSWORD = env.str("INGEST_STOMP_PASSWORD", default="")
INGEST_STOMP_VHOST = env.str("INGEST_STOMP_VHOST", default="/")

# Runs: a running file whose worker sent no heartbeat for WORKER_LOST_AFTER s is "worker lost" (retried once);
# a task sent but not started after RESEND_AFTER s is sent again; workers beat every HEARTBEAT s.
# PROBES_TESTBED: probes trust the testbed CA and send its bearer token (local testbed only).
DISPATCH_WORKER_LOST_AFTER = env.int("DISPATCH_WORKER_LOST_AFTER", default=60)
DISPATCH_RESEND_AFTER = env.int("DISPATCH_RESEND_AFTER", default=300)
DISPATCH_HEARTBEAT = env.float("DISPATCH_HEARTBEAT", default=5.0)
DISPATCH_INSPECT_TIMEOUT = env.float("DISPATCH_INSPECT_TIMEOUT", default=0.5)
PROBES_TESTBED = env.bool("PROBES_TESTBED", default=False)
# Where probes get their gfal2 contexts (CA, tokens, options) and cache hooks: a dotted path to a
# measure.context.ProbeContext class. Workers never import the testbed; only this setting names it.
PROBE_CONTEXT = env.str(
    "PROBE_CONTEXT",
    default="testbed.client.TestbedProbeContext" if PROBES_TESTBED else "measure.context.ProbeContext",
)

# Where workers get their storage credentials (runs/credentials.py, docs/operator/tokens.md): "" (the host's own:
# X.509 as gfal2 finds it, or the testbed's issuer when TESTBED_TOKENS=required), "x509", "client-credentials" (the
# OAuth2 grant against TOKEN_ISSUER) or "file" (BEARER_TOKEN_FILE, kept fresh by oidc-agent or htgettoken).
TOKEN_SOURCE = env.str("TOKEN_SOURCE", default="")
TOKEN_ISSUER = env.str("TOKEN_ISSUER", default="")
TOKEN_ENDPOINT = env.str("TOKEN_ENDPOINT", default="")
TOKEN_CLIENT_ID = env.str("TOKEN_CLIENT_ID", default="")
TOKEN_CLIENT_SECRET = env.str("TOKEN_CLIENT_SECRET", default="")
TOKEN_CA_DIR = env.str("TOKEN_CA_DIR", default="")
BEARER_TOKEN_FILE = env.str("BEARER_TOKEN_FILE", default="")
if TOKEN_SOURCE not in ("", "x509", "client-credentials", "file"):
    raise environ.ImproperlyConfigured(
        f'TOKEN_SOURCE must be empty, "x509", "client-credentials" or "file", not {TOKEN_SOURCE!r}'
    )
if TOKEN_SOURCE == "client-credentials" and not (TOKEN_ISSUER and TOKEN_CLIENT_ID and TOKEN_CLIENT_SECRET):
    raise environ.ImproperlyConfigured("TOKEN_SOURCE=client-credentials needs TOKEN_ISSUER, TOKEN_CLIENT_ID, _SECRET")
if TOKEN_SOURCE == "file" and not BEARER_TOKEN_FILE:
    raise environ.ImproperlyConfigured("TOKEN_SOURCE=file needs BEARER_TOKEN_FILE")

# The local testbed (testbed/): where its state lives, the first port it tries, and the tape emulation.
TESTBED_DIR = env.path("TESTBED_DIR", default=str(VAR_DIR / "testbed"))
TESTBED_BASE_PORT = env.int("TESTBED_BASE_PORT", default=21000)
TESTBED_TAPE_DRIVES = env.int("TESTBED_TAPE_DRIVES", default=2)
TESTBED_TAPE_DRIVE_RATE = env.float("TESTBED_TAPE_DRIVE_RATE", default=200e6)
TESTBED_TAPE_MOUNT_TIME = env.float("TESTBED_TAPE_MOUNT_TIME", default=2.0)
TESTBED_TAPE_STAGE_DELAY = env.float("TESTBED_TAPE_STAGE_DELAY", default=1.0)
# What is written to the tape site's disk buffer goes to tape after this many seconds unchanged, and then leaves the
# buffer (EVICT "migrated"; "lru" keeps it until the buffer is over BUFFER_BYTES); a stage request takes at most
# MAX_REQUEST_FILES files.
TESTBED_TAPE_MIGRATION_DELAY = env.float("TESTBED_TAPE_MIGRATION_DELAY", default=5.0)
TESTBED_TAPE_EVICT = env.str("TESTBED_TAPE_EVICT", default="migrated")
TESTBED_TAPE_BUFFER_BYTES = env.int("TESTBED_TAPE_BUFFER_BYTES", default=0)
TESTBED_TAPE_MAX_REQUEST_FILES = env.int("TESTBED_TAPE_MAX_REQUEST_FILES", default=10000)
# Migrated files fill tapes of this many bytes in turn (0: a file's tape is its directory).
TESTBED_TAPE_CAPACITY = env.int("TESTBED_TAPE_CAPACITY", default=2_000_000_000)
# "required": the testbed's XRootD doors and Tape REST API check WLCG tokens signed by its own issuer (and its probe
# context asks that issuer for them); "off" (default): any bearer value works.
TESTBED_TOKENS = env.str("TESTBED_TOKENS", default="off")
if TESTBED_TOKENS not in ("off", "required"):
    raise environ.ImproperlyConfigured(f'TESTBED_TOKENS must be "off" or "required", not {TESTBED_TOKENS!r}')
# "loopback" (default): every testbed site on 127.0.0.1; "namespaces": each site in a network namespace of its own
# with its own address, MTU and link capacities (root only; `manage.py testbed up --network namespaces` says the same).
TESTBED_NETWORK = env.str("TESTBED_NETWORK", default="loopback")
if TESTBED_NETWORK not in ("loopback", "namespaces"):
    raise environ.ImproperlyConfigured(f'TESTBED_NETWORK must be "loopback" or "namespaces", not {TESTBED_NETWORK!r}')
# The namespaced testbed's private /24; empty: 10.<high byte>.<low byte>.0/24 of TESTBED_BASE_PORT.
TESTBED_NETNS_SUBNET = env.str("TESTBED_NETNS_SUBNET", default="")
# Its sites' MTUs and links' capacities where they differ from the default layout (TB-T1-B 1500, the rest 9000;
# 1 Gb/s between TB-T0 and TB-T1-A), as JSON: {"mtu": {"TB-T1-A": 1500}, "links": [["TB-T0", "TB-T1-B", 2e8]]}.
TESTBED_NETNS_LAYOUT = env.str("TESTBED_NETNS_LAYOUT", default="")

# Prometheus metrics at /metrics (portal/metrics.py): scraped with `Authorization: Bearer METRICS_TOKEN`, or from an
# address of METRICS_ALLOWED_IPS (addresses or networks, comma-separated: the scraper's address as the portal sees it,
# REMOTE_ADDR, so a proxy in front is that address). Neither set: /metrics answers 403 to everyone.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=[])
for _network in METRICS_ALLOWED_IPS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as _error:
        raise environ.ImproperlyConfigured(
            f"METRICS_ALLOWED_IPS: {_network!r} is not an address or network"
        ) from _error

# The demo account made by `manage.py load_demo`; its password is generated once into DEMO_PASSWORD_FILE.
DEMO_USERNAME = env.str("DEMO_USERNAME", default="demo")
DEMO_PASSWORD_FILE = env.path("DEMO_PASSWORD_FILE", default=str(VAR_DIR / "demo-password"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # No token reaches a log: gfal2's Davix headers (Authorization) and root:// URLs (authz) are redacted.
    "filters": {"tokens": {"()": "measure.tokens.TokenRedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["tokens"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # gfal2 logs every Davix request and response header at INFO (thousands of lines an hour in a worker): quiet
    # unless asked (GFAL2_LOG_LEVEL=INFO or DEBUG to see them).
    "loggers": {
        "gfal2": {"level": env.str("GFAL2_LOG_LEVEL", default="WARNING")},
        # WeasyPrint (the challenge report's PDF) says every step and page at INFO.
        "weasyprint": {"level": "WARNING"},
        "fontTools": {"level": "WARNING"},
    },
}

# Live alerts' deliveries (live/delivery.py): the portal's address for links in alerts, whether webhooks may lead
# to private, loopback or link-local hosts (off: a subscription cannot make the portal post into its own network),
# and the mail server alerts' e-mails go through (the console backend prints them).
PORTAL_URL = env.str("PORTAL_URL", default="http://127.0.0.1:8000")
ALERT_WEBHOOK_PRIVATE_HOSTS = env.bool("ALERT_WEBHOOK_PRIVATE_HOSTS", default=False)
# The longest an alert may be silenced for, in seconds (a week): a longer silence is refused (live/services.py).
ALERT_SILENCE_MAX_SECONDS = env.int("ALERT_SILENCE_MAX_SECONDS", default=7 * 24 * 3600)
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)  # seconds: a mail server that hangs must not hold a worker
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="portal@localhost")
# An alert's kinds and states are one choice set each wherever they appear (alerts, subscriptions, deliveries).
_ENUM_NAMES: dict[str, str] = SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]  # type: ignore[assignment]
_ENUM_NAMES.update(
    {
        "AlertKindEnum": "live.choices.AlertKind",
        "AlertStateEnum": "live.choices.AlertState",
        "VerdictEnum": "results.choices.Verdict",
        "DirectionEnum": "challenges.choices.Direction",
        # Site and experiment reports share their states and problem categories.
        "ReportStatusEnum": "reports.choices.ReportStatus",
        "ProblemCategoryEnum": "reports.choices.ProblemCategory",
    }
)

# FTS optimizer decisions: the STOMP destination `manage.py consume --format fts-optimizer` reads by default.
INGEST_STOMP_OPTIMIZER_DESTINATION = env.str("INGEST_STOMP_OPTIMIZER_DESTINATION", default="/topic/fts.optimizer")
