"""Connections in the household admin: who may use the memory over MCP, bound to which room; revoke them here.

django-oauth-toolkit's own pages are replaced: its token and code pages are left out (tokens are stored
hashed, nothing to read there, and a connection's "Revoke" ends its tokens), and its client page is ours
(``Client``, beside the connections): where a client is registered by hand and its id and secret are shown
once, in the household's language, with the fields this server uses.
"""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from oauth2_provider.admin import ApplicationAdmin
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from connections.models import Client, Connection, State

for model in (
    get_access_token_model(),
    get_refresh_token_model(),
    get_grant_model(),
    get_id_token_model(),
    get_application_model(),
):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


class StateFilter(admin.SimpleListFilter):
    """The list by each connection's state as computed from its tokens (``ConnectionQuerySet.with_state``)."""

    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return State.choices

    def queryset(self, request, queryset):
        return queryset.filter(state=self.value()) if self.value() in State.values else queryset


@admin.register(Connection)
class ConnectionAdmin(admin.ModelAdmin):
    list_display = [
        "application",
        "room",
        "speaker_or_unknown",
        "model_location",
        "scope",
        "state_label",
        "last_used_at",
        "created_at",
    ]
    list_filter = [StateFilter, "room", "model_location", "scope"]
    list_select_related = ["application", "room", "speaker", "grant"]
    readonly_fields = [
        "application",
        "self_registered",
        "approved_by",
        "room",
        "speaker",
        "model_location",
        "scope",
        "state_label",
        "created_at",
        "last_used_at",
        "revoked_at",
        "memories",
    ]
    actions = ["revoke"]
    change_form_template = "admin/connections/connection/change_form.html"

    def get_queryset(self, request):
        return super().get_queryset(request).with_state()

    def has_add_permission(self, request):
        return False  # a connection is made on the consent page, when a client asks

    @admin.display(description=_("speaker"))
    def speaker_or_unknown(self, obj):
        return obj.speaker or _("unknown speaker")

    @admin.display(description=_("state"), ordering="state")
    def state_label(self, obj):
        return State(obj.state).label

    @admin.display(description=_("registered itself"), boolean=True)
    def self_registered(self, obj):
        return obj.application.registration_source != obj.application.RegistrationSource.MANUAL

    @admin.display(description=_("memories remembered through it"))
    def memories(self, obj):
        url = reverse("admin:memories_memory_changelist") + f"?source_ref={obj.source_ref}"
        return format_html('<a href="{}" id="connection-memories">{}</a>', url, _("show them"))

    def get_urls(self):
        revoke = self.admin_site.admin_view(self.revoke_view)
        return [path("<int:pk>/revoke/", revoke, name="connections_connection_revoke"), *super().get_urls()]

    def revoke_view(self, request, pk):
        """The change page's "Revoke" button: the connection and every token it was issued end at once."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied
        connection = get_object_or_404(Connection, pk=pk)
        if connection.revoked_at is None:
            connection.revoke()
            self.message_user(request, _("The connection was revoked: its tokens no longer work."), messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:connections_connection_change", args=[pk]))

    def render_change_form(self, request, context, *args, obj=None, **kwargs):
        context["may_revoke"] = obj is not None and obj.revoked_at is None and self.has_change_permission(request, obj)
        return super().render_change_form(request, context, *args, obj=obj, **kwargs)

    @admin.action(description=_("Revoke the selected connections"), permissions=["change"])
    def revoke(self, request, queryset):
        active = list(queryset.active())
        for connection in active:
            connection.revoke()
        self.message_user(
            request,
            ngettext("%d connection revoked.", "%d connections revoked.", len(active)) % len(active),
            messages.SUCCESS,
        )

    def delete_model(self, request, obj):
        obj.revoke()
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for connection in queryset.active():
            connection.revoke()
        super().delete_queryset(request, queryset)


@admin.register(Client)
class ClientAdmin(ApplicationAdmin):
    """django-oauth-toolkit's client page with the fields this server uses (authorization code clients) and no
    "View on site" (a client has no page of its own)."""

    view_on_site = False
    list_display = ["name", "client_id", "client_type", "registered_itself", "created"]
    list_filter = ["client_type", "registration_source"]
    fields = [
        "name",
        "client_id",
        "client_type",
        "authorization_grant_type",
        "redirect_uris",
        "client_secret",
        "hash_client_secret",
        "registration_source",
        "created",
    ]
    readonly_fields = ["registration_source", "created"]

    @admin.display(description=_("registered itself"), boolean=True)
    def registered_itself(self, obj):
        return obj.registration_source != obj.RegistrationSource.MANUAL
