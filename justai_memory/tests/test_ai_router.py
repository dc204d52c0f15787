"""The AI router: roles to providers by settings, local/cloud, keys by variable name, timeouts, bounded retries."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from justai_memory.ai_router import AIRouterError, ProviderUnreachable, chat_complete, location_of, provider_for
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
        ("http://192.168.1.20:11434/v1", "local"),
        ("http://ollama:11434/v1", "local"),
        ("http://gpu.home.arpa/v1", "local"),
        ("https://api.openai.com/v1", "cloud"),
        ("https://llm.example.com/v1", "cloud"),
        ("http://8.8.8.8/v1", "cloud"),
    ],
)
def test_a_custom_provider_is_local_only_when_its_host_is(url, location):
    assert location_of(url) == location


def test_an_explicit_location_wins(settings):
    assert role(settings, provider="custom", base_url="http://10.0.0.5/v1", model="m", location="cloud").is_cloud


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
    settings.AI_MAX_RETRIES = 1
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url)}
        provider = provider_for("memory")
        fake.fail(503).reply("recovered")
        assert chat_complete(provider=provider, messages=[{"role": "user", "content": "hi"}]) == "recovered"
        fake.fail(500).fail(500).reply("too late")
        with pytest.raises(AIRouterError, match=r"HTTP 500") as error:
            chat_complete(provider=provider, messages=[{"role": "user", "content": "hi"}])
    assert len(fake.requests) == 4
    assert "scripted failure" not in str(error.value)


def test_a_slow_provider_times_out(settings):
    settings.AI_MAX_RETRIES = 0
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": {**memory_role(fake.base_url), "timeout": 0.3}}
        fake.reply("slow", delay=1.5)
        with pytest.raises(AIRouterError, match="APITimeoutError"):
            chat_complete(provider=provider_for("memory"), messages=[{"role": "user", "content": "hi"}])


def test_an_unreachable_provider_is_an_error_not_a_hang(settings):
    settings.AI_MAX_RETRIES = 0
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


def test_the_embedded_preset_is_local_on_loopback(settings):
    provider = role(settings, provider="embedded")
    assert (provider.base_url, provider.model, provider.location) == ("http://127.0.0.1:8091/v1", "default", "local")


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
