"""The OAuth 2.1 authorization server for MCP clients, on django-oauth-toolkit.

django-oauth-toolkit does the protocol (authorization code with PKCE, refresh-token rotation, token
revocation, RFC 8414 server metadata, RFC 9728 resource metadata, RFC 7591 dynamic registration, tokens
hashed at rest); this module adds what is ours: the consent page that binds an approval to a room, a
speaker and a model location (a ``Connection``), the link from the tokens back to that connection, and
the lookup the MCP server makes for each bearer token.
"""

import hashlib
import json
from datetime import timedelta
from typing import Annotated, Literal
from urllib.parse import parse_qs, urlparse, urlsplit

from django import forms
from django.contrib.auth.mixins import UserPassesTestMixin
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.exceptions import FatalClientError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.views import (
    AuthorizationView,
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
    OAuthProtectedResourceMetadataView,
)
from oauthlib.oauth2.rfc6749.errors import (
    CustomOAuth2Error,
    InvalidClientIdError,
    InvalidGrantError,
    UnsupportedCodeChallengeMethodError,
)
from pydantic import AfterValidator, BaseModel, Field, StringConstraints, ValidationError

from connections.models import (
    READ,
    WRITE,
    Access,
    AuthMethod,
    Connection,
    Registration,
    checksum,
    refresh_token_expiry,
)
from connections.oauth_endpoints import oauth_error
from connections.uris import redirect_uri_problem, resource_key
from justai_core.locations import ModelLocation
from people.models import Person, Room

MCP_PATH = "/mcp"
# Approving a connection is reading the household's memory as the speaker chosen on the consent page
# (any person): whoever approves needs the right to add connections and to read memories. A connection
# that may also remember and forget needs the rights to add and delete memories (else: recall only).
APPROVE_PERMISSIONS = ("connections.add_connection", "memories.view_memory")
WRITE_PERMISSIONS = ("memories.add_memory", "memories.delete_memory")
# A refresh token sent again this soon after it was rotated came with the request that rotated it (a client that
# refreshed twice at once): invalid_grant, without revoking the pair the other request was given.
ROTATED_MOMENTS_AGO = timedelta(seconds=10)
LAST_USE_PRECISION = timedelta(minutes=1)  # a connection's last use is written at most once a minute
NOT_THIS_RESOURCE = "This server issues tokens for its MCP server only: {resource}."


def oauthlib_mcp_resource(request) -> str:
    """The MCP server's URL on the origin an oauthlib request came to (django-oauth-toolkit hands oauthlib the
    Django request's META as headers, with ``X_DJANGO_OAUTH_TOOLKIT_SECURE`` when it came over https)."""
    django_request = HttpRequest()
    django_request.META = dict(request.headers)
    scheme = "https" if request.headers.get("X_DJANGO_OAUTH_TOOLKIT_SECURE") else "http"
    return f"{scheme}://{django_request.get_host()}{MCP_PATH}"


class MemoryValidator(OAuth2Validator):
    """django-oauth-toolkit's validator, with tokens tied to the connection their code was approved for."""

    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs):
        # Only what the consent page leads to: a token always belongs to a connection an admin approved.
        allowed = grant_type in ("authorization_code", "refresh_token")
        return allowed and super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def validate_response_type(self, client_id, response_type, client, request, *args, **kwargs):
        """Also PKCE's method and the resource, checked with the authorization request, before the consent form.

        PKCE: S256 only (RFC 9700 2.1.1); oauthlib would take ``plain``, or a challenge without a method, and the
        toolkit refuses them only at the code exchange, after an admin approved."""
        if getattr(request, "code_challenge", None) is not None and request.code_challenge_method != "S256":
            raise UnsupportedCodeChallengeMethodError(
                description="code_challenge_method must be S256 (plain is not accepted).", request=request
            )
        # And the resource (RFC 8707): a client asking for a token for another server is told so before the form.
        self._refuse_other_resources(request, parse_qs(urlsplit(request.uri or "").query).get("resource"))
        return super().validate_response_type(client_id, response_type, client, request, *args, **kwargs)

    def is_pkce_required(self, client_id, request):
        """PKCE (S256) is required of public clients; a confidential client (with a secret) may leave it out.

        OAuth 2.1 requires PKCE of public clients; Home Assistant's application credentials are a
        confidential client without PKCE. A code issued with a challenge always needs its verifier.
        """
        Application = get_application_model()
        application = Application.objects.filter(client_id=client_id).only("client_type").first()
        return application is None or application.client_type != Application.CLIENT_CONFIDENTIAL

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        """The client's registered redirect URIs, and only where ``connections.uris`` allows one (registered before
        the rule, or changed by hand: refused at the authorization endpoint all the same)."""
        if redirect_uri_problem(redirect_uri, admin_registered=_admin_registered(request.client)):
            return False
        return super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)

    def get_default_redirect_uri(self, client_id, request, *args, **kwargs):
        uri = super().get_default_redirect_uri(client_id, request, *args, **kwargs)
        return None if redirect_uri_problem(uri or "", admin_registered=_admin_registered(request.client)) else uri

    def validate_code(self, client_id, code, client, request, *args, **kwargs):
        """A code from the consent page, unused; two exchanges of one code run one after the other (the code's
        row is locked until the token request's transaction ends): the second finds it gone and revokes what
        the first was issued."""
        get_grant_model().objects.select_for_update().filter(code=code, application=client).first()
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            self._revoke_if_reused(code)
            return False
        # Only codes from the consent page are exchanged: each belongs to one connection.
        request.memory_connection = (
            Connection.objects.active().select_related("grant").filter(grant__code=code, application=client).first()
        )
        if request.memory_connection is None:
            return False
        self._refuse_other_resources(request, request.memory_connection.grant.resource)
        return True

    def _revoke_if_reused(self, code) -> None:
        """RFC 6749 4.1.2: a code used a second time revokes every token issued from it (its refresh family,
        and with it the connection): whoever uses it again may have stolen it. Committed with the token
        request's answer, ``invalid_grant``."""
        if isinstance(code, str) and code:
            with transaction.atomic():
                for connection in Connection.objects.active().filter(
                    code_checksum=checksum(code), token_family__isnull=False
                ):
                    connection.revoke()

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs):
        """A code gone although locked (a connection revoked at the same moment): what it was issued is revoked."""
        try:
            super().invalidate_authorization_code(client_id, code, request, *args, **kwargs)
        except InvalidGrantError:
            self._revoke_if_reused(code)
            raise

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs):
        """A live refresh token of an active connection.

        Two refreshes with one token run one after the other: its row is locked until the token request's
        transaction ends. The second finds it rotated a moment ago (``ROTATED_MOMENTS_AGO``) and is
        ``invalid_grant`` while the first's new pair stays live: a client that refreshed twice at once keeps
        its connection. Sent again later, a rotated token revokes its whole family (the toolkit's reuse
        protection, in ``super()``): whoever sends it may have stolen it."""
        RefreshToken = get_refresh_token_model()
        token_checksum = hashlib.sha256(refresh_token.encode()).hexdigest()
        token = RefreshToken.objects.select_for_update().filter(token_checksum=token_checksum).order_by("-pk").first()
        if (
            token is not None
            and token.revoked is not None
            and token.revoked > timezone.now() - ROTATED_MOMENTS_AGO
            and get_access_token_model().objects.filter(source_refresh_token=token).exists()
        ):
            return False
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        token = request.refresh_token_instance
        if token.created <= timezone.now() - refresh_token_expiry():
            return False  # unused for longer than a refresh token lasts (the daily clean-up deletes it)
        if not Connection.objects.active().filter(token_family=token.token_family).exists():
            return False
        self._refuse_other_resources(request, request.refresh_token_instance.resource)
        return True

    def _refuse_other_resources(self, request, granted) -> None:
        """RFC 8707: a token is only for this MCP server. A resource the client names at the token endpoint, or
        named when it was authorized (``granted``), that is not /mcp on the origin asked is ``invalid_target``."""
        ours = oauthlib_mcp_resource(request)
        named = getattr(request, "resource", None)
        named = [named] if isinstance(named, str) else list(named or [])
        named += [value for key, value in getattr(request, "decoded_body", None) or [] if key == "resource"]
        if any(resource_key(resource) != resource_key(ours) for resource in [*named, *(granted or [])] if resource):
            raise CustomOAuth2Error(
                error="invalid_target", description=NOT_THIS_RESOURCE.format(resource=ours), request=request
            )

    def _check_and_set_request_resource(self, request):
        """A token names the resource it is for (RFC 8707): the MCP server on the origin the client asked, in its
        canonical form, whatever form the client named (``validate_code`` and ``validate_refresh_token`` refused
        any other resource) or if it named none."""
        request.resource = []  # compared already; the toolkit's own comparison is of the strings sent
        super()._check_and_set_request_resource(request)
        request.resource = [oauthlib_mcp_resource(request)]

    def _create_authorization_code(self, request, code, expires=None):
        """The code keeps the canonical resource (``validate_response_type`` refused any other), never the one sent."""
        if request.resource:
            request.resource = [oauthlib_mcp_resource(request)]
        return super()._create_authorization_code(request, code, expires)

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        refresh_token = super()._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)
        connection = getattr(request, "memory_connection", None)
        if connection is not None and previous_refresh_token is None:
            # The first exchange of the code starts the family; a second one at the same moment starts none.
            Connection.objects.filter(pk=connection.pk, token_family__isnull=True).update(
                token_family=refresh_token.token_family
            )
        return refresh_token


def _admin_registered(application) -> bool:
    return application is not None and application.registration_source == application.RegistrationSource.MANUAL


def connection_for_token(raw_token: str, resource: str) -> tuple[Connection, frozenset[str]] | None:
    """The active connection a bearer token was issued for, and the token's scopes; None for any other token.

    The token must be unexpired, issued for ``resource`` (this MCP server's URL as the request reached it:
    RFC 8707, scheme, host, port and path all compared) and belong to a connection that was not revoked.
    Every token is bound to a resource at issue (``MemoryValidator``); one without (issued before that, an
    hour at most) was issued here for this server.
    """
    checksum = hashlib.sha256(raw_token.encode()).hexdigest()
    token = get_access_token_model().objects.filter(token_checksum=checksum, expires__gt=timezone.now()).first()
    wanted = resource_key(resource)
    if token is None or wanted is None:
        return None
    if any(resource_key(audience) != wanted for audience in token.resource):
        return None
    family = get_refresh_token_model().objects.filter(access_token=token).values("token_family")
    connection = Connection.objects.active().select_related("room", "speaker").filter(token_family__in=family).first()
    if connection is None:
        return None
    now = timezone.now()
    if connection.last_used_at is None or connection.last_used_at < now - LAST_USE_PRECISION:
        Connection.objects.filter(pk=connection.pk).update(last_used_at=now)
        connection.last_used_at = now
    return connection, frozenset(token.scope.split()) & connection.scopes


class ConsentForm(AllowForm):
    """django-oauth-toolkit's approval form plus what the household decides: room, speaker, model location, access."""

    room = forms.ModelChoiceField(Room.objects.all(), label=_("Room"), help_text=_("The room this client speaks in."))
    speaker = forms.ModelChoiceField(
        Person.objects.all(),
        required=False,
        label=_("Speaker"),
        empty_label=_("Unknown speaker"),
        help_text=_(
            "Who speaks through it. Unknown: only shared memories and this room's reach it, never private ones."
        ),
    )
    model_location = forms.ChoiceField(
        choices=ModelLocation.choices,
        initial=ModelLocation.CLOUD,
        label=_("Its language model runs"),
        help_text=_("Cloud: the household's personal memories stay out of its answers (household settings)."),
    )
    access = forms.ChoiceField(choices=Access.choices, label=_("It may"))

    def __init__(self, *args, requested_scopes=(), may_write=True, **kwargs):
        super().__init__(*args, **kwargs)
        if (requested_scopes and WRITE not in requested_scopes) or not may_write:
            self.fields["access"].choices = [(Access.RECALL, Access.RECALL.label)]
        self.fields["access"].initial = Access.RECALL  # the narrowest first: more is the admin's choice

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("access"):
            cleaned["scope"] = cleaned["access"]  # what is granted is what the admin chose
        return cleaned


class ConsentView(UserPassesTestMixin, AuthorizationView):
    """The authorization endpoint: an admin approves a client for a room, a speaker and a model location.

    Not logged in: the admin login, then back here. A logged-in user without the right to add
    connections gets a 403. Errors that cannot go back to the client (unknown client, unregistered
    redirect URI) are answered here: JSON for programs, a page for a browser.
    """

    template_name = "connections/consent.html"
    form_class = ConsentForm
    http_method_names = ["get", "post", "head", "options"]  # FormView's PUT would post the form

    def test_func(self):
        user = self.request.user
        return user.is_active and user.is_staff and user.has_perms(APPROVE_PERMISSIONS)

    def get_login_url(self):
        return reverse("admin:login")

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs()
        scope = self.request.POST.get("scope") or " ".join(self.oauth2_data.get("scopes", []))
        kwargs["requested_scopes"] = scope.split()
        kwargs["may_write"] = self.request.user.has_perms(WRITE_PERMISSIONS)
        return kwargs

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        application = context.get("application")
        if application is None and self.request.method == "POST":
            application = get_application_model().objects.filter(client_id=self.request.POST.get("client_id")).first()
        context.update(
            application=application,
            self_registered=application is not None
            and application.registration_source != application.RegistrationSource.MANUAL,
            active_connections=(
                Connection.objects.active().filter(application=application).select_related("room", "speaker")
                if application is not None
                else []
            ),
            redirect_host=urlparse(context.get("redirect_uri") or self.request.POST.get("redirect_uri", "")).netloc,
            title=_("Connect an assistant"),
            site_header=_("Household memory"),
        )
        return context

    def form_valid(self, form):
        application = get_application_model().objects.filter(client_id=form.cleaned_data["client_id"]).first()
        if application is None:  # the form's hidden client_id was changed: nothing to send the answer back to
            return self.error_response(FatalClientError(error=InvalidClientIdError()), None)
        if not form.cleaned_data.get("allow"):
            return super().form_valid(form)
        with transaction.atomic():
            # Approvals of one client run one after the other (two clicks on Allow at once): the later one finds
            # the earlier's connection and replaces it, as it would a minute later.
            get_application_model().objects.select_for_update().filter(pk=application.pk).first()
            response = super().form_valid(form)
            code = parse_qs(urlparse(getattr(self, "success_url", "") or "").query).get("code")
            if code:
                # The same client for the same room and speaker again: the new approval replaces the earlier.
                for earlier in Connection.objects.active().filter(
                    application=application, room=form.cleaned_data["room"], speaker=form.cleaned_data["speaker"]
                ):
                    earlier.revoke()
                Connection.objects.create(
                    application=application,
                    approved_by=self.request.user,
                    room=form.cleaned_data["room"],
                    speaker=form.cleaned_data["speaker"],
                    model_location=form.cleaned_data["model_location"],
                    scope=form.cleaned_data["access"],
                    grant=get_grant_model().objects.get(code=code[0], application=application),
                    code_checksum=checksum(code[0]),
                )
        return response

    def error_response(self, error, application, **kwargs):
        response = super().error_response(error, application, **kwargs)
        if response.status_code >= 400 and "text/html" not in self.request.headers.get("Accept", ""):
            return oauth_error(
                error.oauthlib_error.error, error.oauthlib_error.description, status=response.status_code
            )
        return response


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("holds a NUL character")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]


def _redirect_allowed(uri: str) -> str:
    """A self-registered client's redirect URI, by the MCP authorization spec's rule (``connections.uris``)."""
    problem = redirect_uri_problem(uri)
    if problem:
        raise ValueError(f"{uri!r} {problem}")
    return uri


class ClientMetadata(BaseModel):
    """What a client may register (RFC 7591): the authorization code flow, a few redirect URIs, a short name.

    Other metadata fields are ignored, as the RFC allows; django-oauth-toolkit registers the client.
    """

    redirect_uris: list[
        Annotated[Text, StringConstraints(min_length=1, max_length=500), AfterValidator(_redirect_allowed)]
    ] = Field(min_length=1, max_length=10)
    client_name: Annotated[Text, StringConstraints(max_length=200)] = ""
    grant_types: list[Literal["authorization_code", "refresh_token"]] = ["authorization_code", "refresh_token"]
    response_types: list[Literal["code"]] = ["code"]
    token_endpoint_auth_method: Literal["none", "client_secret_basic", "client_secret_post"] = "client_secret_basic"


def _invalid_metadata(description: str) -> JsonResponse:
    return JsonResponse({"error": "invalid_client_metadata", "error_description": description}, status=400)


def _client_metadata(request) -> ClientMetadata | JsonResponse:
    """The request's client metadata, or the ``invalid_client_metadata`` answer naming each field at fault."""
    try:
        return ClientMetadata.model_validate_json(request.body or b"null")
    except ValidationError as exc:
        return _invalid_metadata(
            "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors(include_url=False))
        )


def _as_registered(response, metadata: ClientMetadata | None):
    """django-oauth-toolkit's registration answer with what RFC 7591 3.2.1 asks besides: when the client id was
    issued, that the secret never expires, and the auth method granted: the one the client registered or updated
    (``metadata``), stored (``Registration``) for a later read (the token endpoint takes a confidential client's
    secret in the Basic header or in the body alike)."""
    if response.status_code >= 300:
        return response
    body = json.loads(response.content)
    application = get_application_model().objects.filter(client_id=body.get("client_id")).first()
    if application is not None:
        body["client_id_issued_at"] = int(application.created.timestamp())
        if metadata is not None:
            Registration.objects.update_or_create(
                application=application,
                defaults={"token_endpoint_auth_method": metadata.token_endpoint_auth_method},
            )
        if body.get("token_endpoint_auth_method") != AuthMethod.NONE:
            registration = Registration.objects.filter(application=application).first()
            body["token_endpoint_auth_method"] = (
                registration.token_endpoint_auth_method if registration else AuthMethod.BASIC
            )
    if "client_secret" in body:
        body["client_secret_expires_at"] = 0
    return JsonResponse(body, status=response.status_code)


class RegistrationView(DynamicClientRegistrationView):
    """RFC 7591 registration, for the metadata this server can serve; anything else is ``invalid_client_metadata``."""

    def post(self, request, *args, **kwargs):
        metadata = _client_metadata(request)
        if isinstance(metadata, JsonResponse):
            return metadata
        return _as_registered(super().post(request, *args, **kwargs), metadata)


class RegistrationManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592: a registered client reads, updates or deletes its registration with its registration token.

    An update is held to the same metadata and limits as a registration, and cannot turn a client without a
    secret into one with a secret or back (it would have none to authenticate with): that is a new client.
    """

    def get(self, request, client_id, *args, **kwargs):
        return _as_registered(super().get(request, client_id, *args, **kwargs), None)

    def put(self, request, client_id, *args, **kwargs):
        auth = self._authenticate_registration_request(request, client_id)
        if isinstance(auth, HttpResponse):
            return auth
        metadata = _client_metadata(request)
        if isinstance(metadata, JsonResponse):
            return metadata
        public = metadata.token_endpoint_auth_method == "none"
        if public != (auth.application.client_type == get_application_model().CLIENT_PUBLIC):
            return _invalid_metadata(
                "token_endpoint_auth_method: a client with a secret cannot become one without, nor the other way "
                "round; register a new client."
            )
        return _as_registered(super().put(request, client_id, *args, **kwargs), metadata)


class ResourceMetadataView(OAuthProtectedResourceMetadataView):
    """RFC 9728 metadata: the protected resource is the MCP server, at either well-known path."""

    def get_resource(self, request):
        return request.build_absolute_uri(MCP_PATH)  # on the host the request came to

    def get_resource_name(self):
        return "justai-memory"


__all__ = [
    "READ",
    "WRITE",
    "ConsentView",
    "MemoryValidator",
    "RegistrationManagementView",
    "RegistrationView",
    "ResourceMetadataView",
    "connection_for_token",
]
