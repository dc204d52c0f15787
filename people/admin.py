"""The household settings page (one row). People and rooms are administered in ``justai_memory.admin.people``."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.utils.translation import gettext_lazy as _

from people.models import Household


@admin.register(Household)
class HouseholdAdmin(admin.ModelAdmin):
    """The one settings row on one page: the list redirects to it; it can be neither added nor deleted."""

    fieldsets = [
        (_("Privacy"), {"fields": ["personal_memories_to_cloud", "redact_forgotten_in_transcripts"]}),
        (
            _("Retention (days)"),
            {"fields": ["transcript_retention_days", "sighting_retention_days", "event_retention_days"]},
        ),
    ]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        row = Household.load()
        return redirect("admin:people_household_change", row.pk)

    def response_change(self, request, obj):
        # The list is this page: stay here after saving.
        self.message_user(request, _("Settings saved."), messages.SUCCESS)
        return redirect("admin:people_household_change", obj.pk)
