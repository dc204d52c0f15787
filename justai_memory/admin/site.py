"""The admin site of the household: its home page is the status page, its titles are translated."""

from django.contrib import admin
from django.http import JsonResponse
from django.urls import path
from django.utils.translation import gettext_lazy as _


class HouseholdAdminSite(admin.AdminSite):
    site_header = _("Household memory")
    site_title = _("Household memory")
    index_title = _("Status")
    index_template = "admin/status_index.html"
    # No model list on the left of every page: the lists need the width (a 1,366 px screen has room for
    # the filters and the columns, not for a third panel); the home page and the breadcrumbs lead everywhere.
    enable_nav_sidebar = False

    def get_urls(self):
        return [path("status.json", self.admin_view(self.status_json), name="status_json"), *super().get_urls()]

    def index(self, request, extra_context=None):
        """The status page above the list of models: health, extractions, consolidation, charts."""
        from justai_memory.admin.status import admin_status

        return super().index(request, {"status": admin_status(), **(extra_context or {})})

    def status_json(self, request):
        """``GET /internal/v1/health``'s report for a logged-in admin (the API itself takes a bearer token)."""
        from justai_memory.edge.health import health_report

        body, status = health_report()
        return JsonResponse(body, status=status)
