"""Writes of the people app: household members and rooms.

Deleting a person spans the apps above (their private memories, their conversations): that is an
orchestration in the wiring layer, ``justai_memory.household.person_delete``.
"""

import re

from django.db import IntegrityError, transaction
from django.db.models import PROTECT

from justai_core.errors import ApplicationError
from people.models import LANGUAGE_CODE_REGEX, Person, Room

MAX_NAME_CHARS = 100
MAX_ALIASES = 20
NAME_REQUIRED = "'{field}' must be a non-empty string of at most 100 characters."
NAME_TAKEN = "There is already a {what} named '{name}' (names are unique regardless of case)."
ALIASES_INVALID = "'aliases' must be a list of at most 20 non-empty strings of at most 100 characters."
LANGUAGE_INVALID = "'preferred_language' must be an ISO 639-1 code such as de, it or en."
ROOM_IN_USE = "Room {pk} is still referenced by {what}: it cannot be deleted."


def _name(value, *, field: str = "name") -> str:
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_NAME_CHARS:
        raise ApplicationError(NAME_REQUIRED.format(field=field), field=field)
    return value.strip()


def _aliases(value) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_ALIASES:
        raise ApplicationError(ALIASES_INVALID, field="aliases")
    aliases = []
    for i, alias in enumerate(value):
        if not isinstance(alias, str) or not alias.strip() or len(alias.strip()) > MAX_NAME_CHARS:
            raise ApplicationError(ALIASES_INVALID, field=f"aliases[{i}]")
        if alias.strip().lower() not in {a.lower() for a in aliases}:
            aliases.append(alias.strip())
    return aliases


def _language(value) -> str:
    if not isinstance(value, str) or not re.match(LANGUAGE_CODE_REGEX, value.strip().lower()):
        raise ApplicationError(LANGUAGE_INVALID, field="preferred_language")
    return value.strip().lower()


def _save_unique(obj, *, what: str, update_fields: list[str] | None = None):
    """Save ``obj``; a name taken by another row (case-insensitive, as the constraint) is a 409 naming 'name'."""
    taken = type(obj).objects.filter(name__iexact=obj.name).exclude(pk=obj.pk).exists()
    if not taken:
        try:
            with transaction.atomic():
                obj.save(update_fields=update_fields)
            return obj
        except IntegrityError:  # a concurrent insert of the same name won the race
            pass
    raise ApplicationError(NAME_TAKEN.format(what=what, name=obj.name), field="name", status=409)


@transaction.atomic
def person_create(*, name: str, aliases: list[str] | None = None, preferred_language: str = "en") -> Person:
    """Add a household member; names are unique regardless of case, aliases are kept once each."""
    person = Person(
        name=_name(name),
        aliases=_aliases(aliases if aliases is not None else []),
        preferred_language=_language(preferred_language),
    )
    return _save_unique(person, what="person")


@transaction.atomic
def person_update(*, person: Person, changes: dict) -> Person:
    """Change a person's ``name``, ``aliases`` and/or ``preferred_language`` (the keys present in ``changes``)."""
    readers = {"name": _name, "aliases": _aliases, "preferred_language": _language}
    unknown = sorted(set(changes) - set(readers))
    if unknown:
        raise ApplicationError(f"Unknown field '{unknown[0]}'.", field=unknown[0])
    person = Person.objects.select_for_update().get(pk=person.pk)
    for field, value in changes.items():
        setattr(person, field, readers[field](value))
    return _save_unique(person, what="person", update_fields=list(changes) or None) if changes else person


@transaction.atomic
def room_create(*, name: str) -> Room:
    """Add a room; names are unique regardless of case."""
    return _save_unique(Room(name=_name(name)), what="room")


@transaction.atomic
def room_update(*, room: Room, name: str) -> Room:
    """Rename a room."""
    room = Room.objects.select_for_update().get(pk=room.pk)
    room.name = _name(name)
    return _save_unique(room, what="room", update_fields=["name"])


@transaction.atomic
def room_delete(*, room: Room) -> int:
    """Delete a room that nothing lasting refers to; returns its id.

    Memories, conversations and forget blocks of the room protect it (a 409 that says how many of
    each): the first two are kept history, and a block deleted with its room could let forgotten
    content come back. Sightings of the room go with it; events keep their row without the room.
    """
    room = Room.objects.select_for_update().get(pk=room.pk)
    # Counted per protecting relation (the apps above declare them): the collector would load every row.
    counts = {
        rel.related_model._meta.verbose_name_plural: rel.related_model._default_manager.filter(
            **{rel.field.name: room}
        ).count()
        for rel in Room._meta.related_objects
        if rel.on_delete is PROTECT
    }
    what = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()) if n)
    if what:
        raise ApplicationError(ROOM_IN_USE.format(pk=room.pk, what=what), field="room_id", status=409)
    pk = room.pk
    room.delete()
    return pk
