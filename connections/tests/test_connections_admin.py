"""What the household admin sees of a connection and can do with it: its real state, its last use, "Revoke",
one connection per client, room and speaker, the memories written through it; the consent page and the
client pages in the household's language."""

import re
from datetime import timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model

from connections.models import READ, WRITE, Access, Client, Connection
from connections.oauth import ROTATED_MOMENTS_AGO, connection_for_token
from connections.tests.oauth_flow import authorize_query
from connections.tests.test_oauth import MCP, REDIRECT, admin, approve, client_app, exchange, refresh  # noqa: F401
from justai_memory.admin.trail import source_trail
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db

LIST = "/admin/connections/connection/"


def state(admin):  # noqa: F811
    return Connection.objects.with_state().get().state


def connected(admin, client_app, **approval):  # noqa: F811
    client_id, secret = client_app
    room = approval.pop("room", None) or RoomFactory(name="Kitchen")
    return exchange(admin, client_id, secret, approve(admin, client_id, room=room, **approval)["code"]).json()


def test_the_list_shows_each_connections_real_state_and_its_last_use(admin, client_app):  # noqa: F811
    client_id, secret = client_app
    tokens = connected(admin, client_app)
    assert state(admin) == "active" and Connection.objects.get().last_used_at is None
    assert connection_for_token(tokens["access_token"], MCP) is not None
    last_used = Connection.objects.get().last_used_at
    assert last_used is not None
    listed = admin.get(LIST).content.decode()
    assert "active" in listed and "Last used" in listed

    # Revoked by the client (RFC 7009): every token of the family is gone, the list says so.
    response = admin.post(
        "/oauth/revoke/", {"token": tokens["refresh_token"], "client_id": client_id, "client_secret": secret}
    )
    assert response.status_code == 200
    assert state(admin) == "revoked" and "revoked" in admin.get(LIST).content.decode()


def test_a_replayed_refresh_token_shows_the_connection_revoked(admin, client_app):  # noqa: F811
    client_id, secret = client_app
    tokens = connected(admin, client_app)
    refresh(admin, client_id, secret, tokens["refresh_token"])
    rotated = get_refresh_token_model().objects.exclude(revoked=None)
    rotated.update(revoked=timezone.now() - ROTATED_MOMENTS_AGO - timedelta(seconds=1))  # not a double refresh
    replay = refresh(admin, client_id, secret, tokens["refresh_token"])  # the old one again: its family ends
    assert replay.status_code == 400
    assert state(admin) == "revoked"


def test_a_connection_unused_for_longer_than_a_refresh_token_lasts_is_expired(admin, client_app, settings):  # noqa: F811
    client_id, secret = client_app
    tokens = connected(admin, client_app)
    get_refresh_token_model().objects.update(created=timezone.now() - timedelta(days=91))
    assert state(admin) == "expired"
    assert "expired" in admin.get(LIST).content.decode()
    assert refresh(admin, client_id, secret, tokens["refresh_token"]).json()["error"] == "invalid_grant"
    get_refresh_token_model().objects.all().delete()  # the daily clean-up took it
    assert state(admin) == "expired"


def test_revoke_on_the_connections_page_ends_every_token(admin, client_app):  # noqa: F811
    tokens = connected(admin, client_app)
    connection = Connection.objects.get()
    page = admin.get(f"{LIST}{connection.pk}/change/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert 'id="revoke-form"' in page and "Widerrufen" in page
    assert admin.get(f"{LIST}{connection.pk}/revoke/").status_code == 405  # a GET changes nothing
    response = admin.post(f"{LIST}{connection.pk}/revoke/")
    assert response.status_code == 302
    assert connection_for_token(tokens["access_token"], MCP) is None
    assert not get_access_token_model().objects.exists()
    assert not get_refresh_token_model().objects.filter(revoked=None).exists()
    assert state(admin) == "revoked"
    assert 'id="revoke-form"' not in admin.get(f"{LIST}{connection.pk}/change/").content.decode()


def test_revoke_needs_the_right_to_change_connections(client, admin, client_app, django_user_model):  # noqa: F811
    from django.contrib.auth.models import Permission

    tokens = connected(admin, client_app)
    viewer = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_connection"))
    client.force_login(viewer)
    pk = Connection.objects.get().pk
    assert 'id="revoke-form"' not in client.get(f"{LIST}{pk}/change/").content.decode()
    assert client.post(f"{LIST}{pk}/revoke/").status_code == 403
    assert connection_for_token(tokens["access_token"], MCP) is not None


def test_approving_the_same_client_for_the_same_room_and_speaker_replaces_the_earlier_connection(
    admin,  # noqa: F811
    client_app,  # noqa: F811
):
    kitchen, anna = RoomFactory(name="Kitchen"), PersonFactory(name="Anna")
    first = connected(admin, client_app, room=kitchen, speaker=anna)
    other_room = connected(admin, client_app, room=RoomFactory(name="Hall"), speaker=anna)
    query = authorize_query(client_app[0], REDIRECT, challenge=None)
    page = admin.get(f"/oauth/authorize/?{query}").content.decode()
    assert 'id="active-connections"' in page and "Kitchen (Anna)" in page and "Hall (Anna)" in page

    second = connected(admin, client_app, room=kitchen, speaker=anna)
    assert connection_for_token(first["access_token"], MCP) is None  # replaced: its tokens ended
    assert connection_for_token(second["access_token"], MCP) is not None
    assert connection_for_token(other_room["access_token"], MCP) is not None  # another room stays
    assert Connection.objects.active().count() == 2


def test_the_consent_form_starts_at_the_narrowest_access_and_says_who_registered_the_client(admin, client):  # noqa: F811
    registered = client.post(
        "/oauth/register/",
        {
            "client_name": "Home Assistant",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "client_secret_post",
        },
        content_type="application/json",
    ).json()
    query = authorize_query(registered["client_id"], REDIRECT, challenge=None, scope=f"{READ} {WRITE}")
    page = admin.get(f"/oauth/authorize/?{query}", HTTP_ACCEPT_LANGUAGE="de")
    form = page.context["form"]
    assert form["access"].value() == Access.RECALL and form["model_location"].value() == "cloud"
    html = page.content.decode()
    assert 'id="self-registered"' in html and "selbst registriert" in html and "Home Assistant" in html


def test_a_client_an_admin_registered_is_not_called_self_registered(admin, client_app):  # noqa: F811
    page = admin.get(f"/oauth/authorize/?{authorize_query(client_app[0], REDIRECT, challenge=None)}").content.decode()
    assert 'id="registered-by-admin"' in page and 'id="self-registered"' not in page


def test_the_consent_page_speaks_to_the_admin_as_sie(admin, client_app):  # noqa: F811
    page = admin.get(
        f"/oauth/authorize/?{authorize_query(client_app[0], REDIRECT, challenge=None)}", HTTP_ACCEPT_LANGUAGE="de"
    ).content.decode()
    assert "Nach Ihrer Entscheidung kehrt Ihr Browser" in page and "Fahren Sie nur fort" in page
    for informal in ("deiner", " dein ", "Fahre ", " du "):
        assert informal not in page, informal


def test_memories_remembered_through_a_connection_lead_back_to_it(admin, client_app):  # noqa: F811
    connected(admin, client_app)
    connection = Connection.objects.get()
    assert connection.source_ref == f"connection:{connection.pk}"
    trail = source_trail(connection.source_ref)
    assert f"/admin/connections/connection/{connection.pk}/change/" in trail and "Home Assistant" in trail
    page = admin.get(f"{LIST}{connection.pk}/change/").content.decode()
    assert f"/admin/memories/memory/?source_ref=connection:{connection.pk}" in page
    assert admin.get(f"/admin/memories/memory/?source_ref=connection:{connection.pk}").status_code == 200
    source_ref = connection.source_ref
    connection.delete()
    assert "deleted" in source_trail(source_ref)


def test_the_client_pages_are_the_households_and_have_no_view_on_site(admin, client_app):  # noqa: F811
    application = get_application_model().objects.get()
    assert admin.get("/admin/oauth2_provider/application/").status_code == 404  # replaced by ours
    listed = admin.get("/admin/connections/client/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "Home Assistant" in listed and "Gerätetyp" in listed and "Selbst registriert" in listed
    page = admin.get(f"/admin/connections/client/{application.pk}/change/", HTTP_ACCEPT_LANGUAGE="it")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Tipo di client" in html and "Indirizzi di reindirizzamento" in html and "Riservato" in html
    assert "View on site" not in html and "Vedi sul sito" not in html
    for model in (Client, get_application_model()):  # "View on site" by its address: the client's admin page
        content_type = ContentType.objects.get_for_model(model, for_concrete_model=False)
        shortcut = admin.get(f"/admin/r/{content_type.pk}/{application.pk}/", follow=True)
        assert shortcut.status_code == 200 and shortcut.redirect_chain[-1][0].endswith(
            f"/admin/connections/client/{application.pk}/change/"
        )
    add = admin.get("/admin/connections/client/add/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "Weiterleitungsadressen" in add and "Geräte-Geheimnis" in add


def test_the_list_filters_by_state(admin, client_app):  # noqa: F811
    live = connected(admin, client_app, room=RoomFactory(name="Kitchen"))
    connected(admin, client_app, room=RoomFactory(name="Hall"))
    Connection.objects.get(room__name="Hall").revoke()

    def rooms(state):
        page = admin.get(f"{LIST}?state={state}").content.decode()
        return re.findall(r'<td class="field-room[^"]*">([^<]*)</td>', page)

    assert rooms("active") == ["Kitchen"] and rooms("revoked") == ["Hall"] and rooms("expired") == []
    assert connection_for_token(live["access_token"], MCP) is not None
