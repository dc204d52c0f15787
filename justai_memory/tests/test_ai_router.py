"""The AI router: roles to providers by settings, local/cloud, keys by variable name, timeouts, bounded retries."""

import os
import subprocess
import sys
from pathlib import Path

import httpx2
import openai
import pytest
from django.core.exceptions import ImproperlyConfigured

from justai_core.ai_router import (
    EMBEDDED_PORTS,
    AIRouterError,
    Answer,
    ProviderUnreachable,
    chat_complete,
    embedded_port,
    host_of,
    location_of,
    location_warnings,
    provider_for,
)
from transcripts.tests.fake_llm import FakeLLM
from transcripts.tests.helpers import memory_role

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def role(settings, **config):
    settings.AI_ROLES = {"memory": {"provider": "", "base_url": "", "model": "", "api_key_env": "", **config}}
    return provider_for("memory")


def test_the_default_is_a_local_ollama(settings):
    provider = role(settings)
    assert (provider.name, provider.base_url, provider.location) == ("ollama", "http://127.0.0.1:11434/v1", "local")
    assert provider.api_key() == "not-needed"


def test_gemini_and_openai_are_cloud_and_read_their_key_from_the_named_variable(settings, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g-secret")
    gemini = role(settings, provider="gemini", model="gemini-2.5-flash")
    assert gemini.base_url == "https://generativelanguage.googleapis.com/v1beta/openai/"
    assert (gemini.location, gemini.api_key_env, gemini.api_key()) == ("cloud", "GEMINI_API_KEY", "g-secret")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_provider = role(settings, provider="openai")
    with pytest.raises(ImproperlyConfigured, match=r"\$OPENAI_API_KEY, which is empty"):
        openai_provider.api_key()


@pytest.mark.parametrize(
    ("url", "location"),
    [
        ("http://127.0.0.1:8080/v1", "local"),
        ("http://127.1:8080/v1", "local"),
        ("http://localhost:11434/v1", "local"),
        ("http://[::1]:11434/v1", "local"),
        ("http://10.1.2.3/v1", "local"),
        ("http://172.16.0.9/v1", "local"),
        ("http://172.31.255.1/v1", "local"),
        ("http://192.168.1.20:11434/v1", "local"),
        ("http://[fd12:3456::1]:8000/v1", "local"),
        ("http://[::ffff:192.168.1.20]/v1", "local"),
        ("http://169.254.10.1/v1", "local"),
        ("http://[fe80::1]/v1", "local"),
        ("http://ollama:11434/v1", "local"),
        ("http://gpu.local/v1", "local"),
        ("http://gpu.lan/v1", "local"),
        ("http://llm.internal/v1", "local"),
        ("http://gpu.home.arpa/v1", "local"),
        ("http://gpu.home.arpa./v1", "local"),
        ("https://api.openai.com/v1", "cloud"),
        ("https://llm.example.com/v1", "cloud"),
        ("https://lan.example.com/v1", "cloud"),
        ("http://8.8.8.8/v1", "cloud"),
        ("http://134744072/v1", "cloud"),  # 8.8.8.8 as one number
        ("https://203.0.113.7:8000/v1", "cloud"),  # documentation ranges count as private to ipaddress
        ("http://198.18.0.1/v1", "cloud"),
        ("http://172.32.0.1/v1", "cloud"),
        ("http://100.64.0.1/v1", "cloud"),
        ("http://[2001:db8::1]/v1", "cloud"),
        ("http://[::ffff:8.8.8.8]/v1", "cloud"),
    ],
)
def test_the_address_decides_the_location(url, location):
    assert location_of(url) == location


@pytest.mark.parametrize(
    ("url", "host", "location"),
    [
        # IDNA: the ideographic and full-width dots separate labels, as the HTTP client reads them
        ("http://8。8。8。8:8000/v1", "8.8.8.8", "cloud"),
        ("https://api。example。com/v1", "api.example.com", "cloud"),
        ("https://203\uff0e0\uff0e113\uff0e7:8000/v1", "203.0.113.7", "cloud"),
        ("http://8｡8｡8｡8/v1", "8.8.8.8", "cloud"),
        ("http://127。0。0。1:8080/v1", "127.0.0.1", "local"),
        ("http://gpu。local/v1", "gpu.local", "local"),
        ("http://münchen.example/v1", "xn--mnchen-3ya.example", "cloud"),
        ("http://küche.local/v1", "xn--kche-0ra.local", "local"),
        # full-width digits and letters: the client refuses the URL; what cannot be told is cloud
        ("http://\uff18.\uff18.\uff18.\uff18/v1", None, "cloud"),
        ("http://\uff4f\uff4c\uff4c\uff41\uff4d\uff41/v1", None, "cloud"),  # ollama in full width
        ("http://0177.0.0.1/v1", None, "cloud"),
        ("http:///v1", "", "cloud"),
        ("not a url", "", "cloud"),
        # case and trailing dots
        ("http://API.OPENAI.COM./v1", "api.openai.com.", "cloud"),
        ("http://GPU.LOCAL./v1", "gpu.local.", "local"),
        ("http://8.8.8.8./v1", "8.8.8.8.", "cloud"),
        ("http://ai./v1", "ai.", "cloud"),  # a single label with a trailing dot is a top-level domain
        # the numeric IPv4 forms the resolver takes
        ("http://0x7f.1/v1", "0x7f.1", "local"),
        ("http://0x7f000001/v1", "0x7f000001", "local"),
        ("http://2130706433/v1", "2130706433", "local"),
        ("http://127.1/v1", "127.1", "local"),
        ("http://0177.1/v1", "0177.1", "local"),
        ("http://0x8.0x8.0x8.0x8/v1", "0x8.0x8.0x8.0x8", "cloud"),
        ("http://010.010.010.010/v1", None, "cloud"),  # octal 8.8.8.8 in dotted form: refused by the client
        # IPv6 forms
        ("http://[::1]:8000/v1", "::1", "local"),
        ("http://[0:0:0:0:0:0:0:1]/v1", "0:0:0:0:0:0:0:1", "local"),
        ("http://[::ffff:127.0.0.1]/v1", "::ffff:127.0.0.1", "local"),
        ("http://[::ffff:808:808]/v1", "::ffff:808:808", "cloud"),
        ("http://[fd12:3456::1]/v1", "fd12:3456::1", "local"),
        ("http://[2606:4700::1111]/v1", "2606:4700::1111", "cloud"),
        # userinfo: the host is after the last @
        ("http://127.0.0.1@evil.com/v1", "evil.com", "cloud"),
        ("http://127.0.0.1:80@8.8.8.8/v1", "8.8.8.8", "cloud"),
        ("http://user:pw@192.168.1.5:8000/v1", "192.168.1.5", "local"),
        # percent-encoding in the host: no resolver reads it as the decoded name
        ("http://127%2E0%2E0%2E1/v1", "127%2e0%2e0%2e1", "cloud"),
        ("http://evil%2Ecom/v1", "evil%2ecom", "cloud"),
    ],
)
def test_the_address_is_read_as_the_http_client_reads_it(url, host, location):
    """The host is the one the openai SDK's client connects to; the address rule sees only that host."""
    assert host_of(url) == host
    if host:  # what the SDK itself makes of the base URL: the same host, or the same refusal
        assert openai.OpenAI(base_url=url, api_key="-").base_url.raw_host.decode() == host
    elif host is None:
        with pytest.raises(httpx2.InvalidURL):
            openai.OpenAI(base_url=url, api_key="-")
    assert location_of(url) == location


@pytest.mark.parametrize("provider", ["ollama", "llamacpp", "vllm", "lmstudio"])
def test_a_local_preset_on_a_public_address_is_cloud(settings, provider):
    chosen = role(settings, provider=provider, base_url="https://203.0.113.7:8000/v1", model="m")
    assert chosen.location == "cloud" and chosen.is_cloud
    assert location_warnings() == []


def test_a_cloud_preset_on_a_house_address_is_local(settings):
    assert role(settings, provider="openai", base_url="http://192.168.1.20:8000/v1").location == "local"


def test_an_explicit_location_wins(settings):
    assert role(settings, provider="custom", base_url="http://10.0.0.5/v1", model="m", location="cloud").is_cloud
    assert location_warnings() == []


def test_only_an_explicit_local_calls_a_public_address_local_and_it_is_warned_about(settings):
    provider = role(settings, provider="ollama", base_url="https://user:pw@203.0.113.7:8000/v1?k=1", location="local")
    assert provider.location == "local"
    (warning,) = location_warnings()
    assert "AI_MEMORY_LOCATION=local" in warning and "https://203.0.113.7:8000/v1" in warning
    assert "pw" not in warning and "k=1" not in warning


def run_command(**ai) -> subprocess.CompletedProcess:
    """``python -m justai_memory.serving.supervisor`` (what ./scripts/run exec's) on a database that does not answer:
    it logs the location warnings, then its preparation fails and it exits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_", "EMBEDDED_", "AI_"))}
    env.update(DATABASE_URL="postgresql://nobody@127.0.0.1:9/none", MEMORY_EMBEDDER="hash", **ai)
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "justai_memory.serving.supervisor"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_run_command_warns_when_a_public_address_is_called_local():
    public = {"AI_MEMORY_PROVIDER": "ollama", "AI_MEMORY_BASE_URL": "https://203.0.113.7:8000/v1"}
    warned = run_command(**public, AI_MEMORY_LOCATION="local")
    assert "WARNING" in warned.stderr and "AI_MEMORY_LOCATION=local calls https://203.0.113.7:8000/v1" in warned.stderr
    assert "AI_MEMORY_LOCATION" not in run_command(**public).stderr


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"provider": "skynet"}, "AI_MEMORY_PROVIDER 'skynet' is not one of"),
        ({"provider": "custom", "model": "m"}, "needs AI_MEMORY_BASE_URL"),
        ({"provider": "vllm"}, "needs AI_MEMORY_MODEL"),
        ({"location": "moon"}, "AI_MEMORY_LOCATION must be 'local' or 'cloud'"),
        ({"response_format": "xml"}, "AI_MEMORY_RESPONSE_FORMAT must be one of"),
    ],
)
def test_a_bad_configuration_names_the_variable(settings, config, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        role(settings, **config)


def test_an_unknown_role_is_refused(settings):
    with pytest.raises(ImproperlyConfigured, match="No AI role 'vision'"):
        provider_for("vision")


def test_one_request_through_the_real_client(settings, monkeypatch):
    monkeypatch.setenv("HOUSE_LLM_KEY", "k-123")
    with FakeLLM() as fake:
        fake.reply('{"ok": true}')
        settings.AI_ROLES = {"memory": memory_role(fake.base_url, api_key_env="HOUSE_LLM_KEY")}
        answer = chat_complete(
            provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}], schema={"type": "object"}
        )
    assert answer == '{"ok": true}'
    (request,) = fake.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k-123"
    assert request.body["model"] == "fake-model" and request.body["temperature"] == 0
    assert request.body["response_format"]["type"] == "json_schema"
    assert request.body["response_format"]["json_schema"]["schema"] == {"type": "object"}


@pytest.mark.parametrize(("response_format", "sent"), [("json_object", {"type": "json_object"}), ("none", None)])
def test_the_response_format_can_be_relaxed_for_servers_without_structured_output(settings, response_format, sent):
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url, response_format=response_format)}
        chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}], schema={})
    assert fake.requests[0].body.get("response_format") == sent


def test_retries_are_bounded(settings):
    tries = settings.AI_MAX_RETRIES + 1  # the shipped retries
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url)}
        provider = provider_for("memory")
        fake.fail(503).reply("recovered")
        assert chat_complete(provider=provider, messages=[{"role": "user", "content": "hi"}]) == "recovered"
        for _ in range(tries):
            fake.fail(500)
        fake.reply("too late")
        with pytest.raises(AIRouterError, match=r"HTTP 500") as error:
            chat_complete(provider=provider, messages=[{"role": "user", "content": "hi"}])
    assert len(fake.requests) == 2 + tries
    assert "scripted failure" not in str(error.value)


def test_a_slow_provider_times_out(settings):
    settings.AI_MAX_RETRIES = 0
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": {**memory_role(fake.base_url), "timeout": 0.3}}
        fake.reply("slow", delay=1.5)
        with pytest.raises(AIRouterError, match="APITimeoutError"):
            chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}])


def test_an_unreachable_provider_is_an_error_not_a_hang(settings):
    # With the default retries (AI_MAX_RETRIES 2) and AI_TIMEOUT: a refused connection is not waited for.
    with FakeLLM() as fake:
        url = fake.base_url
    settings.AI_ROLES = {"memory": memory_role(url)}
    with pytest.raises(AIRouterError, match="APIConnectionError"):
        chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(
    ("provider", "response_format", "extra"),
    [
        ("llamacpp", {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}, {}),
        ("embedded", {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}, {}),
        ("ollama", {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}, {"format": SCHEMA}),
        ("vllm", None, {"guided_json": SCHEMA}),
    ],
)
def test_each_local_server_gets_the_schema_in_the_form_it_enforces(settings, provider, response_format, extra):
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": {"provider": provider, "base_url": fake.base_url, "model": "m"}}
        chat_complete(
            provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}], schema=SCHEMA, max_tokens=99
        )
    body = fake.requests[0].body
    assert body.get("response_format") == response_format
    assert {key: body[key] for key in ("format", "guided_json") if key in body} == extra
    assert body["max_tokens"] == 99


def test_a_preset_form_can_be_overridden(settings):
    settings.AI_ROLES = {"memory": {"provider": "vllm", "model": "m", "response_format": "json_schema"}}
    assert provider_for("memory").response_format == "json_schema"


def test_the_embedded_preset_is_local_on_loopback_at_a_port_of_its_installation(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "one"
    provider = role(settings, provider="embedded")
    port = embedded_port(tmp_path / "one")
    assert (provider.base_url, provider.model, provider.location) == (f"http://127.0.0.1:{port}/v1", "default", "local")
    assert EMBEDDED_PORTS[0] <= port < EMBEDDED_PORTS[1]
    # another installation on the same machine gets its own port, never one shared (such as 8091)
    ports = {embedded_port(tmp_path / name) for name in ("one", "two", "three", "four")}
    assert len(ports) == 4 and 8091 not in ports
    assert embedded_port(str(tmp_path / "one")) == port  # every process of one installation finds the same
    assert role(settings, provider="embedded", base_url="http://127.0.0.1:9999/v1").base_url.endswith(":9999/v1")


def test_an_unreachable_provider_is_told_apart_from_a_slow_one(settings):
    settings.AI_MAX_RETRIES = 0
    with FakeLLM() as fake:
        url = fake.base_url
        settings.AI_ROLES = {"memory": {**memory_role(url), "timeout": 0.3}}
        fake.reply("slow", delay=1.5)
        with pytest.raises(AIRouterError) as slow:
            chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ProviderUnreachable):
        chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}])
    assert not isinstance(slow.value, ProviderUnreachable)


def test_a_streamed_answer_that_keeps_coming_is_not_timed_out(settings):
    settings.AI_MAX_RETRIES = 0
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": {**memory_role(fake.base_url), "timeout": 0.5}}
        text = '{"facts": [], "preferences": [], "summary": {"content": "Anna sprach vom Tor."}}'
        fake.reply_streamed(text, chunk_chars=4, chunk_delay=0.1)  # ~2 s in all, 0.1 s between pieces
        answer = Answer()
        assert (
            chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}], answer=answer)
            == text
        )
    assert fake.requests[0].body["stream"] is True
    assert answer.seconds > 1.0 and answer.tokens == -(-len(text) // 4) and answer.finish_reason == "stop"


def test_a_stalled_stream_is_timed_out_as_too_slow_with_its_figures(settings):
    settings.AI_MAX_RETRIES = 0
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": {**memory_role(fake.base_url), "timeout": 0.5}}
        fake.reply_streamed('{"facts": [{"content": "Der Code ist 4711."}]}', chunk_chars=4, stall_after=3, stall=3)
        with pytest.raises(AIRouterError) as error:
            chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}])
    message = str(error.value)
    assert not isinstance(error.value, ProviderUnreachable)
    assert "the model was too slow: no token for 0 s (AI_TIMEOUT) after 3 tokens in" in message
    assert "nothing answered" not in message and "4711" not in message


def test_a_model_that_never_starts_answering_is_too_slow_not_absent(settings):
    settings.AI_MAX_RETRIES = 0
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": {**memory_role(fake.base_url), "timeout": 0.3}}
        fake.reply("late", delay=1.5)
        with pytest.raises(AIRouterError, match=r"the model was too slow: no token for 0 s .* after 0 tokens") as error:
            chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}])
    assert "nothing answered" not in str(error.value)


def test_stop_when_ends_the_stream_early(settings):
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url)}
        fake.reply_streamed('{"a": 1}, {"b": 2}, {"c": 3}' + " " * 400, chunk_chars=8, chunk_delay=0.02)
        answer = Answer()
        text = chat_complete(
            provider=provider_for("memory"),
            messages=[{"role": "user", "content": "hi"}],
            stop_when=lambda text: text.count("}") >= 2,
            answer=answer,
        )
    assert text.startswith('{"a": 1}, {"b": 2}') and '"c": 3' not in text and answer.stopped
