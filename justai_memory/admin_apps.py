"""The household's admin site: Django's admin with the status page (justai_memory.status) as its home."""

from django.contrib.admin.apps import AdminConfig


class HouseholdAdminConfig(AdminConfig):
    """``django.contrib.admin`` with ``HouseholdAdminSite`` as ``admin.site`` (Django's documented way)."""

    default_site = "justai_memory.admin_site.HouseholdAdminSite"
