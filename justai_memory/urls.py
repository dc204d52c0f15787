from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from oauth2_provider import views as oauth_views

from connections.oauth import (
    ConsentView,
    RegistrationManagementView,
    RegistrationView,
    ResourceMetadataView,
)
from connections.oauth_endpoints import TokenView, oauth_endpoint

# The OAuth 2.1 server of the MCP endpoint (connections/oauth.py): django-oauth-toolkit's views under
# oauth/, the consent page and the token endpoint's transaction ours, each endpoint answering errors in RFC 6749
# JSON (connections/oauth_endpoints.py); the metadata documents at the root, where RFC 8414 and RFC 9728 put them.
oauth_patterns = [
    path("oauth/authorize/", oauth_endpoint(ConsentView.as_view(), pages_for_browsers=True), name="authorize"),
    path("oauth/token/", oauth_endpoint(TokenView.as_view()), name="token"),
    path("oauth/revoke/", oauth_endpoint(oauth_views.RevokeTokenView.as_view()), name="revoke-token"),
    path("oauth/register/", oauth_endpoint(RegistrationView.as_view()), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        oauth_endpoint(RegistrationManagementView.as_view()),
        name="dcr-register-management",
    ),
    # django-oauth-toolkit's own client pages are not served: a client's address (its get_absolute_url, where the
    # admin's "View on site" leads) is its page in the household admin.
    path(
        "oauth/clients/<int:object_id>/",
        RedirectView.as_view(pattern_name="admin:connections_client_change"),
        name="detail",
    ),
    path(
        ".well-known/oauth-authorization-server",
        oauth_views.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path(".well-known/oauth-protected-resource", ResourceMetadataView.as_view(), name="oauth-resource-metadata"),
    path(
        ".well-known/oauth-protected-resource/mcp",
        ResourceMetadataView.as_view(),
        name="oauth-resource-metadata-path",
    ),
]

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index"), name="root"),
    path("admin/", admin.site.urls),
    path("internal/v1/", include(("justai_memory.api.urls", "internal"))),
    path("", include((oauth_patterns, "oauth2_provider"))),
]

# Errors Django answers outside any view (a foreign Host, a middleware's error): JSON on API paths.
handler400 = "justai_memory.edge.answers.bad_request"
handler404 = "justai_memory.edge.answers.not_found"
handler500 = "justai_memory.edge.answers.server_error"
