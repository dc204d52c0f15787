"""The job cluster's lists in the admin (django-q2's schedules, done and failed jobs) narrowed to fit a laptop.

django-q2's own list columns (the function's dotted path, the cluster, the repeats) made these lists wider
than a 1,366 px screen beside their filters; each job's page still shows every field.
"""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django_q import admin as q_admin
from django_q.models import Failure, Schedule, Success

from memories.models import ConsolidationRun
from transcripts.models import Conversation, local_time

# The jobs and schedules this service queues, by their stable names (justai_memory.schedules, the services'
# task names "<name>:<id>"), in words.
JOB_WORDS = {
    "memory.extract": _("reading a conversation"),
    "memory.consolidate": _("consolidating memories"),
    "memory.extract_sweep": _("looking for conversations not yet read"),
    "memory.extract_resume": _("reading conversations that waited for the model"),
    "transcripts.purge": _("deleting transcripts past their retention"),
    "oauth.clear_expired": _("deleting expired connection tokens"),
}


def job_words(name: str) -> str:
    """A job as a person recognises it: what it does and on what ('Reading: Gespräch mit Julia, 7.12.2026 10:15')."""
    kind, _sep, ref = (name or "").partition(":")
    what = JOB_WORDS.get(kind)
    if what is None:
        return name or "-"
    if kind == "memory.extract" and ref.isdigit():
        conversation = Conversation.objects.select_related("speaker").filter(pk=int(ref)).first()
        return f"{what}: {conversation}" if conversation else f"{what} (#{ref})"
    if kind == "memory.consolidate" and ref.isdigit():
        run = ConsolidationRun.objects.filter(pk=int(ref)).first()
        return f"{what}: {local_time(run.started_at)}" if run else f"{what} (#{ref})"
    return str(what)


class NamedJobs:
    """The lists' first column: the job in words, its stored name beside it for the operator."""

    @admin.display(description=_("job"), ordering="name")
    def job(self, obj):
        return format_html("{}<br><small>{}</small>", job_words(obj.name), obj.name)

    @admin.display(description=_("group"), ordering="group")
    def group_words(self, obj):
        return JOB_WORDS.get(obj.group, obj.group) or "-"


class ScheduleAdmin(NamedJobs, q_admin.ScheduleAdmin):
    list_display = ("job", "schedule_type", "next_run", "last_run", "succeeded")
    list_display_links = ("job",)

    # django-q2's own column titles ("last_run", "success") have no German or Italian.
    @admin.display(description=_("last run"))
    def last_run(self, obj):
        """The last run's link, named in words (django-q2 shows its random task name)."""
        if obj.task_name is None:
            return None
        page = "admin:django_q_success_change" if obj.task_success else "admin:django_q_failure_change"
        return format_html('<a href="{}">{}</a>', reverse(page, args=(obj.task_id,)), job_words(obj.task_name))

    @admin.display(description=_("succeeded"), boolean=True)
    def succeeded(self, obj):
        return self.get_success(obj)


class SuccessAdmin(NamedJobs, q_admin.TaskAdmin):
    list_display = ("job", "group_words", "started", "time_taken")


class FailureAdmin(NamedJobs, q_admin.FailAdmin):
    list_display = ("job", "group_words", "started", "short_result")


for model, model_admin in ((Schedule, ScheduleAdmin), (Success, SuccessAdmin), (Failure, FailureAdmin)):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
