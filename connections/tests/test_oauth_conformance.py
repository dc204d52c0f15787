"""The OAuth endpoints to the letter: RFC 6749 JSON errors whatever the request, redirect URIs as the MCP
authorization spec allows them, resources compared and stored as RFC 8707 says, a refresh token sent twice."""

import pytest
from oauth2_provider.models import get_access_token_model, get_application_model, get_grant_model

from connections.models import READ, Access, Connection
from connections.oauth import connection_for_token
from connections.tests.oauth_flow import authorize_query, code_from
from connections.tests.test_oauth import MCP, REDIRECT, admin, approve, client_app, exchange, refresh  # noqa: F401
from people.tests.factories import RoomFactory

pytestmark = pytest.mark.django_db

LOOPBACK = "http://127.0.0.1:33418/cb"


def assert_oauth_error(response, status: int, error: str | None = None) -> dict:
    """An RFC 6749 5.2 answer: the status, JSON by its content type, ``error`` (``error``) and a description."""
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    body = response.json()
    assert isinstance(body["error"], str) and body["error_description"], body
    if error:
        assert body["error"] == error, body
    return body


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/oauth/token/", "get"),
        ("/oauth/token/", "put"),
        ("/oauth/token/", "delete"),
        ("/oauth/token/", "patch"),
        ("/oauth/revoke/", "get"),
        ("/oauth/revoke/", "delete"),
        ("/oauth/register/", "get"),
        ("/oauth/register/", "delete"),
        ("/oauth/register/some-client/", "post"),
        ("/oauth/authorize/", "put"),
    ],
)
def test_a_method_an_endpoint_does_not_take_is_a_json_405_with_allow(admin_client, path, method):
    response = getattr(admin_client, method)(path)
    body = assert_oauth_error(response, 405, "invalid_request")
    assert response["Allow"] and method.upper() in body["error_description"]


def test_a_query_on_the_token_endpoint_is_answered_in_json(client):
    response = client.post("/oauth/token/?x=1", {"grant_type": "authorization_code", "code": "x"})
    assert_oauth_error(response, 400)


@pytest.mark.parametrize("path", ["/oauth/token/", "/oauth/revoke/", "/oauth/authorize/"])
def test_too_many_parameters_are_invalid_request_in_json(admin_client, settings, path):
    fields = {f"f{i}": "x" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    response = admin_client.get(path, fields) if path == "/oauth/authorize/" else admin_client.post(path, fields)
    body = assert_oauth_error(response, 400, "invalid_request")
    assert str(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS) in body["error_description"]


@pytest.mark.parametrize("path", ["/oauth/token/", "/oauth/revoke/", "/oauth/register/"])
def test_a_body_over_the_limit_is_a_json_413(client, settings, path):
    body = b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = client.post(path, body, content_type="application/x-www-form-urlencoded")
    assert_oauth_error(response, 413, "invalid_request")
    assert not get_application_model().objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"grant_type": "urn:ietf:params:oauth:grant-type:device_code"},
        {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": "x", "client_id": "x"},
        {"grant_type": "password", "username": "admin", "password": "x", "client_id": "x"},
        {"grant_type": "client_credentials", "client_id": "x", "client_secret": "x"},
        {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": "x"},
        {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": "x"},
        {"grant_type": "implicit"},
        {"grant_type": "made-up"},
    ],
    ids=lambda body: body["grant_type"].rsplit(":", 1)[-1] + str(len(body)),
)
def test_a_grant_type_other_than_code_and_refresh_is_unsupported_grant_type(client, body):
    assert_oauth_error(client.post("/oauth/token/", body), 400, "unsupported_grant_type")
    assert not get_access_token_model().objects.exists()


NOT_REDIRECTS = [
    "http://evil.example/cb",  # http off the loopback
    "http://192.168.1.10:8123/auth/external/callback",
    "http://127.0.0.1.evil.example/cb",
    "http://localhost.evil.example/cb",
    "https://a@evil.example/cb",  # userinfo
    "https://a:b@evil.example/cb",
    "http://user@127.0.0.1/cb",
    "https://a.example/cb#fragment",
    "ftp://a.example/cb",
]
REDIRECTS = [
    "https://a.example/cb",
    "http://127.0.0.1:33418/cb",
    "http://127.8.9.10/cb",
    "http://[::1]:8080/cb",
    "http://localhost:1234/cb",
]


@pytest.mark.parametrize("uri", NOT_REDIRECTS)
def test_registration_and_its_update_refuse_a_redirect_uri_the_mcp_spec_does_not_allow(client, uri):
    registered = client.post("/oauth/register/", {"redirect_uris": [uri]}, content_type="application/json")
    body = assert_oauth_error(registered, 400, "invalid_client_metadata")
    assert "redirect_uris" in body["error_description"]
    assert not get_application_model().objects.exists()
    answer = client.post("/oauth/register/", {"redirect_uris": REDIRECTS}, content_type="application/json").json()
    url = answer["registration_client_uri"].removeprefix("http://testserver")
    bearer = f"Bearer {answer['registration_access_token']}"
    updated = client.put(url, {"redirect_uris": [uri]}, content_type="application/json", HTTP_AUTHORIZATION=bearer)
    assert_oauth_error(updated, 400, "invalid_client_metadata")
    assert get_application_model().objects.get().redirect_uris == " ".join(REDIRECTS)


def test_registration_takes_https_and_loopback_redirect_uris(client):
    registered = client.post("/oauth/register/", {"redirect_uris": REDIRECTS}, content_type="application/json")
    assert registered.status_code == 201, registered.content
    assert registered.json()["redirect_uris"] == REDIRECTS


def stored_client(uri: str, source: str) -> str:
    """A client with ``uri`` stored as its redirect URI (registered before the rule, or by an admin)."""
    Application = get_application_model()
    return Application.objects.create(
        name="Stored",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=uri,
        registration_source=source,
    ).client_id


@pytest.mark.parametrize("uri", ["http://evil.example/cb", "https://a@evil.example/cb"])
@pytest.mark.parametrize("named", [True, False], ids=["named", "default"])
def test_the_authorization_endpoint_holds_a_self_registered_client_to_the_same_rule(admin_client, uri, named):
    client_id = stored_client(uri, "dcr")
    query = authorize_query(client_id, uri, challenge="c" * 43)
    if not named:
        query = query.replace("redirect_uri=", "ignored=")
    response = admin_client.get(f"/oauth/authorize/?{query}")
    assert_oauth_error(response, 400, "invalid_request")
    assert "Location" not in response and not get_grant_model().objects.exists()


def test_an_admin_may_name_an_http_address_on_the_lan_but_no_userinfo(admin_client):
    lan = "http://192.168.1.10:8123/auth/external/callback"
    page = admin_client.get(
        f"/oauth/authorize/?{authorize_query(stored_client(lan, 'manual'), lan, challenge='c' * 43)}"
    )
    assert page.status_code == 200 and 'name="room"' in page.content.decode()
    userinfo = "https://a@evil.example/cb"
    query = authorize_query(stored_client(userinfo, "manual"), userinfo, challenge="c" * 43)
    assert_oauth_error(admin_client.get(f"/oauth/authorize/?{query}"), 400, "invalid_request")


@pytest.mark.parametrize("resource", [f"{MCP}?x=1", f"{MCP}#f", "http://a@testserver/mcp", "/mcp"])
def test_a_resource_with_a_query_fragment_or_userinfo_is_not_this_server(admin, client_app, resource):  # noqa: F811
    client_id, secret = client_app
    query = authorize_query(client_id, REDIRECT, challenge=None, resource=resource)
    answer = code_from(admin.get(f"/oauth/authorize/?{query}")["Location"])
    assert answer["error"] == "invalid_target", answer
    code = approve(admin, client_id, room=RoomFactory())["code"]
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
    response = admin.post("/oauth/token/", {**data, "client_secret": secret, "resource": resource})
    assert_oauth_error(response, 400, "invalid_target")
    assert not get_access_token_model().objects.exists()


def test_the_resource_is_stored_in_its_canonical_form_never_as_sent(admin, client_app):  # noqa: F811
    client_id, secret = client_app
    sent = "HTTP://TestServer:80/./mcp/"
    admin.get(f"/oauth/authorize/?{authorize_query(client_id, REDIRECT, challenge=None, scope=READ, resource=sent)}")
    data = {"client_id": client_id, "redirect_uri": REDIRECT, "response_type": "code", "state": "st-1", "scope": READ}
    data |= {"room": RoomFactory().pk, "model_location": "local", "access": Access.RECALL, "allow": "Allow"}
    code = code_from(admin.post("/oauth/authorize/", {**data, "resource": sent})["Location"])["code"]
    assert get_grant_model().objects.get().resource == [MCP]
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
    tokens = admin.post("/oauth/token/", {**body, "client_secret": secret, "resource": sent}).json()
    refreshed = refresh(admin, client_id, secret, tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.content
    assert {tuple(t.resource) for t in get_access_token_model().objects.all()} == {(MCP,)}


def test_a_refresh_token_sent_again_at_once_is_invalid_grant_and_the_new_pair_stays(admin, client_app):  # noqa: F811
    """What the second of two refreshes at once meets once the first has ended (test_oauth_races.py fires them
    truly at once); later, the same token revokes its family (test_connections_admin.py)."""
    client_id, secret = client_app
    tokens = exchange(admin, client_id, secret, approve(admin, client_id, room=RoomFactory())["code"]).json()
    first = refresh(admin, client_id, secret, tokens["refresh_token"])
    second = refresh(admin, client_id, secret, tokens["refresh_token"])
    assert_oauth_error(second, 400, "invalid_grant")
    assert connection_for_token(first.json()["access_token"], MCP) is not None
    assert Connection.objects.active().count() == 1
    assert refresh(admin, client_id, secret, first.json()["refresh_token"]).status_code == 200
