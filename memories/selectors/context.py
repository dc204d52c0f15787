"""Recall's context path: the memories stored next to a candidate from the same conversation or event."""

from typing import NamedTuple

from django.db import connection

from memories.embedders import vector_literal
from memories.models import Source
from memories.selectors.nearest import table_where

# One conversation's memories are stored together (extraction stores its items in one batch), and
# what was said just before or after a memory that matches the question often holds the answer
# ("Just got some new shoes!", then "For walking or running?"). So each memory within CONTEXT_WINDOW
# places of a candidate, counted among the visible memories of the same source (the same source and
# source_ref, for the sources that are one conversation or one event), is a context neighbour of it.
# Other sources are not one conversation: "mcp" or an admin's id name a channel, not a context.
CONTEXT_SOURCES = (Source.SESSION, Source.EVENT)
CONTEXT_WINDOW = 2
# A memory that asks ("How did the kids handle the accident?") holds no answer; the memory stored right
# after it in its conversation, its reply, does. A memory asks when its text ends with a question mark
# (ASCII, full-width or Arabic), whatever follows it in white space.
QUESTION_END = r"[?\uFF1F\u061F]\s*$"

# Per candidate, the CONTEXT_WINDOW visible memories of its source stored before it and after it, in
# the order of the index on (source_ref, id), each with its similarity to the question. The
# visibility filter applies to the neighbours themselves (the inner "memories_memory"), so positions
# are counted among what the speaker may see and an invisible memory is never a neighbour. Each row
# says whether the candidate asks (QUESTION_END).
CONTEXT_SQL = """
SELECT p.id, n.id, 1 - (n.embedding <=> %s::vector), p.content ~ %s
FROM memories_memory AS p CROSS JOIN LATERAL (
    (SELECT id, embedding FROM memories_memory
     WHERE source_ref = p.source_ref AND source = p.source AND id < p.id AND ({where}) IS TRUE
     ORDER BY id DESC LIMIT %s)
    UNION ALL
    (SELECT id, embedding FROM memories_memory
     WHERE source_ref = p.source_ref AND source = p.source AND id > p.id AND ({where}) IS TRUE
     ORDER BY id LIMIT %s)
) AS n
WHERE p.id = ANY(%s) AND p.source = ANY(%s) AND p.source_ref <> ''
"""


class Context(NamedTuple):
    neighbours: dict[int, list[int]]  # candidate id -> its context neighbours
    similarity: dict[int, float]  # neighbour id -> its similarity to the question
    replies: dict[int, int]  # candidate that asks -> its reply, the neighbour stored right after it

    def only(self, ids) -> "Context":
        """The same context with the neighbours ``ids`` only."""
        keep = set(ids)
        return Context(
            neighbours={pk: [n for n in near if n in keep] for pk, near in self.neighbours.items()},
            similarity={pk: value for pk, value in self.similarity.items() if pk in keep},
            replies={pk: reply for pk, reply in self.replies.items() if reply in keep},
        )


def context_neighbours(*, candidates, ids: list[int], embedding, min_similarity: float) -> Context:
    """The context neighbours of the memories ``ids`` among ``candidates`` whose own similarity to the question is
    at least ``min_similarity`` (positions are counted before that floor), with that similarity; and for each of
    ``ids`` that asks, its reply (the first visible memory stored after it in its source) when it is a neighbour."""
    where = table_where(candidates)
    if where is None or not ids:
        return Context(neighbours={}, similarity={}, replies={})
    params = [
        vector_literal(embedding),
        QUESTION_END,
        *where[1],
        CONTEXT_WINDOW,
        *where[1],
        CONTEXT_WINDOW,
        ids,
        [str(source) for source in CONTEXT_SOURCES],
    ]
    neighbours: dict[int, list[int]] = {}
    similarity: dict[int, float] = {}
    next_after: dict[int, int] = {}  # a candidate that asks -> the first memory after it, before the floor
    with connection.cursor() as cursor:
        cursor.execute(CONTEXT_SQL.format(where=where[0]), params)
        for pk, neighbour, value, asks in cursor.fetchall():
            if asks and neighbour > pk:
                next_after[pk] = min(neighbour, next_after.get(pk, neighbour))
            if value < min_similarity:
                continue
            neighbours.setdefault(pk, []).append(neighbour)
            similarity[neighbour] = float(value)
    replies = {pk: reply for pk, reply in next_after.items() if reply in similarity}
    return Context(neighbours=neighbours, similarity=similarity, replies=replies)
