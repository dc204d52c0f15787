"""Consolidation runs: their stats, and the buttons that queue a run (or a dry run) in the job cluster."""

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.defaultfilters import floatformat
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.admin.base import RecordAdmin, actor_name
from memories.models import ConsolidationRun
from memories.services.consolidate import memories_consolidate_queue


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(RecordAdmin):
    """Runs are records: only the service writes them."""

    # Six columns, so that the list fits a 1,366 px screen beside its filters (eleven cut off the error); each
    # run's page shows every field.
    list_display = ["started_at", "status_line", "started_by_name", "duration", "changes", "error_short"]
    list_display_links = ["started_at"]
    list_filter = ["status", "dry_run", "started_by"]
    date_hierarchy = "started_at"

    @admin.display(description=_("status"), ordering="status")
    def status_line(self, obj):
        if obj.dry_run:
            return format_html("{}<br><small>{}</small>", obj.get_status_display(), gettext("dry run"))
        return obj.get_status_display()

    @admin.display(description=_("started by"), ordering="started_by")
    def started_by_name(self, obj):
        return actor_name(obj.started_by)

    @admin.display(description=_("duration"), ordering="duration_ms")
    def duration(self, obj):
        if obj.duration_ms is None:
            return "-"
        if obj.duration_ms < 1000:
            return gettext("%(ms)s ms") % {"ms": obj.duration_ms}
        return gettext("%(seconds)s s") % {"seconds": floatformat(obj.duration_ms / 1000, 1)}

    @admin.display(description=_("changes"))
    def changes(self, obj):
        return gettext("%(merged)s merged, %(superseded)s superseded, %(deleted)s deleted") % {
            "merged": obj.merged,
            "superseded": obj.superseded,
            "deleted": obj.deleted,
        }

    @admin.display(description=_("error"))
    def error_short(self, obj):
        """The error's first words; the run's page shows all of it."""
        return (
            format_html('<span title="{}">{}</span>', obj.error, Truncator(obj.error).chars(60)) if obj.error else "-"
        )

    def has_run_permission(self, request) -> bool:
        """Starting a run creates one: it takes the 'add' permission of consolidation runs."""
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('add', self.opts)}")

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("run/", self.admin_site.admin_view(self.run_view), name="{}_{}_run".format(*info)),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        extra_context = {"has_run_permission": self.has_run_permission(request), **(extra_context or {})}
        return super().changelist_view(request, extra_context)

    def run_view(self, request):
        """POST: queue a run (or a dry run) and link to it; an ERROR when one is already running."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_run_permission(request):
            raise PermissionDenied
        try:
            run = memories_consolidate_queue(
                started_by=Actor.admin(request.user), dry_run=request.POST.get("dry_run") == "1"
            )
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(request, queued_message(run), messages.SUCCESS)
        return redirect("admin:memories_consolidationrun_changelist")


def queued_message(run: ConsolidationRun) -> str:
    """The message that links a queued run: its row shows the stats once the job cluster has run it."""
    what = gettext("Dry run") if run.dry_run else gettext("Consolidation run")
    url = reverse("admin:memories_consolidationrun_change", args=[run.pk])
    return format_html(
        '{} <a href="{}">#{}</a> {}',
        what,
        url,
        run.pk,
        gettext("is queued; the job cluster runs it and its row shows the stats."),
    )
