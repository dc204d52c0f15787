"""Bad input at every OAuth endpoint: a 4xx (JSON for what a program calls), never a 500, nothing granted."""

import base64
import time

import pytest
from django.test import Client
from oauth2_provider.models import get_access_token_model, get_application_model, get_grant_model

from connections.models import Connection
from connections.tests.oauth_flow import authorize_query, code_from

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
    b'{"redirect_uris": ["https://a.example/cb\\u0000"]}',
    b'{"redirect_uris": ["https://a.example/cb"], "client_name": "Home\\u0000Assistant"}',
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
    assert response.json()["error"] and response.json()["error_description"]
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


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    "authorization",
    [
        basic("a\x00", "b"),
        basic("a", "b\x00"),
        basic("a%00", "b"),  # form-encoded, as RFC 6749 2.3.1 has client credentials
        "Basic " + base64.b64encode(b"\xff\xfe:\xfd").decode(),
        "Basic ",
        "Basic !!not base64",
        basic("nope", "x"),
    ],
)
def test_client_credentials_in_the_authorization_header_are_refused_in_json(client, authorization):
    body = {"grant_type": "authorization_code", "code": "x", "redirect_uri": "https://a.example/cb"}
    for path in ("/oauth/token/", "/oauth/revoke/"):
        response = client.post(path, body | {"token": "x"}, HTTP_AUTHORIZATION=authorization)
        assert 400 <= response.status_code < 500, response.content[:300]
        assert response.json()["error"] in ("invalid_request", "invalid_client")
        assert response.json()["error_description"]


@pytest.mark.parametrize("field", ["state", "redirect_uri", "client_id", "code_challenge", "scope"])
def test_an_over_long_parameter_is_refused_before_the_consent_form_and_never_sent_back(admin_client, field):
    query = authorize_query("nope", "https://a.example/cb", challenge="c" * 43) + f"&{field}=" + "s" * 60_000
    response = admin_client.get(f"/oauth/authorize/?{query}")
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    assert field in response.json()["error_description"] and "Location" not in response
    token = admin_client.post("/oauth/token/", {"grant_type": "authorization_code", "code": "x" * 60_000})
    assert token.status_code == 400 and token.json()["error"] == "invalid_request"
    assert not get_grant_model().objects.exists()


def public_client(client) -> str:
    body = {"redirect_uris": ["http://127.0.0.1:33418/cb"], "token_endpoint_auth_method": "none"}
    return client.post("/oauth/register/", body, content_type="application/json").json()["client_id"]


@pytest.mark.parametrize("method", ["plain", None, "s256"])
def test_pkce_other_than_s256_is_refused_before_the_consent_form(admin_client, method):
    client_id = public_client(admin_client)
    query = authorize_query(client_id, "http://127.0.0.1:33418/cb", challenge=None, code_challenge="c" * 43)
    if method:
        query += f"&code_challenge_method={method}"
    response = admin_client.get(f"/oauth/authorize/?{query}")
    assert response.status_code == 302, response.content[:300]  # back to the client, no form
    answer = code_from(response["Location"])
    assert answer["error"] == "invalid_request" and "S256" in answer["error_description"]
    assert not get_grant_model().objects.exists()


@pytest.mark.parametrize("method", ["client_secret_post", "client_secret_basic", "none"])
def test_registration_answers_the_auth_method_granted_and_when_the_id_was_issued(client, method):
    body = {"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": method}
    before = int(time.time())
    answer = client.post("/oauth/register/", body, content_type="application/json").json()
    assert answer["token_endpoint_auth_method"] == method
    assert before <= answer["client_id_issued_at"] <= time.time()
    assert ("client_secret" in answer) == (method != "none")
    if method != "none":
        assert answer["client_secret_expires_at"] == 0


def registered(client, **metadata) -> dict:
    body = {"redirect_uris": ["https://a.example/cb"], "client_name": "Desk", **metadata}
    response = client.post("/oauth/register/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


UPDATES = [
    {"redirect_uris": [f"https://a.example/cb{i}" for i in range(300)]},
    {"redirect_uris": ["https://a.example/" + "x" * 600]},
    {"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]},
    {"redirect_uris": ["https://a.example/cb"], "grant_types": ["authorization_code", "implicit"]},
    {"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "none"},  # confidential -> public
    {"redirect_uris": ["https://a.example/cb"], "client_name": "x" * 300},
    {"redirect_uris": ["https://a.example/cb\x00"]},
    {"redirect_uris": ["https://a.example/cb"], "client_name": "Home\x00Assistant"},
    {"redirect_uris": []},
]


@pytest.mark.parametrize("update", UPDATES, ids=range(len(UPDATES)))
def test_a_registration_update_is_held_to_the_limits_of_a_registration(client, update):
    answer = registered(client)
    url = answer["registration_client_uri"].removeprefix("http://testserver")
    bearer = f"Bearer {answer['registration_access_token']}"
    response = client.put(url, update, content_type="application/json", HTTP_AUTHORIZATION=bearer)
    assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata", response.content
    assert response.json()["error_description"]
    application = get_application_model().objects.get()
    assert (application.redirect_uris, application.name, application.client_type) == (
        "https://a.example/cb",
        "Desk",
        "confidential",
    )
    assert application.authorization_grant_type == "authorization-code"


def test_a_public_client_cannot_become_confidential_by_an_update(client):
    answer = registered(client, token_endpoint_auth_method="none")
    url = answer["registration_client_uri"].removeprefix("http://testserver")
    update = {"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "client_secret_post"}
    bearer = f"Bearer {answer['registration_access_token']}"
    response = client.put(url, update, content_type="application/json", HTTP_AUTHORIZATION=bearer)
    assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata"
    assert get_application_model().objects.get().client_type == "public"


def test_a_registration_update_within_the_limits_answers_like_a_registration(client):
    answer = registered(client, token_endpoint_auth_method="client_secret_post")
    url = answer["registration_client_uri"].removeprefix("http://testserver")
    update = {"redirect_uris": ["https://b.example/cb"], "client_name": "Desk 2"}
    update["token_endpoint_auth_method"] = "client_secret_post"
    bearer = f"Bearer {answer['registration_access_token']}"
    response = client.put(url, update, content_type="application/json", HTTP_AUTHORIZATION=bearer)
    assert response.status_code == 200, response.content
    updated = response.json()
    assert updated["redirect_uris"] == ["https://b.example/cb"] and updated["client_name"] == "Desk 2"
    assert updated["token_endpoint_auth_method"] == "client_secret_post"
    assert updated["client_id_issued_at"] == answer["client_id_issued_at"]


@pytest.mark.parametrize("method", ["client_secret_post", "client_secret_basic"])
def test_reading_a_registration_answers_the_auth_method_the_client_registered_and_then_updated(client, method):
    answer = registered(client, token_endpoint_auth_method=method)
    url = answer["registration_client_uri"].removeprefix("http://testserver")
    bearer = f"Bearer {answer['registration_access_token']}"
    read = client.get(url, HTTP_AUTHORIZATION=bearer)
    assert read.status_code == 200 and read.json()["token_endpoint_auth_method"] == method
    other = "client_secret_basic" if method == "client_secret_post" else "client_secret_post"
    update = {"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": other}
    updated = client.put(url, update, content_type="application/json", HTTP_AUTHORIZATION=bearer)
    assert updated.status_code == 200 and updated.json()["token_endpoint_auth_method"] == other
    bearer = f"Bearer {updated.json()['registration_access_token']}"  # an update issues a new one
    assert client.get(url, HTTP_AUTHORIZATION=bearer).json()["token_endpoint_auth_method"] == other


def test_a_client_registered_before_its_auth_method_was_kept_reads_as_the_rfc_s_default(client):
    from connections.models import Registration

    answer = registered(client, token_endpoint_auth_method="client_secret_post")
    Registration.objects.all().delete()
    url = answer["registration_client_uri"].removeprefix("http://testserver")
    read = client.get(url, HTTP_AUTHORIZATION=f"Bearer {answer['registration_access_token']}")
    assert read.status_code == 200 and read.json()["token_endpoint_auth_method"] == "client_secret_basic"
