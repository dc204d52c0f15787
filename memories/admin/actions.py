"""Admin actions that ask first, as ``django.contrib.admin.actions.delete_selected`` does."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from memories.actors import Actor
from memories.services.forget import tombstone_lift


@admin.action(permissions=["delete"], description=_("Allow remembering again (lift the selected forget blocks)"))
def lift_blocks(modeladmin, request, queryset):
    """Confirm, then lift the selected forget blocks (``tombstone_lift``): their content may be stored again."""
    if request.POST.get("post"):
        lifted = tombstone_lift(
            tombstone_ids=list(queryset.values_list("pk", flat=True)), actor=Actor.admin(request.user)
        )
        message = ngettext(
            "Lifted %(n)d forget block: its content may be remembered again.",
            "Lifted %(n)d forget blocks: their content may be remembered again.",
            lifted,
        )
        modeladmin.message_user(request, message % {"n": lifted}, messages.SUCCESS)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": gettext("Allow remembering again"),
        "subtitle": None,
        "objects_name": str(modeladmin.opts.verbose_name_plural),
        "queryset": queryset,
        "opts": modeladmin.opts,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media,
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(request, "admin/memories/tombstone/lift_confirmation.html", context)
