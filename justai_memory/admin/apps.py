"""The household's admin site: Django's admin with the status page (justai_memory.admin.status) as its home."""

from importlib import import_module

from django.contrib.admin.apps import AdminConfig

# The model admins of this package, registered once every app's own admin module is (the memory admin is
# registered again with the recall preview, django-q2's lists are narrowed).
REGISTRATIONS = (
    "justai_memory.admin.people",
    "justai_memory.admin.recall_preview",
    "justai_memory.admin.jobs",
    "justai_memory.admin.users",
)


class HouseholdAdminConfig(AdminConfig):
    """``django.contrib.admin`` with ``HouseholdAdminSite`` as ``admin.site`` (Django's documented way)."""

    default_site = "justai_memory.admin.site.HouseholdAdminSite"

    def ready(self):
        super().ready()  # autodiscover: each installed app's admin module
        for module in REGISTRATIONS:
            import_module(module)
