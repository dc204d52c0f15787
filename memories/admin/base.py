"""What the memories admin classes share: links, actor names, dates as people read them, record admins."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import get_language_info
from django.utils.translation import gettext as _

from people.models import Person


def memory_link(pk: int) -> str:
    return format_html('<a href="{}">#{}</a>', reverse("admin:memories_memory_change", args=[pk]), pk)


def memory_title(memory) -> str:
    """A memory as a person names it: its first words, quoted as the page's language quotes („Der Code für …“).

    Only on pages and in messages: ``str(memory)`` stays "Memory #N", because it is what Django's
    admin log keeps, and that log must hold no memory text.
    """
    return _("“%(words)s”") % {"words": Truncator(memory.content).words(6, truncate=" …")}


def language_words(code: str) -> str:
    """A language code by its name in the page's language ("de" -> "Deutsch"); the code when Django does not know it."""
    try:
        return get_language_info(code)["name_translated"]
    except KeyError:
        return code


def when(moment) -> str:
    """A date as the admin's language writes it, and how long ago: '2.12.2026 10:15 (3 Stunden ago)'."""
    if moment is None:
        return "-"
    local = timezone.localtime(moment)
    date = date_format(local, "SHORT_DATETIME_FORMAT")
    if moment > timezone.now():  # a scheduled retry: "in 4 minutes", not "0 minutes ago"
        return _("%(date)s (in %(until)s)") % {"date": date, "until": timeuntil(moment, depth=1)}
    return _("%(date)s (%(ago)s ago)") % {"date": date, "ago": timesince(moment, depth=1)}


def actor_name(actor: str) -> str:
    """An audit actor string in words: 'person:1' -> 'Julia', 'admin:2' -> 'admin anna', 'job:x' -> 'job x'."""
    kind, _sep, ref = actor.partition(":")
    if kind == "connection" and "/" in ref:  # connection:3/person:1
        connection_id, _slash, speaker = ref.partition("/")
        return _("%(who)s, through connection #%(id)s") % {"who": actor_name(speaker), "id": connection_id}
    if kind == "person" and ref.isdigit():
        person = Person.objects.filter(pk=int(ref)).first()
        return person.name if person else _("a deleted person")
    if kind == "admin" and ref.isdigit():
        user = get_user_model().objects.filter(pk=int(ref)).first()
        return _("admin %(name)s") % {"name": user.get_username()} if user else _("a deleted admin user")
    if kind == "tool":
        return _("the assistant (unknown speaker)")
    if kind == "schedule":
        return _("the schedule")
    if kind == "command":
        return _("a command")
    if kind == "job":
        return _("job %(name)s") % {"name": ref}
    if kind == "consolidation":
        return _("consolidation run #%(id)s") % {"id": ref}
    return actor


class RecordAdmin(admin.ModelAdmin):
    """Rows only services write: never added or changed by hand; deleted only where ``deletable`` says so."""

    deletable = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return self.deletable and super().has_delete_permission(request, obj)
