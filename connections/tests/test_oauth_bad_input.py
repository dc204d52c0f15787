"""Bad input at every OAuth endpoint: a 4xx (JSON for what a program calls), never a 500, nothing granted."""

import pytest
from django.test import Client
from oauth2_provider.models import get_access_token_model, get_application_model, get_grant_model

from connections.models import Connection
from connections.tests.oauth_flow import authorize_query

pytestmark = pytest.mark.django_db

TOKEN_BODIES = [
    {},
    {"grant_type": "authorization_code"},
    {"grant_type": "authorization_code", "code": "x", "client_id": "nope", "redirect_uri": "https://a.example/cb"},
    {"grant_type": "password", "username": "admin", "password": "x", "client_id": "nope"},
    {"grant_type": "client_credentials", "client_id": "nope", "client_secret": "x"},
    {"grant_type": "implicit"},
    {"grant_type": "refresh_token", "refresh_token": "", "client_id": "nope"},
    {"grant_type": "authorization_code", "code": "x" * 100_000, "client_id": "nope"},
    {"grant_type": "authorization_code\x00", "code": "\x00\x01"},
    {"grant_type": ["authorization_code", "refresh_token"]},
    {"grant_type": "authorization_code", "code": "x", "client_id": "a\x00b", "client_secret": "x"},
]

REGISTRATIONS = [
    b"",
    b"not json",
    b"[]",
    b'"a string"',
    b"{}",
    b'{"redirect_uris": "https://a.example/cb"}',
    b'{"redirect_uris": [1, 2]}',
    b'{"redirect_uris": ["javascript:alert(1)"]}',
    b'{"redirect_uris": ["https://a.example/cb"], "grant_types": ["password"]}',
    b'{"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]}',
    b'{"redirect_uris": ["https://a.example/cb"], "grant_types": ["authorization_code", "implicit"]}',
    b'{"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}',
    b'{"redirect_uris": ["https://a.example/cb"], "client_name": {"nested": true}}',
    b'{"redirect_uris": ["https://a.example/cb"], "client_name": "' + b"x" * 10_000 + b'"}',
    b"\xff\xfe not utf-8",
]

AUTHORIZE_QUERIES = [
    "",
    "response_type=code",
    "response_type=code&client_id=nope",
    "response_type=token&client_id=nope&redirect_uri=https://a.example/cb",
    "response_type=code&client_id=%00&redirect_uri=%00",
]


@pytest.mark.parametrize("body", TOKEN_BODIES, ids=range(len(TOKEN_BODIES)))
def test_the_token_endpoint_answers_bad_requests_in_json(client, body):
    response = client.post("/oauth/token/", body)
    assert 400 <= response.status_code < 500, response.content[:300]
    assert "error" in response.json()
    assert not get_access_token_model().objects.exists()


@pytest.mark.parametrize("body", REGISTRATIONS, ids=range(len(REGISTRATIONS)))
def test_registration_answers_bad_metadata_in_json_and_registers_nothing(client, body):
    response = client.post("/oauth/register/", body, content_type="application/json")
    assert 400 <= response.status_code < 500, response.content[:300]
    assert response.json()["error"] == "invalid_client_metadata"
    assert not get_application_model().objects.exists()


@pytest.mark.parametrize("query", AUTHORIZE_QUERIES, ids=range(len(AUTHORIZE_QUERIES)))
def test_the_authorization_endpoint_refuses_bad_requests_without_redirecting(admin_client, query):
    response = admin_client.get(f"/oauth/authorize/?{query}")
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert "error" in response.json()
    assert not get_grant_model().objects.exists() and not Connection.objects.exists()


def test_programs_call_the_token_revocation_and_registration_endpoints_without_csrf_tokens():
    client = Client(enforce_csrf_checks=True)  # as a program calls them: no cookie, no CSRF token
    assert client.post("/oauth/token/", {"grant_type": "authorization_code", "code": "x"}).status_code in (400, 401)
    assert client.post("/oauth/revoke/", {"token": "x", "client_id": "nope"}).status_code in (400, 401)
    assert client.post("/oauth/register/", b"{}", content_type="application/json").status_code == 400


def test_revocation_and_metadata_refuse_what_they_do_not_serve(client):
    assert client.post("/oauth/revoke/", {"token": "x"}).status_code in (400, 401)
    assert client.post("/oauth/revoke/", {}).status_code in (400, 401)
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"):
        assert client.post(path).status_code == 405
    assert client.get("/oauth/token/").status_code == 405
    query = authorize_query("nope", "https://a.example/cb", challenge=None)
    assert client.get(f"/oauth/authorize/?{query}").status_code == 302  # not logged in: the login first
