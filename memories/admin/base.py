"""What the memories admin classes share: the actor an admin user is audited as, links, record admins."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html


def memory_link(pk: int) -> str:
    return format_html('<a href="{}">#{}</a>', reverse("admin:memories_memory_change", args=[pk]), pk)


class RecordAdmin(admin.ModelAdmin):
    """Rows only services write: never added or changed by hand; deleted only where ``deletable`` says so."""

    deletable = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return self.deletable and super().has_delete_permission(request, obj)
