"""Forgetting: delete the content, keep a text-less tombstone that blocks its return.

The conversational flow has two steps: ``forget_request_create`` finds candidates and hands out a
short-lived single-use token (only its SHA-256 is stored, with the speaker, room and candidate ids;
never the request's or the memories' text); ``forget_request_confirm`` redeems it.
"""

import hashlib
import logging
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.caller import Caller
from memories.digests import key_marks, name_words, token_digests, word_marks
from memories.embedders import embedder_by_name
from memories.embedding_space import embedding_space_verify
from memories.limits import MAX_TOKEN_CHARS
from memories.models import AuditAction, ForgetRequest, Memory, Scope, Tombstone
from memories.scopes import duplicate_scope
from memories.selectors.forget import forget_matches, forget_with_duplicates
from memories.selectors.person import person_memories
from memories.selectors.privacy import FORGET_NEEDS_LOCAL, memories_allowed_for
from memories.selectors.topic import household_names
from memories.services.audit import audit_record
from memories.services.store import duplicate_scopes_lock

logger = logging.getLogger(__name__)

FORGET_TOKEN_TTL = timedelta(minutes=10)
# Spent and expired requests are kept a while so a late call hears "expired"/"used", not "unknown".
FORGET_REQUEST_KEEP = timedelta(days=1)

CONFIRM_REQUIRED = "Nothing was forgotten: 'confirm' must be true once the speaker said yes."
TOKEN_UNKNOWN = "Unknown confirmation token: ask with memory_find_to_forget first."
TOKEN_FOREIGN = "This confirmation token was issued to another speaker."
TOKEN_USED = "This confirmation token was already used."
TOKEN_EXPIRED = "This confirmation token has expired (tokens last 10 minutes): ask again."
IDS_EMPTY = "'memory_ids' must not be empty: name the candidates the user confirmed."
IDS_NEEDED = (
    "Nothing was forgotten: this request found {n} candidates. Read them to the user, ask which to forget, "
    "and send the confirmed ones as 'memory_ids'."
)
IDS_OUTSIDE = "'memory_ids' may only name candidates of this confirmation token: {ids} are not."


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _scopes_lock(memory_ids: list[int]) -> None:
    """Take the store locks of these memories' scopes: a remember or store of the same scope waits (or is waited for)."""
    rows = Memory.objects.filter(pk__in=memory_ids).values_list("scope", "owner_id", "room_id").distinct()
    duplicate_scopes_lock(scopes=[duplicate_scope(scope=s, owner_id=o, room_id=r) for s, o, r in rows])


def _household_names() -> frozenset[str]:
    """The words of the household's names and aliases: a tombstone's key marks leave them out (who, not what)."""
    return name_words(household_names())


@transaction.atomic
def memories_forget(
    *, memory_ids, actor: str, by_person=None, by_user=None, audit_action: str = AuditAction.FORGOTTEN
) -> list[Tombstone]:
    """Delete these memories permanently and leave one tombstone each (embedding, embedder, scope, digests; no text).

    Then, in the same transaction, the follow-ups of ``settings.FORGET_FOLLOW_UPS`` get the tombstones
    (the transcripts' redaction of the forgotten values).
    """
    memory_ids = list(memory_ids)
    _scopes_lock(memory_ids)
    memories = list(
        Memory.objects.filter(pk__in=memory_ids)
        .select_for_update()
        .only("pk", "content", "embedding", "scope", "owner_id", "room_id")
        .order_by("pk")
    )
    if not memories:
        return []
    space = embedding_space_verify().embedder
    blocks = embedder_by_name(space).blocks()
    if blocks.name == space:
        vectors = [m.embedding for m in memories]
    else:  # the embedder makes its blocks in another space (Embedder.block_embedder)
        vectors = list(blocks.embed_documents([m.content for m in memories]))
    names = _household_names()
    tombstones = Tombstone.objects.bulk_create(
        Tombstone(
            embedding=vector,
            embedder=blocks.name,
            scope=m.scope,
            owner_id=m.owner_id,
            room_id=m.room_id,
            forgotten_by_person=by_person,
            forgotten_by_user=by_user,
            memory_id=m.pk,
            digests=token_digests(m.content),
            word_marks=word_marks(m.content),
            key_marks=key_marks(m.content, names=names),
        )
        for m, vector in zip(memories, vectors, strict=True)
    )
    ids = [m.pk for m in memories]
    Memory.objects.filter(pk__in=ids).delete()
    audit_record(memory_ids=ids, action=audit_action, actor=actor)
    for follow_up in settings.FORGET_FOLLOW_UPS:
        import_string(follow_up)(tombstones=tombstones)
    return tombstones


class ForgetFind(NamedTuple):
    token: str | None
    expires_at: datetime | None
    candidates: list[Memory]
    withheld_reason: str = ""  # set when the cloud rule keeps the candidates from the model


@transaction.atomic
def forget_request_create(*, query: str, caller: Caller) -> ForgetFind:
    """Find what ``caller``'s speaker in its room may forget and issue a 10-minute single-use token bound to
    them and the ids.

    Stores only the token's hash, the speaker, the room and the candidate ids. With no candidates
    there is nothing to confirm: no token, nothing stored. When the model that would read the
    candidates out runs in the cloud and the household does not allow that (the caller's model
    location, the cloud rule), nothing is searched or stored either: the answer says to ask for a
    local model.
    """
    if not memories_allowed_for(model_location=caller.model_location):
        logger.info("forget request withheld: cloud model")
        return ForgetFind(None, None, [], FORGET_NEEDS_LOCAL)
    speaker, room = caller.speaker, caller.room
    candidates = forget_matches(query=query, speaker=speaker, room=room)
    token, expires_at = forget_token_issue(speaker=speaker, room=room, candidate_ids=[m.pk for m in candidates])
    return ForgetFind(token, expires_at, candidates)


@transaction.atomic
def forget_token_issue(*, speaker, room, candidate_ids: list[int]) -> tuple[str | None, datetime | None]:
    """Store a forget request for these candidates and return its token; ``(None, None)`` when there are none.

    ``room`` None is a person's "forget everything about me": its candidates are checked again as
    visible to them in any room (see ``forget_request_confirm``).
    """
    now = timezone.now()
    ForgetRequest.objects.filter(expires_at__lt=now - FORGET_REQUEST_KEEP).delete()
    if not candidate_ids:
        return None, None
    token = secrets.token_urlsafe(32)
    request = ForgetRequest.objects.create(
        token_hash=_token_hash(token),
        speaker=speaker,
        room=room,
        candidate_ids=list(candidate_ids),
        created_at=now,
        expires_at=now + FORGET_TOKEN_TTL,
    )
    logger.info("forget request %s: %d candidates", request.pk, len(candidate_ids))
    return token, request.expires_at


def _forgets_everything(request: ForgetRequest) -> bool:
    """A person's "forget everything about me" (issued with no room; see ``forget_everything_request_create``)."""
    return request.room_id is None and request.speaker_id is not None


@transaction.atomic
def forget_request_confirm(
    *, token: str, speaker, confirm: bool, memory_ids: Iterable[int] | None = None, actor: str | None = None
) -> list[Tombstone]:
    """Redeem a forget token: forget the candidates ``memory_ids`` (the ones the person confirmed) that the
    speaker still sees, each with every active duplicate of it the speaker may see.

    Without ``memory_ids`` only a token of one candidate, or a forget-everything token, is redeemed.
    Raises ApplicationError, with nothing deleted and the token left unused, when ``confirm`` is not
    true, the token is unknown, issued to another speaker, used or expired, ``memory_ids`` is missing
    with more than one candidate, or an id is not a candidate. The audit names ``actor``, by default the speaker.
    """
    if confirm is not True:
        raise ApplicationError(CONFIRM_REQUIRED, field="confirm")
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
        raise ApplicationError(TOKEN_UNKNOWN, field="token")
    request = ForgetRequest.objects.select_for_update().filter(token_hash=_token_hash(token)).first()
    if request is None:
        raise ApplicationError(TOKEN_UNKNOWN, field="token")
    if request.speaker_id != (speaker.pk if speaker is not None else None):
        raise ApplicationError(TOKEN_FOREIGN, field="speaker_id", status=403)
    if request.used_at is not None:
        raise ApplicationError(TOKEN_USED, field="token", status=409)
    now = timezone.now()
    if request.expires_at <= now:
        raise ApplicationError(TOKEN_EXPIRED, field="token", status=410)
    if memory_ids is None:
        # "Forget the code" may mean one of several codes: with more than one candidate the person
        # must say which (a forget-everything token, room None, is the person asking for all).
        if len(request.candidate_ids) > 1 and not _forgets_everything(request):
            raise ApplicationError(IDS_NEEDED.format(n=len(request.candidate_ids)), field="memory_ids")
        chosen = list(request.candidate_ids)
    else:
        chosen = list(dict.fromkeys(memory_ids))
        if not chosen:
            raise ApplicationError(IDS_EMPTY, field="memory_ids")
        outside = [pk for pk in chosen if pk not in request.candidate_ids]
        if outside:
            raise ApplicationError(IDS_OUTSIDE.format(ids=", ".join(map(str, outside))), field="memory_ids")
    request.used_at = now
    request.save(update_fields=["used_at"])
    # Serialised with stores of the same scopes from here to commit: a remember racing this forget
    # ends either before it (and is forgotten with it) or after it (and lifts its block).
    _scopes_lock(chosen)
    # Visibility again, now: a memory may have changed scope or gone since the candidates were found.
    still = (
        person_memories(person=request.speaker)
        if _forgets_everything(request)
        else Memory.objects.visible_to(speaker=request.speaker, room=request.room)
    )
    visible = list(still.filter(pk__in=chosen).values_list("pk", flat=True))
    # With every duplicate of each: copies a race or a retry left would otherwise come back in recall.
    doomed = forget_with_duplicates(memory_ids=visible, visible=still)
    tombstones = memories_forget(memory_ids=doomed, actor=actor or Actor.speaker(speaker), by_person=speaker)
    logger.info("forget request %s: %d of %d chosen memories forgotten", request.pk, len(tombstones), len(chosen))
    return tombstones


@transaction.atomic
def tombstone_lift(*, tombstone_ids: Iterable[int], actor: str) -> int:
    """Delete these forget blocks, so their content may be stored again; audits 'block_lifted' per memory id."""
    tombstones = Tombstone.objects.select_for_update().filter(pk__in=list(tombstone_ids))
    memory_ids = [pk or 0 for pk in tombstones.values_list("memory_id", flat=True)]
    if not memory_ids:
        return 0
    deleted, _ = tombstones.delete()
    audit_record(memory_ids=memory_ids, action=AuditAction.BLOCK_LIFTED, actor=actor)
    logger.info("lifted %d forget blocks (%s)", deleted, actor)
    return deleted


def forget_everything_request_create(*, person) -> tuple[str | None, datetime | None, list[int]]:
    """ "Forget everything about me": one token for every memory owned by or about ``person`` that they may see.

    Confirmed like any forget (``forget_request_confirm`` with the person as the speaker): each
    memory leaves a tombstone. Returns the token, its expiry and the candidate ids.
    """
    ids = list(person_memories(person=person).values_list("pk", flat=True))
    token, expires_at = forget_token_issue(speaker=person, room=None, candidate_ids=ids)
    return token, expires_at, ids if token else []


@transaction.atomic
def private_memories_delete(*, person, actor: str) -> list[int]:
    """Delete every private memory of ``person`` (their deletion): forgotten as any forget is (its follow-ups
    run), audited 'deleted', and no tombstone is left: nobody can store them again."""
    memory_ids = list(Memory.objects.filter(scope=Scope.PRIVATE, owner=person).values_list("pk", flat=True))
    tombstones = memories_forget(memory_ids=memory_ids, actor=actor, audit_action=AuditAction.DELETED)
    Tombstone.objects.filter(pk__in=[t.pk for t in tombstones]).delete()
    return memory_ids
