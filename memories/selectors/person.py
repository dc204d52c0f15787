"""What the memory holds about one person ("what do you know about me"), and procedures for automations."""

from django.db.models import Case, CharField, Q, QuerySet, Value, When

from memories.caller import Caller
from memories.models import Kind, Memory, Scope, Tombstone
from memories.selectors.recall import memories_readable


def person_memories(*, person) -> QuerySet[Memory]:
    """Memories owned by or about ``person`` that they may see as the speaker in some room, newest first.

    The one visibility rule (``visible_to``), applied for no room and for each room that holds a
    room memory about them: someone else's private memory about them never shows. Superseded ones
    are included; ``.active()`` narrows to what recall would use. Each carries ``relation``: "owner"
    (their own private memory) or "about".
    """
    theirs = Memory.objects.filter(Q(owner=person) | Q(about=person))
    visible = Memory.objects.visible_to(speaker=person, room=None)
    for room_id in theirs.filter(scope=Scope.ROOM).values_list("room_id", flat=True).distinct().order_by():
        visible |= Memory.objects.visible_to(speaker=person, room=room_id)
    relation = Case(When(owner=person, then=Value("owner")), default=Value("about"), output_field=CharField())
    return theirs.filter(pk__in=visible.values("pk")).annotate(relation=relation).order_by("-valid_at", "-id")


def person_forget_block_counts(*, person) -> dict[str, int]:
    """How many forget blocks hold their private content, and how many they made (tombstones have no text)."""
    return {
        "private": Tombstone.objects.filter(owner=person).count(),
        "forgotten_by_them": Tombstone.objects.filter(forgotten_by_person=person).count(),
    }


def procedures_for(*, caller: Caller) -> QuerySet[Memory]:
    """Active procedures that ``caller`` may read, as recall would show them (``memories_readable``: a 403 when
    the cloud rule withholds memories from its model); oldest first."""
    return memories_readable(caller=caller).filter(kind=Kind.PROCEDURE).order_by("id")
