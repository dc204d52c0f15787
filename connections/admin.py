"""Connections in the household admin: who may use the memory over MCP, bound to which room; revoke them here.

django-oauth-toolkit's own token and code pages are left out: tokens are stored hashed (nothing to read
there) and a connection's revoke action ends its tokens. Its client page (Applications) stays: that is
where a client is registered and its id and secret are shown once.
"""

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from oauth2_provider.models import get_access_token_model, get_grant_model, get_id_token_model, get_refresh_token_model

from connections.models import Connection

for model in (get_access_token_model(), get_refresh_token_model(), get_grant_model(), get_id_token_model()):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


@admin.register(Connection)
class ConnectionAdmin(admin.ModelAdmin):
    list_display = ["application", "room", "speaker_or_unknown", "model_location", "scope", "state", "created_at"]
    list_filter = ["room", "model_location", "scope", ("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["application", "room", "speaker", "grant"]
    readonly_fields = [
        "application",
        "approved_by",
        "room",
        "speaker",
        "model_location",
        "scope",
        "created_at",
        "revoked_at",
    ]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # a connection is made on the consent page, when a client asks

    @admin.display(description=_("speaker"))
    def speaker_or_unknown(self, obj):
        return obj.speaker or _("unknown speaker")

    @admin.display(description=_("state"))
    def state(self, obj):
        if obj.revoked_at:
            return _("revoked")
        if obj.token_family:
            return _("connected")
        if obj.grant is not None and not obj.grant.is_expired():
            return _("approved, waiting for the client")
        return _("never connected: the client did not use its code in time")

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
