"""Forgotten means forgotten in transcripts too: a forgotten memory's values are redacted in the kept turns.

When memories are forgotten (their tombstones made, in the same transaction), the kept turns that hold
one of their values are read sentence by sentence: found by their value keys (``Turn.token_keys``, a GIN
index over the first 64 bits of each keyed digest), so a forget costs the turns that hold the value, not
every kept turn. A sentence that carries one of the tombstones' token digests and that the
forget-block rule would drop, were it extracted (``tombstone_hits_many``, the rule extraction obeys),
has the chunks whose digests the blocking tombstone holds replaced by FORGOTTEN_MARKER; the rest of
the turn, and every other turn, stay as they were. A turn that carries the same number in a fact of
its own is not dropped by the rule, so it keeps its number. Household → ``redact_forgotten_in_transcripts``
off leaves transcripts untouched (they go with retention).

Runs as a follow-up of forgetting (``settings.FORGET_FOLLOW_UPS``): memories, which forgets, sits
below transcripts and does not import it; the wiring layer's settings name this function.
"""

import logging
import re
from collections.abc import Iterable

from django.db import transaction

from memories.digests import digest_keys, digest_spans, token_digests, token_keys
from memories.embedding_space import active_embedder
from memories.matching import MONTH_PATTERN
from memories.models import Tombstone
from memories.selectors.tombstones import tombstone_hits_many
from people.models import Household
from transcripts.models import FORGOTTEN_MARKER, Turn

logger = logging.getLogger(__name__)

# What extraction would make one item of: a sentence (a turn may say several things). Not before a month name:
# the dot of "am 14. März" ends no sentence, and the date is one value.
_SENTENCE_END = re.compile(rf"(?<=[.!?…;])\s+(?!(?:{MONTH_PATTERN})\b)|\n+", re.IGNORECASE)


def _sentences(text: str) -> Iterable[tuple[int, int]]:
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() > start:
            yield start, match.start()
        start = match.end()
    if start < len(text):
        yield start, len(text)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redacted(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (overlapping ones merged) replaced by FORGOTTEN_MARKER."""
    out, at = [], 0
    for start, end in _merged(spans):
        out += [text[at:start], FORGOTTEN_MARKER]
        at = end
    out.append(text[at:])
    return "".join(out)


def turns_holding(digests) -> list[tuple[int, str]]:
    """``(id, text)`` of the kept turns whose value keys meet these digests' keys (the GIN index), by id; turns never
    read (keys NULL: made without ``turns_append``) are read now, keyed, and returned too when they meet them."""
    keys = digest_keys(digests)
    found = list(Turn.objects.filter(token_keys__overlap=keys).values_list("pk", "text"))
    unread = [
        (pk, text, token_keys(text))
        for pk, text in Turn.objects.filter(token_keys__isnull=True).values_list("pk", "text")
    ]
    if unread:
        Turn.objects.bulk_update([Turn(pk=pk, token_keys=found_keys) for pk, _, found_keys in unread], ["token_keys"])
        wanted = frozenset(keys)
        found += [(pk, text) for pk, text, found_keys in unread if not wanted.isdisjoint(found_keys)]
    return sorted(found)


@transaction.atomic
def turns_redact_forgotten(*, tombstones: list[Tombstone]) -> list[int]:
    """Redact the values of these just-forgotten memories in the kept turns that restate them; the ids of the turns changed.

    Only turns that hold a tombstone's token digest are read (``turns_holding``: the others cannot hold one of
    its values); of those, only sentences the block rule drops are changed. Their value keys follow their text.
    """
    tombstones = [t for t in tombstones if t.pk is not None and t.digests]
    if not tombstones or not Household.load().redact_forgotten_in_transcripts:
        return []
    wanted = frozenset(d for t in tombstones for d in t.digests)
    # (turn id, its text, sentence start, sentence end, the sentence's spans that carry a wanted digest)
    units: list[tuple[int, str, int, int, list[tuple[int, int, frozenset[str]]]]] = []
    for pk, text in turns_holding(wanted):
        if wanted.isdisjoint(token_digests(text)):
            continue  # its keys met by chance (64 bits): holds none of the forgotten values
        for start, end in _sentences(text):
            spans = [span for span in digest_spans(text[start:end]) if not wanted.isdisjoint(span[2])]
            if spans:
                units.append((pk, text, start, end, spans))
    if not units:
        return []
    # In the space the new blocks are made in (Embedder.block_embedder): the sentences are not embedded twice.
    embedder = active_embedder().blocks()
    sentences = [text[start:end] for _, text, start, end, _ in units]
    hits = tombstone_hits_many(
        contents=sentences,
        embeddings=embedder.embed_documents(sentences),
        embedder=embedder,
        tombstones=Tombstone.objects.filter(pk__in=[t.pk for t in tombstones]),
    )
    digests_of = {t.pk: frozenset(t.digests) for t in tombstones}
    changes: dict[int, tuple[str, list[tuple[int, int]]]] = {}
    for (pk, text, start, _end, spans), blocking in zip(units, hits, strict=True):
        if not blocking:
            continue
        blocked = frozenset().union(*(digests_of[t] for t in blocking))
        found = [(start + s, start + e) for s, e, digests in spans if not blocked.isdisjoint(digests)]
        changes.setdefault(pk, (text, []))[1].extend(found)
    turns = []
    for pk, (text, spans) in changes.items():
        if spans:
            new = redacted(text, spans)
            turns.append(Turn(pk=pk, text=new, token_keys=token_keys(new)))
    Turn.objects.bulk_update(turns, ["text", "token_keys"])
    logger.info("forgotten values redacted in %d turns (%d tombstones)", len(turns), len(tombstones))
    return [turn.pk for turn in turns]
