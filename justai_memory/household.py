"""Operations on one household member that span the apps: deleting a person, exporting what is stored about them.

An orchestration above people, memories and transcripts (the apps stack people <- memories <-
transcripts; none of them reaches up): each step is the owning app's own service or selector.
"""

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.core import signing
from django.db import transaction
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.selectors.person import person_forget_block_counts, person_memories
from memories.services.forget import FORGET_TOKEN_TTL, private_memories_delete
from people.models import Person
from transcripts.selectors import person_conversations, person_events, person_sightings, person_turns_elsewhere
from transcripts.services.conversations import conversations_block_extraction

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "justai-memory/person-export/1"
# Confirmation tokens for deleting a person: signed (SECRET_KEY) with the person's id and the time,
# valid as long as forget tokens. Nothing is stored: once the person is gone the token names nobody.
DELETE_TOKEN_SALT = "justai_memory.household.person_delete"
DELETE_CONFIRM_REQUIRED = "Nothing was deleted: 'confirm' must be true once the deletion was confirmed."
DELETE_TOKEN_INVALID = "Unknown confirmation token for deleting this person: request one first."
DELETE_TOKEN_EXPIRED = "This confirmation token has expired (tokens last 10 minutes): request a new one."
# An export holds the person, their memories' text and their turns: whoever downloads it must be
# allowed to read each of those where they are listed (the admin's person page and export, its action).
EXPORT_PERMISSIONS = ("people.view_person", "memories.view_memory", "transcripts.view_conversation")


def may_export(user) -> bool:
    """Whether ``user`` may download a person's export: the view permission on people, memories and conversations."""
    return user.has_perms(EXPORT_PERMISSIONS)


@dataclass
class PersonDeletion:
    person_id: int
    private_memories_deleted: int
    forget_blocks_deleted: int
    sightings_deleted: int
    conversations_blocked: int

    def as_dict(self) -> dict:
        return asdict(self)


def person_delete_preview(*, person: Person) -> dict:
    """What deleting ``person`` would remove (counts), and what it keeps."""
    counts = person_forget_block_counts(person=person)
    return {
        "private_memories": person.private_memories.count(),
        "forget_blocks": counts["private"],
        "sightings": person_sightings(person=person).count(),
        "conversations_to_block": person_conversations(person=person).count()
        + person_turns_elsewhere(person=person).values("conversation").distinct().count(),
    }


def person_delete_request(*, person: Person) -> tuple[str, datetime, dict]:
    """A 10-minute confirmation token for deleting ``person``, with what it would remove. Nothing is removed."""
    token = signing.TimestampSigner(salt=DELETE_TOKEN_SALT).sign(str(person.pk))
    return token, timezone.now() + FORGET_TOKEN_TTL, person_delete_preview(person=person)


def person_delete_confirm(*, person: Person, token, confirm, actor: str) -> PersonDeletion:
    """Delete ``person`` with a valid token from ``person_delete_request``; raises (nothing removed) otherwise."""
    if confirm is not True:
        raise ApplicationError(DELETE_CONFIRM_REQUIRED, field="confirm")
    if not isinstance(token, str) or not token:
        raise ApplicationError(DELETE_TOKEN_INVALID, field="token")
    signer = signing.TimestampSigner(salt=DELETE_TOKEN_SALT)
    try:
        pk = signer.unsign(token, max_age=FORGET_TOKEN_TTL)
    except signing.SignatureExpired:
        raise ApplicationError(DELETE_TOKEN_EXPIRED, field="token", status=410) from None
    except signing.BadSignature:
        raise ApplicationError(DELETE_TOKEN_INVALID, field="token") from None
    if pk != str(person.pk):
        raise ApplicationError(DELETE_TOKEN_INVALID, field="token")
    return person_delete(person=person, actor=actor)


@transaction.atomic
def person_delete(*, person: Person, actor: str) -> PersonDeletion:
    """Delete a person with their private memories, and block extraction of every conversation they spoke in.

    Their conversations lose their speaker (SET NULL) and would otherwise be extracted as an unknown
    speaker's, i.e. as shared memories: so each is marked ``extraction_blocked`` first. Conversations
    of others in which they had a turn are blocked too. Transcripts themselves are kept (retention).
    Their private forget blocks, sightings and pending forget requests go with them; memories about
    them stay, without the reference. The caller has confirmed (admin page, or a token).
    """
    person = Person.objects.select_for_update().get(pk=person.pk)
    conversations_blocked = conversations_block_extraction(person=person)
    memory_ids = private_memories_delete(person=person, actor=actor)
    blocks = person_forget_block_counts(person=person)["private"]
    sightings = person_sightings(person=person).count()
    person_id = person.pk
    person.delete()
    logger.info(
        "person %s deleted: %d private memories, %d conversations blocked",
        person_id,
        len(memory_ids),
        conversations_blocked,
    )
    return PersonDeletion(
        person_id=person_id,
        private_memories_deleted=len(memory_ids),
        forget_blocks_deleted=blocks,
        sightings_deleted=sightings,
        conversations_blocked=conversations_blocked,
    )


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _turn(turn) -> dict:
    return {
        "id": turn.pk,
        "conversation_id": turn.conversation_id,
        "role": turn.role,
        "speaker_id": turn.speaker_id,
        "text": turn.text,
        "at": _iso(turn.created_at),
    }


def person_export(*, person: Person) -> dict:
    """Everything stored about and by ``person``, as one JSON-ready document.

    Memories they own or that are about them (only those they may see: someone else's private
    memory about them stays out), their conversations with only their own turns (not the assistant's,
    not another person's who spoke in them), what they said in others' conversations, their sightings
    and events, and the number of forget blocks (which hold no text).
    """
    memories = [
        {
            "id": m.pk,
            "relation": m.relation,
            "content": m.content,
            "language": m.language,
            "kind": m.kind,
            "label": m.label,
            "provenance": m.provenance,
            "scope": m.scope,
            "room_id": m.room_id,
            "status": m.status,
            "valid_at": _iso(m.valid_at),
            "created_at": _iso(m.created_at),
        }
        for m in person_memories(person=person).defer("embedding")
    ]
    conversations = [
        {
            "id": c.pk,
            "room_id": c.room_id,
            "language": c.language,
            "model_location": c.model_location,
            "started_at": _iso(c.started_at),
            "ended_at": _iso(c.ended_at),
            "turns": [_turn(t) for t in c.own_turns],
        }
        for c in person_conversations(person=person)
    ]
    return {
        "format": EXPORT_FORMAT,
        "exported_at": _iso(timezone.now()),
        "person": {
            "id": person.pk,
            "name": person.name,
            "aliases": list(person.aliases),
            "preferred_language": person.preferred_language,
            "created_at": _iso(person.created_at),
        },
        "memories": memories,
        "conversations": conversations,
        "turns_in_other_conversations": [_turn(t) for t in person_turns_elsewhere(person=person)],
        "sightings": [
            {"id": s.pk, "room_id": s.room_id, "seen_at": _iso(s.seen_at)} for s in person_sightings(person=person)
        ],
        "events": [
            {"id": e.pk, "kind": e.kind, "payload": e.payload, "room_id": e.room_id, "occurred_at": _iso(e.occurred_at)}
            for e in person_events(person=person)
        ],
        "forget_blocks": person_forget_block_counts(person=person),
    }
