"""The AI router: each role (``memory``, ...) maps to an OpenAI-compatible provider, local or cloud.

One client (the ``openai`` SDK with a ``base_url``) covers Ollama, llama.cpp, vLLM, LM Studio
(local) and OpenAI or Gemini's OpenAI-compatible endpoint (cloud). Settings come from the
environment (``AI_<ROLE>_*``, see docs/configuration.md, "AI router"); presets fill in what is not set.
"""

import hashlib
import hmac
import ipaddress
import logging
import os
import re
import socket
import time
import zlib
from dataclasses import dataclass
from urllib.parse import urlparse

import httpx2
import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from justai_core.locations import CLOUD, LOCAL

logger = logging.getLogger(__name__)

# How the answer's schema is sent: the form each server enforces (as a grammar while it decodes).
# json_schema: OpenAI's response_format (OpenAI, Gemini, llama.cpp, LM Studio); ollama: that and Ollama's own
# ``format`` with the schema; guided_json: vLLM's guided decoding (``guided_json``); json_object: any JSON; none.
RESPONSE_FORMATS = ("json_schema", "ollama", "guided_json", "json_object", "none")
# The form a preset gets unless AI_<ROLE>_RESPONSE_FORMAT says otherwise (the others: json_schema).
PRESET_RESPONSE_FORMATS = {"ollama": "ollama", "vllm": "guided_json"}


@dataclass(frozen=True)
class Preset:
    base_url: str
    model: str
    api_key_env: str


# Defaults per provider name; every field can be overridden by AI_<ROLE>_<FIELD>.
PRESETS = {
    "ollama": Preset("http://127.0.0.1:11434/v1", "qwen2.5:7b-instruct", ""),
    # The GGUF model the run command serves itself (justai_memory/serving/embedded_model.py), on loopback at a port of
    # this installation's own (embedded_base_url); the preset's URL is only a placeholder.
    "embedded": Preset("", "default", ""),
    "llamacpp": Preset("http://127.0.0.1:8080/v1", "default", ""),
    "vllm": Preset("http://127.0.0.1:8001/v1", "", ""),
    "lmstudio": Preset("http://127.0.0.1:1234/v1", "", ""),
    "openai": Preset("https://api.openai.com/v1", "gpt-4.1-mini", "OPENAI_API_KEY"),
    "gemini": Preset("https://generativelanguage.googleapis.com/v1beta/openai/", "gemini-2.5-flash", "GEMINI_API_KEY"),
    "custom": Preset("", "", ""),
}
# Where a model runs is decided by its address, never by the preset's name: an "ollama" on an
# internet host is a cloud. Local are loopback, link-local, the private ranges below, single-label
# names (a container such as "ollama") and the house-local suffixes. ipaddress's is_private is not
# used: it also counts the documentation and benchmarking ranges (203.0.113.0/24 among them), which
# are not in any house.
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(network) for network in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
LOCAL_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localhost")
# A host name as a resolver reads it: labels of letters, digits, hyphens (and underscores, as container names
# have them), separated by dots.
HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")

UNKNOWN_ROLE = "No AI role '{role}' is configured (AI_ROLES)."
UNKNOWN_PROVIDER = "AI_{ROLE}_PROVIDER '{provider}' is not one of: {choices}."
MISSING_FIELD = "The AI role '{role}' needs {variable} (provider '{provider}' has no default)."
BAD_LOCATION = "AI_{ROLE}_LOCATION must be 'local' or 'cloud', not '{value}'."
PUBLIC_CALLED_LOCAL = (
    "AI_{ROLE}_LOCATION=local calls {url} local although its host is not a house address: the '{role}' "
    "role's prompts (transcripts, and memories regardless of personal_memories_to_cloud) go there."
)
BAD_RESPONSE_FORMAT = "AI_{ROLE}_RESPONSE_FORMAT must be one of: {choices}."
MISSING_KEY = "The AI role '{role}' reads its API key from ${variable}, which is empty."


class AIRouterError(Exception):
    """The provider could not be reached or answered with an error. The message holds no prompt or answer text."""


class ProviderUnreachable(AIRouterError):
    """Nothing answered at the provider's URL (connection refused, no route): waiting for it is the remedy, not retrying."""


# The start of the message when nothing answered at the provider's URL (connection refused, no route).
UNREACHABLE_MARK = "nothing answered at"
UNREACHABLE = "{error} from the '{role}' provider: " + UNREACHABLE_MARK + " {url}"


def public_url(url: str) -> str:
    """``url`` without user info, query or fragment: what may be shown and logged."""
    parts = urlparse(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return parts._replace(netloc=netloc, query="", fragment="").geturl()


@dataclass(frozen=True)
class Provider:
    """Where one role's requests go."""

    role: str
    name: str
    base_url: str
    model: str
    api_key_env: str
    location: str
    response_format: str
    timeout: float
    max_retries: int

    @property
    def is_cloud(self) -> bool:
        return self.location == CLOUD

    def api_key(self) -> str:
        """The key from the environment variable named by the settings; the embedded model its installation's key;
        other local servers get a placeholder."""
        if not self.api_key_env and self.name == "embedded":
            return embedded_api_key()
        if not self.api_key_env:
            return "not-needed"  # the SDK insists on a key; Ollama and llama.cpp ignore it
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ImproperlyConfigured(MISSING_KEY.format(role=self.role, variable=self.api_key_env))
        return key


def host_of(base_url: str) -> str | None:
    """The host the HTTP client connects to for ``base_url``, as it will send it; None when it refuses the URL.

    The ``openai`` SDK sends through httpx2, so httpx2's own URL parser reads the address: userinfo
    (``127.0.0.1@evil.com`` is evil.com), IDNA with the ideographic and full-width dots (U+3002, U+FF0E,
    U+FF61) as label separators (``8。8。8。8`` is 8.8.8.8), lower case, IPv6 literals without brackets.
    A host it refuses (full-width digits or letters, a malformed IPv4 literal) is never connected to.
    """
    try:
        return httpx2.URL(base_url).raw_host.decode("ascii")
    except (httpx2.InvalidURL, TypeError, UnicodeError):
        return None


def location_of(base_url: str) -> str:
    """'local' when the host the HTTP client will connect to is loopback, link-local, private (RFC 1918,
    IPv6 ULA) or a house-local name; otherwise, and whenever that host cannot be told, 'cloud'."""
    host = host_of(base_url)
    if not host:
        return CLOUD
    name = host.rstrip(".")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        if not HOST_NAME.fullmatch(name):
            return CLOUD  # percent-encoding or anything else no resolver reads as this name
        try:  # the forms the resolver takes as IPv4 (inet_aton): "127.1", "0x7f.1", "0177.1", "2130706433"
            address = ipaddress.ip_address(socket.inet_aton(name))
        except OSError:
            # A single label is a name in the house (a container such as "ollama") only as a relative name:
            # with a trailing dot it is a top-level domain, looked up on the internet.
            single = "." not in name and not host.endswith(".")
            return LOCAL if single or name.endswith(LOCAL_SUFFIXES) else CLOUD
    if address.version == 6 and address.ipv4_mapped:
        address = address.ipv4_mapped
    in_house = address.is_loopback or address.is_link_local or any(address in net for net in PRIVATE_NETWORKS)
    return LOCAL if in_house else CLOUD


# The embedded model's port is derived from the data folder: two installations on one machine never share
# a model, and every process of one installation (web, cluster, manage.py) finds it without being told.
# The range lies below Linux's ephemeral ports (32768-60999), which the kernel hands to outgoing connections.
EMBEDDED_PORTS = (20000, 32000)


def embedded_port(data_dir) -> int:
    """This installation's port for the embedded model: a hash of its data folder's absolute path into EMBEDDED_PORTS."""
    first, last = EMBEDDED_PORTS
    path = os.path.abspath(os.path.expanduser(str(data_dir)))
    return first + zlib.crc32(path.encode()) % (last - first)


def embedded_api_key() -> str:
    """The key the embedded model's server takes requests with: this installation's own, derived from its
    SECRET_KEY (the server and every client of one installation agree; another installation or a web page on
    the machine does not know it). Never configured, never logged."""
    return hmac.new(settings.SECRET_KEY.encode(), b"justai-memory embedded model", hashlib.sha256).hexdigest()


def embedded_base_url(data_dir) -> str:
    return f"http://127.0.0.1:{embedded_port(data_dir)}/v1"


def provider_for(role: str) -> Provider:
    """The provider configured for ``role``; ImproperlyConfigured naming the variable when something is missing."""
    try:
        config = settings.AI_ROLES[role]
    except KeyError:
        raise ImproperlyConfigured(UNKNOWN_ROLE.format(role=role)) from None
    upper = role.upper()
    name = (config.get("provider") or "ollama").lower()
    if name not in PRESETS:
        raise ImproperlyConfigured(
            UNKNOWN_PROVIDER.format(ROLE=upper, provider=name, choices=", ".join(PRESETS)),
        )
    preset = PRESETS[name]
    base_url = config.get("base_url") or preset.base_url
    if name == "embedded" and not config.get("base_url"):
        base_url = embedded_base_url(settings.DATA_DIR)
    model = config.get("model") or preset.model
    for value, field in ((base_url, "BASE_URL"), (model, "MODEL")):
        if not value:
            raise ImproperlyConfigured(MISSING_FIELD.format(role=role, variable=f"AI_{upper}_{field}", provider=name))
    location = (config.get("location") or location_of(base_url)).lower()
    if location not in (LOCAL, CLOUD):
        raise ImproperlyConfigured(BAD_LOCATION.format(ROLE=upper, value=location))
    response_format = (config.get("response_format") or PRESET_RESPONSE_FORMATS.get(name, "json_schema")).lower()
    if response_format not in RESPONSE_FORMATS:
        raise ImproperlyConfigured(BAD_RESPONSE_FORMAT.format(ROLE=upper, choices=", ".join(RESPONSE_FORMATS)))
    api_key_env = config.get("api_key_env") or preset.api_key_env
    return Provider(
        role=role,
        name=name,
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        location=location,
        response_format=response_format,
        timeout=float(config.get("timeout") or settings.AI_TIMEOUT),
        max_retries=int(settings.AI_MAX_RETRIES if config.get("max_retries") is None else config["max_retries"]),
    )


def location_warnings() -> list[str]:
    """One warning per role whose explicit AI_<ROLE>_LOCATION=local calls a public address local (the run command logs them)."""
    warnings = []
    for role in settings.AI_ROLES:
        try:
            provider = provider_for(role)
        except ImproperlyConfigured:
            continue  # the health check reports it
        if provider.location == LOCAL and location_of(provider.base_url) == CLOUD:
            url = public_url(provider.base_url)
            warnings.append(PUBLIC_CALLED_LOCAL.format(ROLE=role.upper(), url=url, role=role))
    return warnings


def _response_format(provider: Provider, schema: dict | None, schema_name: str) -> dict | openai.Omit:
    if schema is None or provider.response_format in ("none", "guided_json"):
        return openai.omit
    if provider.response_format == "json_object":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema}}


def _schema_extra(provider: Provider, schema: dict | None) -> dict | None:
    """The request fields outside OpenAI's API that carry the schema: Ollama's ``format``, vLLM's ``guided_json``."""
    if schema is None:
        return None
    if provider.response_format == "ollama":
        return {"format": schema}
    if provider.response_format == "guided_json":
        return {"guided_json": schema}
    return None


# A streamed answer is timed by its pace, not its length: ``timeout`` (AI_TIMEOUT) bounds the wait for
# each next piece (the first one included: the prompt is read before it), never the whole answer.
CONNECT_TIMEOUT = 10.0
TOO_SLOW = (
    "APITimeoutError from the '{role}' provider: the model was too slow: no token for {idle:.0f} s "
    "(AI_TIMEOUT) after {tokens} tokens in {elapsed:.0f} s"
)
TOO_SLOW_MARK = "the model was too slow"


@dataclass
class Answer:
    """A streamed answer as far as it came: its text, its pieces (about one token each) and its pace."""

    text: str = ""
    tokens: int = 0
    seconds: float = 0.0
    first_token_seconds: float | None = None
    finish_reason: str | None = None
    stopped: bool = False  # the caller's ``stop_when`` ended it early

    @property
    def tokens_per_second(self) -> float:
        generating = self.seconds - (self.first_token_seconds or 0.0)
        return self.tokens / generating if generating > 0 else 0.0


def _read(stream, answer: Answer, pieces: list[str], *, started: float, stop_when) -> None:
    """Collect a streamed answer's pieces and figures into ``pieces`` and ``answer``, until it ends or
    ``stop_when`` says so."""
    for chunk in stream:
        choice = chunk.choices[0] if chunk.choices else None
        if choice is None:
            continue
        answer.finish_reason = choice.finish_reason or answer.finish_reason
        piece = choice.delta.content if choice.delta else None
        if not piece:
            continue
        if answer.first_token_seconds is None:
            answer.first_token_seconds = time.monotonic() - started
        pieces.append(piece)
        answer.tokens += 1
        if stop_when is not None and "}" in piece and stop_when("".join(pieces)):
            answer.stopped = True
            return


def chat_complete(
    *,
    provider: Provider,
    messages: list[dict],
    schema: dict | None = None,
    schema_name: str = "answer",
    max_tokens: int | None = None,
    stop_when=None,
    answer: Answer | None = None,
    extra: dict | None = None,
) -> str:
    """One chat completion, streamed; returns the answer's text.

    The schema goes in the form the provider enforces (``response_format``); ``max_tokens`` bounds the
    answer. The answer is streamed: a model that keeps producing tokens is never timed out, one that
    sends nothing for ``provider.timeout`` seconds is ("the model was too slow", with its figures).
    ``stop_when(text)`` is asked whenever a piece ends an object (``}``): True ends the answer there
    (a repeating answer cut at its first repeat). ``answer`` (optional) receives the figures;
    ``extra`` adds request fields a server understands (a repetition penalty).

    Raises AIRouterError with the error's class, HTTP status and figures only, never the prompt or the answer.
    """
    answer = answer if answer is not None else Answer()
    client = openai.OpenAI(
        base_url=provider.base_url,
        api_key=provider.api_key(),
        timeout=openai.Timeout(provider.timeout, connect=min(CONNECT_TIMEOUT, provider.timeout)),
        max_retries=provider.max_retries,
    )
    started = time.monotonic()
    pieces: list[str] = []
    try:
        stream = client.chat.completions.create(
            model=provider.model,
            messages=messages,
            temperature=0,
            response_format=_response_format(provider, schema, schema_name),
            max_tokens=max_tokens if max_tokens is not None else openai.omit,
            extra_body={**(_schema_extra(provider, schema) or {}), **(extra or {})} or None,
            stream=True,
        )
        try:
            _read(stream, answer, pieces, started=started, stop_when=stop_when)
        finally:
            stream.close()
    except openai.APIStatusError as exc:
        raise AIRouterError(
            f"{type(exc).__name__} (HTTP {exc.status_code}) from the '{provider.role}' provider"
        ) from exc
    except openai.APITimeoutError as exc:  # a server that answers too slowly is there: no "nothing answered"
        raise AIRouterError(
            TOO_SLOW.format(
                role=provider.role, idle=provider.timeout, tokens=answer.tokens, elapsed=time.monotonic() - started
            )
        ) from exc
    except openai.APIConnectionError as exc:
        if answer.tokens:  # it was answering: the connection broke, nobody is missing
            raise AIRouterError(
                f"{type(exc).__name__} from the '{provider.role}' provider after {answer.tokens} tokens"
            ) from exc
        raise ProviderUnreachable(
            UNREACHABLE.format(error=type(exc).__name__, role=provider.role, url=public_url(provider.base_url))
        ) from exc
    except openai.OpenAIError as exc:
        raise AIRouterError(f"{type(exc).__name__} from the '{provider.role}' provider") from exc
    finally:
        answer.seconds = time.monotonic() - started
        answer.text = "".join(pieces)
        client.close()
    if not answer.text:
        raise AIRouterError(f"Empty answer from the '{provider.role}' provider")
    return answer.text


def provider_status(role: str) -> dict:
    """Whether ``role``'s provider answers (GET {base_url}/models within AI_PROBE_TIMEOUT, no retries).

    Returns role, provider, base_url (``public_url``: no user info, query or fragment), model, location, ``ok``, ``model_listed``
    (whether the model is among the listed ones; None when unknown) and ``error`` (class or HTTP
    status, or the configuration problem): never the API key.
    """
    try:
        provider = provider_for(role)
    except ImproperlyConfigured as exc:
        return {"role": role, "ok": False, "model_listed": None, "error": str(exc)}
    status = {
        "role": role,
        "provider": provider.name,
        "base_url": public_url(provider.base_url),
        "model": provider.model,
        "location": provider.location,
        "ok": False,
        "model_listed": None,
        "error": None,
    }
    try:
        client = openai.OpenAI(
            base_url=provider.base_url,
            api_key=provider.api_key(),
            timeout=settings.AI_PROBE_TIMEOUT,
            max_retries=0,
        )
    except ImproperlyConfigured as exc:
        return {**status, "error": str(exc)}
    try:
        models = client.models.list()
        listed = [model.id for model in models.data]
    except openai.APIStatusError as exc:
        status["error"] = f"HTTP {exc.status_code}"
    except openai.OpenAIError as exc:
        status["error"] = type(exc).__name__
    else:
        status["ok"] = True
        status["model_listed"] = provider.model in listed if listed else None
    finally:
        client.close()
    return status
