"""The OAuth 2.1 server of the MCP endpoint, through Django's test client: metadata, consent, tokens, refresh, revoke.

Every bad request ends in the RFCs' JSON error and grants nothing.
"""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)

from connections.models import READ, WRITE, Access, Connection
from connections.oauth import connection_for_token
from connections.tests.oauth_flow import authorize_query, code_from, pkce
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db

REDIRECT = "https://my.home-assistant.io/redirect/oauth"
MCP = "http://testserver/mcp"  # the MCP server as the test client reaches it


@pytest.fixture
def client_app():
    out = io.StringIO()
    call_command("oauth_client", "--name", "Home Assistant", stdout=out, stderr=io.StringIO())
    lines = dict(line.split(": ", 1) for line in out.getvalue().splitlines())
    return lines["client_id"], lines["client_secret"]


@pytest.fixture
def admin(client, admin_user):
    client.force_login(admin_user)
    return client


def approve(client, client_id, *, room, challenge=None, speaker=None, location="local", access=Access.ALL):
    """GET the consent page, then POST the admin's choice; the redirect's query (code, state, iss)."""
    query = authorize_query(client_id, REDIRECT, challenge=challenge, scope=f"{READ} {WRITE}")
    page = client.get(f"/oauth/authorize/?{query}")
    assert page.status_code == 200, page.content
    data = {
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "state": "st-1",
        "scope": f"{READ} {WRITE}",
        "room": room.pk,
        "speaker": speaker.pk if speaker else "",
        "model_location": location,
        "access": access,
        "allow": "Allow",
    }
    if challenge:
        data.update(code_challenge=challenge, code_challenge_method="S256")
    response = client.post("/oauth/authorize/", data)
    assert response.status_code == 302, response.content
    return code_from(response["Location"]) | {"_location": response["Location"]}


def exchange(client, client_id, secret, code, verifier=None, redirect_uri=REDIRECT):
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "client_id": client_id}
    if secret:
        data["client_secret"] = secret
    if verifier:
        data["code_verifier"] = verifier
    return client.post("/oauth/token/", data)


def refresh(client, client_id, secret, refresh_token):
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
    return client.post("/oauth/token/", {**data, "client_secret": secret})


def test_metadata_names_the_mcp_resource_and_this_server(client):
    server = client.get("/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == "http://testserver"
    assert server["authorization_endpoint"] == "http://testserver/oauth/authorize/"
    assert server["token_endpoint"] == "http://testserver/oauth/token/"
    assert server["registration_endpoint"] == "http://testserver/oauth/register/"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert server["scopes_supported"] == [READ, WRITE]
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        resource = client.get(path).json()
        assert resource["resource"] == "http://testserver/mcp"
        assert resource["authorization_servers"] == ["http://testserver"]


def test_the_consent_page_needs_an_admin(client, client_app, django_user_model):
    query = authorize_query(client_app[0], REDIRECT, challenge=None)
    response = client.get(f"/oauth/authorize/?{query}")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/?next=/oauth/authorize/")
    client.force_login(django_user_model.objects.create_user("guest", password="x"))
    assert client.get(f"/oauth/authorize/?{query}").status_code == 403


def staff_with(django_user_model, *codenames):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("keeper", password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def test_approving_a_connection_needs_the_right_to_read_memories(client, client_app, django_user_model):
    """Approving is reading as the chosen speaker: the right to add connections alone is not enough."""
    query = authorize_query(client_app[0], REDIRECT, challenge=None, scope=f"{READ} {WRITE}")
    client.force_login(staff_with(django_user_model, "add_connection"))
    assert client.get(f"/oauth/authorize/?{query}").status_code == 403
    data = {"client_id": client_app[0], "redirect_uri": REDIRECT, "response_type": "code", "state": "st-1"}
    data |= {"scope": READ, "room": RoomFactory().pk, "model_location": "local", "access": Access.RECALL}
    assert client.post("/oauth/authorize/", {**data, "allow": "Allow"}).status_code == 403
    assert not Connection.objects.exists() and not get_grant_model().objects.exists()


def test_a_connection_that_remembers_and_forgets_needs_the_rights_to_add_and_delete_memories(
    client, client_app, django_user_model
):
    client.force_login(staff_with(django_user_model, "add_connection", "view_memory"))
    page = client.get(f"/oauth/authorize/?{authorize_query(client_app[0], REDIRECT, challenge=None)}")
    assert page.status_code == 200
    assert page.context["form"].fields["access"].choices == [(Access.RECALL, Access.RECALL.label)]
    data = {"client_id": client_app[0], "redirect_uri": REDIRECT, "response_type": "code", "state": "st-1"}
    data |= {"scope": f"{READ} {WRITE}", "room": RoomFactory().pk, "model_location": "local", "allow": "Allow"}
    refused = client.post("/oauth/authorize/", {**data, "access": Access.ALL})
    assert refused.status_code == 200 and "access" in refused.context["form"].errors
    assert not Connection.objects.exists() and not get_grant_model().objects.exists()
    allowed = client.post("/oauth/authorize/", {**data, "access": Access.RECALL})
    assert allowed.status_code == 302 and Connection.objects.get().scope == Access.RECALL


def test_a_confidential_client_connects_refreshes_and_is_revoked(admin, client_app, django_capture_on_commit_callbacks):
    client_id, secret = client_app
    room, speaker = RoomFactory(name="Kitchen"), PersonFactory()
    redirect = approve(admin, client_id, room=room, speaker=speaker, access=Access.RECALL)
    assert redirect["state"] == "st-1" and redirect["iss"] == "http://testserver"

    tokens = exchange(admin, client_id, secret, redirect["code"]).json()
    assert tokens["scope"] == READ and tokens["token_type"] == "Bearer"
    connection, scopes = connection_for_token(tokens["access_token"], MCP)
    assert (connection.room, connection.speaker, connection.model_location) == (room, speaker, "local")
    assert scopes == {READ}
    # Stored hashed: neither token is in the database.
    assert not get_access_token_model().objects.filter(token=tokens["access_token"]).exists()
    assert not get_refresh_token_model().objects.filter(token=tokens["refresh_token"]).exists()

    refreshed = refresh(admin, client_id, secret, tokens["refresh_token"]).json()
    assert connection_for_token(tokens["access_token"], MCP) is None  # the old access token is gone
    assert connection_for_token(refreshed["access_token"], MCP)[0] == connection

    connection.revoke()
    assert connection_for_token(refreshed["access_token"], MCP) is None
    again = refresh(admin, client_id, secret, refreshed["refresh_token"])
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_a_public_client_registers_itself_and_must_use_pkce(admin, client):
    registered = client.post(
        "/oauth/register/",
        {
            "client_name": "Desktop",
            "redirect_uris": ["http://127.0.0.1:33418/callback"],
            "token_endpoint_auth_method": "none",
        },
        content_type="application/json",
    )
    assert registered.status_code == 201, registered.content
    client_id = registered.json()["client_id"]
    query = authorize_query(client_id, "http://127.0.0.1:33418/callback", challenge=None)
    response = admin.get(f"/oauth/authorize/?{query}")
    assert response.status_code == 302 and code_from(response["Location"])["error"] == "invalid_request"
    assert not get_grant_model().objects.exists()


def test_bad_codes_verifiers_and_redirects_grant_nothing(admin, client_app):
    client_id, secret = client_app
    room = RoomFactory()
    verifier, challenge = pkce()
    approved = approve(admin, client_id, room=room, challenge=challenge)
    assert "code" in approved, approved
    code = approved["code"]

    def error(response):
        assert response.status_code in (400, 401), response.content
        return response.json()["error"]

    assert error(exchange(admin, client_id, secret, "not-a-code", verifier)) == "invalid_grant"
    assert error(exchange(admin, client_id, secret, code, pkce()[0])) == "invalid_grant"  # another verifier
    assert error(exchange(admin, client_id, "wrong-secret", code, verifier)) == "invalid_client"
    assert error(exchange(admin, client_id, secret, code, verifier, "https://evil.example/cb")) == "invalid_request"
    assert not get_access_token_model().objects.exists()

    # An unregistered redirect URI is never redirected to: a JSON error, and no code.
    query = authorize_query(client_id, "https://evil.example/cb", challenge=challenge)
    response = admin.get(f"/oauth/authorize/?{query}")
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    # An expired code.
    get_grant_model().objects.update(expires=timezone.now() - timedelta(seconds=1))
    assert error(exchange(admin, client_id, secret, code, verifier)) == "invalid_grant"
    assert not get_access_token_model().objects.exists()


def test_an_approval_whose_code_was_never_exchanged_shows_as_never_connected(admin, client_app):
    approve(admin, client_app[0], room=RoomFactory())
    assert "approved, waiting for the client" in admin.get("/admin/connections/connection/").content.decode()
    get_grant_model().objects.update(expires=timezone.now() - timedelta(seconds=1))
    listed = admin.get("/admin/connections/connection/").content.decode()
    assert "never connected: the client did not use its code in time" in listed


def test_a_code_is_exchanged_once_and_its_reuse_revokes_every_token_issued_from_it(admin, client_app):
    """RFC 6749 4.1.2: a second use of a code is refused, and what the first use gave is revoked."""
    client_id, secret = client_app
    code = approve(admin, client_id, room=RoomFactory())["code"]
    first = exchange(admin, client_id, secret, code).json()
    refreshed = refresh(admin, client_id, secret, first["refresh_token"]).json()  # the family goes on
    assert connection_for_token(refreshed["access_token"], MCP) is not None
    second = exchange(admin, client_id, secret, code)
    assert second.status_code == 400 and second.json()["error"] == "invalid_grant"
    assert connection_for_token(refreshed["access_token"], MCP) is None
    assert Connection.objects.get().revoked_at is not None
    assert not get_access_token_model().objects.exists()
    assert not get_refresh_token_model().objects.filter(revoked=None).exists()
    again = refresh(admin, client_id, secret, refreshed["refresh_token"])
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_a_second_exchange_of_a_code_at_the_same_moment_starts_no_family_and_revokes_the_first(admin, client_app):
    """Two exchanges that both passed validation before either deleted the code: the second one's tokens belong
    to no connection, and when it finds the code gone it revokes what the first was issued."""
    from oauthlib.common import Request
    from oauthlib.oauth2.rfc6749.errors import InvalidGrantError

    from connections.oauth import MemoryValidator

    client_id, secret = client_app
    code = approve(admin, client_id, room=RoomFactory())["code"]
    first = exchange(admin, client_id, secret, code).json()
    connection = Connection.objects.get()
    request = Request("/oauth/token/")
    request.client = get_application_model().objects.get()
    request.memory_connection, request.user = connection, connection.approved_by
    second_family = MemoryValidator()._create_refresh_token(request, "second-refresh", None, None).token_family
    assert Connection.objects.get().token_family not in (None, second_family)  # the first exchange's family
    with pytest.raises(InvalidGrantError):
        MemoryValidator().invalidate_authorization_code(client_id, code, request)
    assert Connection.objects.get().revoked_at is not None
    assert connection_for_token(first["access_token"], MCP) is None


def test_an_unknown_or_expired_code_revokes_nothing(admin, client_app):
    client_id, secret = client_app
    tokens = exchange(admin, client_id, secret, approve(admin, client_id, room=RoomFactory())["code"]).json()
    assert exchange(admin, client_id, secret, "not-a-code").json()["error"] == "invalid_grant"
    assert connection_for_token(tokens["access_token"], MCP) is not None


def test_denying_grants_nothing(admin, client_app):
    client_id, _secret = client_app
    room = RoomFactory()
    admin.get(f"/oauth/authorize/?{authorize_query(client_id, REDIRECT, challenge=None)}")
    response = admin.post(
        "/oauth/authorize/",
        {
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "response_type": "code",
            "state": "st-1",
            "scope": READ,
            "room": room.pk,
            "model_location": "local",
            "access": Access.RECALL,
        },
    )
    assert code_from(response["Location"])["error"] == "access_denied"
    assert not Connection.objects.exists() and not get_grant_model().objects.exists()


def test_a_deleted_room_ends_the_connection(admin, client_app):
    client_id, secret = client_app
    room = RoomFactory()
    token = exchange(admin, client_id, secret, approve(admin, client_id, room=room)["code"]).json()["access_token"]
    assert connection_for_token(token, MCP) is not None
    room.delete()
    assert connection_for_token(token, MCP) is None


def test_the_consent_page_speaks_the_households_language(admin, client_app):
    query = authorize_query(client_app[0], REDIRECT, challenge=None)
    page = admin.get(f"/oauth/authorize/?{query}", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "Home Assistant möchte das Gedächtnis des Haushalts nutzen" in page
    assert "Erlauben" in page and "Sein Sprachmodell läuft" in page and "Unbekannter Sprecher" in page


def test_a_client_made_for_another_grant_gets_no_token(client):
    """Registration takes only the authorization code flow; a client made otherwise (in the admin) still gets
    no token without a connection an admin approved."""
    Application = get_application_model()
    Application.objects.create(
        name="Robot",
        client_id="robot",
        client_secret="robot-secret",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
    )
    data = {"grant_type": "client_credentials", "client_id": "robot", "client_secret": "robot-secret"}
    response = client.post("/oauth/token/", data)
    assert response.status_code == 400 and response.json()["error"] == "unsupported_grant_type", response.content
    assert not get_access_token_model().objects.exists()


def test_the_admin_lists_connections_and_revokes_them(admin, client_app):
    client_id, secret = client_app
    room = RoomFactory(name="Kitchen")
    tokens = exchange(admin, client_id, secret, approve(admin, client_id, room=room)["code"]).json()
    listed = admin.get("/admin/connections/connection/").content.decode()
    assert "Home Assistant" in listed and "Kitchen" in listed and "active" in listed
    connection = Connection.objects.get()
    response = admin.post(
        "/admin/connections/connection/", {"action": "revoke", "_selected_action": [connection.pk]}, follow=True
    )
    assert "1 connection revoked." in response.content.decode()
    assert connection_for_token(tokens["access_token"], MCP) is None
    assert not get_access_token_model().objects.exists()
    assert "revoked" in admin.get("/admin/connections/connection/").content.decode()


def test_the_daily_clean_up_removes_what_no_connection_can_use_any_more(admin, client_app, settings):
    from django.utils.module_loading import import_string

    from justai_memory.schedules import SCHEDULES

    client_id, secret = client_app
    tokens = exchange(admin, client_id, secret, approve(admin, client_id, room=RoomFactory())["code"]).json()
    refreshed = refresh(admin, client_id, secret, tokens["refresh_token"]).json()
    old = get_refresh_token_model().objects.exclude(revoked=None)
    assert old.count() == 1  # the first refresh token, revoked by the rotation, kept to detect its replay
    long_ago = timezone.now() - timedelta(days=91)
    old.update(revoked=long_ago)
    get_access_token_model().objects.update(expires=long_ago)

    (job,) = [spec.func for spec in SCHEDULES if spec.name == "oauth.clear_expired"]
    import_string(job)()

    assert not get_refresh_token_model().objects.exclude(revoked=None).exists()
    assert not get_access_token_model().objects.exists()
    assert connection_for_token(refreshed["access_token"], MCP) is None


@pytest.mark.parametrize("allow", [True, False])
def test_a_consent_form_with_a_changed_client_id_is_refused(admin, allow):
    data = {
        "client_id": "no-such-client",
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "state": "st-1",
        "scope": READ,
        "room": RoomFactory().pk,
        "model_location": "local",
        "access": Access.RECALL,
    }
    response = admin.post("/oauth/authorize/", {**data, **({"allow": "Allow"} if allow else {})})
    assert response.status_code in (400, 401) and response.json()["error"] == "invalid_request", response.content
    assert not Connection.objects.exists() and not get_grant_model().objects.exists()


def test_a_consent_form_with_a_changed_redirect_uri_is_refused(admin, client_app):
    data = {
        "client_id": client_app[0],
        "redirect_uri": "https://evil.example/cb",
        "response_type": "code",
        "state": "st-1",
        "scope": READ,
        "room": RoomFactory().pk,
        "model_location": "local",
        "access": Access.RECALL,
        "allow": "Allow",
    }
    response = admin.post("/oauth/authorize/", data)
    assert response.status_code == 400 and response.json()["error"] == "invalid_request", response.content
    assert not Connection.objects.exists() and not get_grant_model().objects.exists()


def test_the_admin_shows_the_clients_and_the_connections(admin):
    for url in (
        "/admin/connections/client/",
        "/admin/connections/client/add/",  # where a client is registered by hand
        "/admin/connections/connection/",
    ):
        assert admin.get(url).status_code == 200, url
    home = admin.get("/admin/").content.decode()
    assert "Connected assistants" in home and "/admin/oauth2_provider/accesstoken/" not in home  # tokens hidden


def test_a_token_is_bound_at_issue_to_this_mcp_server(admin, client_app):
    """RFC 8707: a token names its resource; one issued without a resource is bound to /mcp on the origin."""
    client_id, secret = client_app
    tokens = exchange(admin, client_id, secret, approve(admin, client_id, room=RoomFactory())["code"]).json()
    assert get_access_token_model().objects.get().resource == [MCP]
    assert connection_for_token(tokens["access_token"], "http://testserver:80/mcp/") is not None  # the same URL
    for other in (
        "https://testserver/mcp",  # another scheme
        "http://localhost/mcp",  # another host
        "http://testserver:8000/mcp",  # another port
        "http://testserver/other/mcp",  # another path
        "not a url",
    ):
        assert connection_for_token(tokens["access_token"], other) is None, other
    refreshed = refresh(admin, client_id, secret, tokens["refresh_token"]).json()
    assert connection_for_token(refreshed["access_token"], MCP) is not None
    assert {tuple(t.resource) for t in get_access_token_model().objects.all()} == {(MCP,)}


def test_a_client_asking_for_another_resource_is_refused_before_the_consent_form(admin, client_app):
    query = authorize_query(client_app[0], REDIRECT, challenge=None, resource="https://other-server.example/mcp")
    response = admin.get(f"/oauth/authorize/?{query}")
    assert response.status_code == 302, response.content[:300]
    answer = code_from(response["Location"])
    assert answer["error"] == "invalid_target" and MCP in answer["error_description"] and answer["state"] == "st-1"
    ours = admin.get(f"/oauth/authorize/?{authorize_query(client_app[0], REDIRECT, challenge=None, resource=MCP)}")
    assert ours.status_code == 200  # this server's MCP resource: the consent form


def test_a_code_for_another_resource_gets_no_token(admin, client_app):
    """Refused at each step: the consent form posted with another resource gives no code, an exchange naming
    another resource no token."""
    client_id, secret = client_app
    other = "https://other-server.example/mcp"
    admin.get(f"/oauth/authorize/?{authorize_query(client_id, REDIRECT, challenge=None, scope=READ)}")
    data = {"client_id": client_id, "redirect_uri": REDIRECT, "response_type": "code", "state": "st-1", "scope": READ}
    data |= {"room": RoomFactory().pk, "model_location": "local", "access": Access.RECALL, "allow": "Allow"}
    posted = code_from(admin.post("/oauth/authorize/", {**data, "resource": other})["Location"])
    assert posted.get("error") == "invalid_target" and "code" not in posted, posted
    code = code_from(admin.post("/oauth/authorize/", data)["Location"])["code"]
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
    response = admin.post("/oauth/token/", {**body, "client_secret": secret, "resource": other})
    assert response.status_code == 400 and response.json()["error"] == "invalid_target", response.content
    assert MCP in response.json()["error_description"]
    assert not get_access_token_model().objects.exists()


def mcp_gate(authorization: str, host: bytes = b"testserver") -> tuple[bool, list[dict]]:
    """One request through the MCP server's gate (``McpAuth``): whether it reached the MCP app, and what was sent.

    The gate looks the token up in a worker thread, on its own database connection: the test's data must be
    committed (``django_db(transaction=True)``)."""
    import asyncio

    from justai_memory.mcp.auth import McpAuth

    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope)

    async def send(message):
        sent.append(message)

    async def now(fn, *args):
        return fn(*args)

    headers = [(b"host", host), (b"authorization", authorization.encode())]
    asyncio.run(McpAuth(app)({"type": "http", "scheme": "http", "path": "/mcp", "headers": headers}, None, send))
    return bool(reached), sent


@pytest.mark.django_db(transaction=True)
def test_a_token_for_another_resource_is_refused_at_the_mcp_server_with_invalid_token(admin, client_app, settings):
    client_id, secret = client_app
    token = exchange(admin, client_id, secret, approve(admin, client_id, room=RoomFactory())["code"]).json()
    bearer = f"Bearer {token['access_token']}"
    assert mcp_gate(bearer) == (True, [])
    settings.ALLOWED_HOSTS = ["testserver", "memory.example"]
    for resource, host in ((["https://other-server.example/mcp"], b"testserver"), ([MCP], b"memory.example")):
        get_access_token_model().objects.update(resource=resource)
        reached, sent = mcp_gate(bearer, host)
        assert not reached and sent[0]["status"] == 401
        assert 'error="invalid_token"' in dict(sent[0]["headers"])[b"www-authenticate"].decode()
