"""The OpenAPI document of the internal API: valid OpenAPI 3, every endpoint in it, readable by clients and staff."""

import re

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.urls import URLPattern
from openapi_spec_validator import validate

from justai_memory.api.main import DOCS_PERMISSION
from justai_memory.api.urls import urlpatterns

pytestmark = pytest.mark.django_db

OPENAPI = "/internal/v1/openapi.json"
DOCS = "/internal/v1/docs"
NOT_ENDPOINTS = {"openapi-json", "openapi-view", "api-root", "not-found"}


def _endpoints(client, token: str) -> dict[str, set[str]]:
    """``{"/internal/v1/conversations/{conversation_id}/turns": {"post"}, ...}``: every URL pattern, with the
    methods its 405 answer to OPTIONS allows."""
    found = {}
    for pattern in urlpatterns:
        assert isinstance(pattern, URLPattern)
        if pattern.name in NOT_ENDPOINTS:
            continue
        route = "/internal/v1/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(pattern.pattern))
        response = client.options(re.sub(r"{\w+}", "1", route), HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 405, route
        found[route] = {method.strip().lower() for method in response["Allow"].split(",")}
    return found


def test_the_document_is_valid_openapi_and_covers_every_endpoint(api, client, api_token):
    response = api.get(OPENAPI)
    assert response.status_code == 200
    document = response.json()
    validate(document)
    endpoints = _endpoints(client, api_token)
    assert len(endpoints) >= 13
    assert {path: set(methods) for path, methods in document["paths"].items()} == endpoints
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            assert operation["security"] == [{"BearerToken": []}], (method, path)
            assert operation["responses"]["400"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorOut"
            }


def test_the_document_states_the_limits(api):
    schemas = api.get(OPENAPI).json()["components"]["schemas"]
    assert schemas["RecallIn"]["properties"]["query"]["maxLength"] == 4000
    assert schemas["RecallIn"]["properties"]["limit"] == {
        "description": "How many memories to return at most (1 to 50); up to 3 memories about a recognised speaker "
        "may come in addition.",
        "default": 10,
        "maximum": 50,
        "minimum": 1,
        "title": "Limit",
        "type": "integer",
    }
    assert "episode" in schemas["RememberIn"]["properties"]["kind"]["enum"]
    assert schemas["SightingIn"]["properties"]["seen_at"]["anyOf"][0] == {"type": "string", "format": "date-time"}


def test_the_document_and_docs_need_a_token_or_staff(client, admin_client, api_token):
    assert client.get(OPENAPI, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    anonymous = client.get(DOCS)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    docs = admin_client.get(DOCS)
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
    assert admin_client.get(OPENAPI).json()["openapi"].startswith("3.")


def test_staff_need_the_view_permission_on_memories_for_the_document_and_docs(client, db):
    staff = User.objects.create_user("clerk", password="clerk-password-123", is_staff=True)
    client.force_login(staff)
    for url in (DOCS, OPENAPI):
        refused = client.get(url)
        assert refused.status_code == 403 and refused["Content-Type"].startswith("application/json"), url
        assert DOCS_PERMISSION in refused.json()["error"] and b"paths" not in refused.content
    staff.user_permissions.add(Permission.objects.get(codename="view_memory", content_type__app_label="memories"))
    staff = User.objects.get(pk=staff.pk)  # permissions are cached on the user object
    client.force_login(staff)
    assert client.get(DOCS).status_code == 200
    assert client.get(OPENAPI).json()["paths"]


def test_the_docs_page_lists_exactly_the_documents_endpoints(api):
    document = api.get(OPENAPI).json()
    documented = {(m.upper(), path) for path, methods in document["paths"].items() for m in methods}
    page = (settings.BASE_DIR / "docs" / "api.md").read_text()
    listed = set(re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/internal/v1/[^`]*)` \|", page, flags=re.MULTILINE))
    assert listed == documented


def test_the_docs_page_uses_the_installed_swagger_ui(admin_client):
    page = admin_client.get(DOCS).content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page and "cdn" not in page.lower()
