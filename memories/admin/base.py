"""What the memories admin classes share: links, actor names, dates as people read them, record admins."""

from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import get_language_info, gettext_lazy, npgettext_lazy
from django.utils.translation import gettext as _

from memories.models import ConsolidationRun
from people.models import Person


def memory_link(pk: int) -> str:
    return format_html('<a href="{}">#{}</a>', reverse("admin:memories_memory_change", args=[pk]), pk)


def memory_title(memory) -> str:
    """A memory as a person names it: its first words, quoted as the page's language quotes („Der Code für …“).

    Only on pages and in messages: ``str(memory)`` stays "Memory #N", because it is what Django's
    admin log keeps, and that log must hold no memory text.
    """
    return _("“%(words)s”") % {"words": Truncator(memory.content).words(6, truncate=" …")}


class Named:
    """A row as a page names it (its title, its breadcrumb), every field of it as it is: a template gets this
    where Django's pages print ``str()`` and a person should read words (``Named(memory, memory_title(memory))``)."""

    def __init__(self, obj, name: str):
        self.__dict__.update(_obj=obj, _name=name)

    def __getattr__(self, attr):
        return getattr(self._obj, attr)

    def __str__(self):
        return self._name


def language_words(code: str) -> str:
    """A language code by its name in the page's language ("de" -> "Deutsch"); the code when Django does not know it."""
    try:
        return get_language_info(code)["name_translated"]
    except KeyError:
        return code


# Spans as "vor 3 Tagen" and "in 3 Tagen" need them (German takes the dative there, Django's own strings are
# nominative: "3 Tage"); a context of their own keeps them apart from those.
SPAN = {
    "year": npgettext_lazy("a span ago or ahead", "%(num)d year", "%(num)d years", "num"),
    "month": npgettext_lazy("a span ago or ahead", "%(num)d month", "%(num)d months", "num"),
    "week": npgettext_lazy("a span ago or ahead", "%(num)d week", "%(num)d weeks", "num"),
    "day": npgettext_lazy("a span ago or ahead", "%(num)d day", "%(num)d days", "num"),
    "hour": npgettext_lazy("a span ago or ahead", "%(num)d hour", "%(num)d hours", "num"),
    "minute": npgettext_lazy("a span ago or ahead", "%(num)d minute", "%(num)d minutes", "num"),
}


def when(moment) -> str:
    """A date as the admin's language writes it, and how long ago: '2.12.2026 10:15 (vor 3 Stunden)'."""
    if moment is None:
        return "-"
    local = timezone.localtime(moment)
    date = date_format(local, "SHORT_DATETIME_FORMAT")
    if moment > timezone.now():  # a scheduled retry: "in 4 minutes", not "0 minutes ago"
        return _("%(date)s (in %(until)s)") % {"date": date, "until": timeuntil(moment, depth=1, time_strings=SPAN)}
    return _("%(date)s (%(ago)s ago)") % {"date": date, "ago": timesince(moment, depth=1, time_strings=SPAN)}


# The queued jobs that act on memories, by their stable name (memories.actors.Actor.job), in words.
JOB_WORDS = {"memory.extract": gettext_lazy("reading conversations")}


def _named_row(app_label: str, model: str, ref: str):
    """A row of a higher app that an actor string names (an event, a connection); the lookup goes by name
    because the audit log sits below those apps: None when it is gone."""
    if not ref.isdigit():
        return None
    return apps.get_model(app_label, model).objects.filter(pk=int(ref)).first()


def actor_name(actor: str) -> str:
    """An audit actor string in words: 'person:1' -> 'Julia', 'admin:2' -> 'admin anna', 'event:4' -> 'Ereignis
    „temperature“, 7.12.2026 10:15', 'job:memory.extract' -> 'the job “reading conversations”'."""
    kind, _sep, ref = actor.partition(":")
    if kind == "connection" and "/" in ref:  # connection:3/person:1
        connection_id, _slash, speaker = ref.partition("/")
        connection = _named_row("connections", "Connection", connection_id)
        through = str(connection) if connection else _("a removed connection")
        return _("%(who)s, through %(connection)s") % {"who": actor_name(speaker), "connection": through}
    if kind == "event":
        event = _named_row("transcripts", "Event", ref)
        return str(event) if event else _("a household event")
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
        return _("the job “%(name)s”") % {"name": JOB_WORDS.get(ref, ref)}
    if kind == "consolidation":
        run = ConsolidationRun.objects.filter(pk=int(ref)).first() if ref.isdigit() else None
        when_run = date_format(timezone.localtime(run.started_at), "SHORT_DATETIME_FORMAT") if run else "-"
        return _("the consolidation of %(when)s") % {"when": when_run}
    if kind == "api":
        return _("the household's API")
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
