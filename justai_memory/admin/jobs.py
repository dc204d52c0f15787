"""The job cluster's lists in the admin (django-q2's schedules, done and failed jobs) narrowed to fit a laptop.

django-q2's own list columns (the function's dotted path, the cluster, the repeats) made these lists wider
than a 1,366 px screen beside their filters; each job's page still shows every field.
"""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _
from django_q import admin as q_admin
from django_q.models import Failure, Schedule, Success


class ScheduleAdmin(q_admin.ScheduleAdmin):
    list_display = ("name", "schedule_type", "next_run", "last_run", "succeeded")
    list_display_links = ("name",)

    # django-q2's own column titles ("last_run", "success") have no German or Italian.
    @admin.display(description=_("last run"))
    def last_run(self, obj):
        return self.get_last_run(obj)

    @admin.display(description=_("succeeded"), boolean=True)
    def succeeded(self, obj):
        return self.get_success(obj)


class SuccessAdmin(q_admin.TaskAdmin):
    list_display = ("name", "group", "started", "time_taken")


class FailureAdmin(q_admin.FailAdmin):
    list_display = ("name", "group", "started", "short_result")


for model, model_admin in ((Schedule, ScheduleAdmin), (Success, SuccessAdmin), (Failure, FailureAdmin)):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
