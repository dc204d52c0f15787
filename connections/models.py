"""A connection: an OAuth client (e.g. Home Assistant) that an admin allowed to use the memory over MCP.

The admin approves a client once, on the consent page, and binds that approval to a room, an optional
speaker and where the client's model runs; the client then only sends its bearer token, and every tool
call is answered as that room, speaker and model location. The OAuth machinery (clients, codes, hashed
tokens, refresh) is django-oauth-toolkit's; a connection is tied to it by the refresh-token family its
authorization code started (``token_family``: rotated refresh tokens keep it).
"""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Case, Exists, OuterRef, Q, Value, When
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.models import Application, get_grant_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings

from justai_core.locations import ModelLocation

SOURCE_KIND = "connection"  # a memory's source_ref "connection:<id>": remembered through that connection
READ = "memory:read"
WRITE = "memory:write"


def checksum(value: str) -> str:
    """How a code is kept once used: its SHA-256 (as django-oauth-toolkit keeps tokens)."""
    return hashlib.sha256(value.encode()).hexdigest()


class Access(models.TextChoices):
    """What a connection may do: the OAuth scopes an admin grants on the consent page."""

    RECALL = READ, _("Recall only")
    ALL = f"{READ} {WRITE}", _("Recall, remember and forget")


class State(models.TextChoices):
    """Where a connection stands, from its own row and its tokens (``ConnectionQuerySet.with_state``)."""

    ACTIVE = "active", _("active")
    WAITING = "waiting", _("approved, waiting for the client")
    NEVER_CONNECTED = "never_connected", _("never connected: the client did not use its code in time")
    EXPIRED = "expired", _("expired: the client did not renew its token in time")
    REVOKED = "revoked", _("revoked")


def refresh_token_expiry() -> timedelta:
    """How long a refresh token lasts unused (``OAUTH_REFRESH_TOKEN_DAYS``): each use replaces it by a new one."""
    return timedelta(seconds=oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS)


class ConnectionQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)

    def with_state(self):
        """Each connection with its ``state`` (a ``State``) computed in the query, from its tokens.

        Active: a refresh token of its family is neither revoked nor past its lifetime. Revoked: revoked
        here, or every token of the family was (an RFC 7009 revocation, a replayed refresh token, a reused
        code). Expired: its last refresh token outlived its lifetime unused, or is gone."""
        tokens = get_refresh_token_model().objects.filter(token_family=OuterRef("token_family"))
        unrevoked = tokens.filter(revoked__isnull=True)
        fresh = unrevoked.filter(created__gt=timezone.now() - refresh_token_expiry())
        waiting = Q(grant__isnull=False, grant__expires__gt=timezone.now())
        return self.annotate(
            state=Case(
                When(revoked_at__isnull=False, then=Value(State.REVOKED)),
                When(
                    token_family__isnull=True,
                    then=Case(When(waiting, then=Value(State.WAITING)), default=Value(State.NEVER_CONNECTED)),
                ),
                When(Exists(fresh), then=Value(State.ACTIVE)),
                When(Exists(unrevoked), then=Value(State.EXPIRED)),
                When(Exists(tokens), then=Value(State.REVOKED)),
                default=Value(State.EXPIRED),
                output_field=models.CharField(),
            )
        )


class Connection(models.Model):
    """One approval of an OAuth client, bound to a room, an optional speaker and a model location."""

    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL,
        on_delete=models.CASCADE,
        related_name="memory_connections",
        verbose_name=_("client"),
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+", verbose_name=_("approved by")
    )
    # A deleted room or person ends the connection: it must not go on as "no speaker" or another room.
    room = models.ForeignKey("people.Room", on_delete=models.CASCADE, related_name="+", verbose_name=_("room"))
    speaker = models.ForeignKey(
        "people.Person",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("speaker"),
        help_text=_("Who speaks through this client; empty: an unknown speaker (shared and room memories only)."),
    )
    model_location = models.CharField(
        _("model location"),
        max_length=8,
        choices=ModelLocation.choices,
        help_text=_("Where the client's language model runs; cloud models get no personal memories unless allowed."),
    )
    scope = models.CharField(_("access"), max_length=64, choices=Access.choices)
    # The authorization code while it waits to be exchanged, then the refresh-token family it started.
    grant = models.OneToOneField(
        oauth2_settings.GRANT_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", editable=False
    )
    token_family = models.UUIDField(null=True, blank=True, unique=True, editable=False)
    # SHA-256 of the authorization code, kept after the code is used: a second use of it revokes the connection.
    code_checksum = models.CharField(max_length=64, blank=True, default="", db_index=True, editable=False)
    created_at = models.DateTimeField(_("approved at"), auto_now_add=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)

    objects = ConnectionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("connection")
        verbose_name_plural = _("connections")

    def __str__(self):
        return f"{self.application.name} → {self.room.name}"

    @property
    def source_ref(self) -> str:
        """The ``source_ref`` of the memories remembered through this connection (``connection:<id>``)."""
        return f"{SOURCE_KIND}:{self.pk}"

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.scope.split())

    def revoke(self) -> None:
        """End the connection: its refresh tokens (and with them their access tokens) are revoked, and a code
        still waiting to be exchanged is deleted."""
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        if self.grant_id is not None:
            get_grant_model().objects.filter(pk=self.grant_id).delete()
        if self.token_family is not None:
            for refresh_token in get_refresh_token_model().objects.filter(
                token_family=self.token_family, revoked__isnull=True
            ):
                refresh_token.revoke()


class AuthMethod(models.TextChoices):
    """How a client sends its secret to the token endpoint (RFC 7591 ``token_endpoint_auth_method``)."""

    NONE = "none"
    BASIC = "client_secret_basic"
    POST = "client_secret_post"


class Registration(models.Model):
    """What a client registered itself with (RFC 7591) beyond django-oauth-toolkit's application: the auth method it
    chose, answered back on RFC 7592's read and update. A client without a row (an admin registered it) has the
    RFC's default, ``client_secret_basic``, or ``none`` without a secret."""

    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="registration"
    )
    token_endpoint_auth_method = models.CharField(max_length=32, choices=AuthMethod.choices)

    def __str__(self):
        return f"{self.application_id}: {self.token_endpoint_auth_method}"


class Client(Application):
    """An OAuth client (django-oauth-toolkit's application, not swapped), shown in the household admin beside its
    connections. Its ``get_absolute_url`` (the toolkit's ``oauth2_provider:detail``) leads to that admin page."""

    class Meta:
        proxy = True
        verbose_name = _("client")
        verbose_name_plural = _("clients")
