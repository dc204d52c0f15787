"""Where a memory came from, in the memory admin: its conversation or event as a link, the people, the room, when.

In the wiring layer because it reads two apps: a memory's ``source_ref`` (memories) names a
conversation or an event (transcripts), or the OAuth connection it was remembered through (connections);
an extracted memory also shows the sentences it was said in (who, when: the turns its extraction cited).
Shows only what the admin may open anyway; a source whose row or turn is gone (retention, deletion)
says so.
"""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from connections.models import SOURCE_KIND, Connection
from memories.admin.base import actor_name, when
from memories.models import AuditAction, AuditEvent, Source
from transcripts.models import Conversation, Event
from transcripts.selectors import conversation_speakers, memory_said


def _names(people) -> str:
    return ", ".join(p.name for p in people) or _("unknown speaker")


def said_trail(conversation: Conversation, memory) -> str:
    """The sentences an extracted memory comes from (its extraction's cited turns): what, who, when."""
    if memory is None:
        return ""
    lines = []
    for said in memory_said(memory_id=memory.pk, conversation=conversation, content=memory.content):
        if said.get("gone"):
            lines.append(
                format_html("<br>{}", _("said in turn #%(id)s, which was deleted since") % {"id": said["turn_id"]})
            )
            continue
        lines.append(
            format_html(
                '<br>{}: <q class="trail-said">{}</q> ({}, {})',
                _("said"),
                said["sentence"],
                said["speaker"] or _("unknown speaker"),
                when(said["at"]),
            )
        )
    return format_html_join("", "{}", ((line,) for line in lines))


def conversation_trail(pk: int, memory=None) -> str:
    conversation = Conversation.objects.select_related("room", "speaker").filter(pk=pk).first()
    if conversation is None:
        return _("Conversation #%(id)s (no longer kept: deleted, or its retention ended)") % {"id": pk}
    url = reverse("admin:transcripts_conversation_change", args=[pk])
    return format_html(
        '<a href="{}" id="trail-source">{}</a><br>{}: {}<br>{}: {}<br>{}: {}{}',
        url,
        conversation,  # who and when: Conversation.__str__
        _("who spoke"),
        _names(conversation_speakers(conversation=conversation)),
        _("room"),
        conversation.room,
        _("when"),
        when(conversation.started_at),
        said_trail(conversation, memory),
    )


def event_trail(pk: int) -> str:
    event = Event.objects.select_related("room", "person").filter(pk=pk).first()
    if event is None:
        return _("Event #%(id)s (no longer kept: deleted, or its retention ended)") % {"id": pk}
    url = reverse("admin:transcripts_event_change", args=[pk])
    return format_html(
        '<a href="{}" id="trail-source">{}</a><br>{}: {}<br>{}: {}<br>{}: {}',
        url,
        event,  # its kind and when: Event.__str__
        _("who"),
        event.person.name if event.person else "-",
        _("room"),
        event.room or "-",
        _("when"),
        when(event.occurred_at),
    )


def connection_trail(pk: int) -> str:
    connection = Connection.objects.select_related("application", "room", "speaker").filter(pk=pk).first()
    if connection is None:
        return _("Connection #%(id)s (deleted)") % {"id": pk}
    url = reverse("admin:connections_connection_change", args=[pk])
    return format_html(
        '<a href="{}" id="trail-source">{}</a><br>{}: {}<br>{}: {}<br>{}: {}',
        url,
        _("Connection #%(id)s: %(client)s") % {"id": pk, "client": connection.application.name or "-"},
        _("who spoke"),
        connection.speaker.name if connection.speaker else _("unknown speaker"),
        _("room"),
        connection.room,
        _("approved"),
        when(connection.created_at),
    )


def source_trail(source_ref: str, memory=None) -> str:
    """A memory's source_ref in words, with a link to its conversation, event or connection (and, for an
    extracted ``memory``, the sentences it was said in)."""
    kind, _sep, ref = source_ref.partition(":")
    if kind == "conversation" and ref.isdigit():
        return conversation_trail(int(ref), memory)
    if kind == "event" and ref.isdigit():
        return event_trail(int(ref))
    if kind == SOURCE_KIND and ref.isdigit():
        return connection_trail(int(ref))
    if not source_ref:
        return "-"
    return actor_name(source_ref)


def learned_from(memory, *, said: bool = True) -> str:
    """Where ``memory`` came from, in words: its source (with the sentences it was said in, when ``said``), or for
    one remembered through the API or MCP outside a conversation, who told it (the audit trail's first line).
    The memory page and the person page both show this."""
    if memory.source_ref or memory.source != Source.TOOL:
        return source_trail(memory.source_ref, memory if said else None)
    told = AuditEvent.objects.filter(memory_id=memory.pk, action=AuditAction.CREATED).order_by("created_at").first()
    if told is None:
        return "-"
    where = f", {memory.room}" if memory.room else ""
    return _("told the assistant: %(who)s%(where)s, %(when)s") % {
        "who": actor_name(told.actor),
        "where": where,
        "when": when(told.created_at),
    }


class TrailMixin:
    """The memory page's "learned from": the source as a link with people, room and time."""

    @admin.display(description=gettext_lazy("learned from"))
    def learned_from(self, obj):
        return learned_from(obj)
