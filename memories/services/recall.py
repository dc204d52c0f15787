"""Recall: what the assistant is told before every answer. It reads through the recall selectors (the
ranking, the memories about the speaker, the load) and counts the access in the statement that loads."""

from justai_core.errors import ApplicationError
from memories.caller import Caller
from memories.embedding_space import active_embedder
from memories.languages import languages_for_query
from memories.limits import MAX_TEXT_CHARS, RECALL_LIMIT_MAX
from memories.selectors.fusion import Found
from memories.selectors.privacy import WITHHELD_FOR_CLOUD, memories_allowed_for
from memories.selectors.ranking import RecallTuning, ranked_memories
from memories.selectors.recall import (
    RecallResult,
    about_speaker_hits,
    prompt_block,
    recall_candidates,
    recalled_load,
    recalled_load_query,
    recalled_of,
    withheld_prompt,
)
from memories.selectors.topic import topic_gate
from memories.services.access import recall_record

QUERY_EMPTY = "'query' must not be empty."
QUERY_TOO_LONG = f"'query' is longer than {MAX_TEXT_CHARS} characters."
LIMIT_INVALID = f"'limit' must be an integer from 1 to {RECALL_LIMIT_MAX}."


def memory_recall(
    *,
    query: str,
    caller: Caller,
    limit: int = 10,
    record_access: bool = True,
    tuning: RecallTuning | None = None,
) -> RecallResult:
    """Memories for the assistant's next answer and the prompt block.

    ``caller`` is who asks, resolved once at the surface: its speaker and room decide what is visible, its
    model location the cloud rule (when it withholds memories the answer holds none, the withheld prompt
    and the reason), its language the answer's (None: the speaker's, else the household's). ``tuning`` is
    how to rank (None: ``RecallTuning.for_embedder`` of the active embedder). Working memory is the
    surface's to attach (it lives with the conversation).

    Writes: ``access_count``/``last_accessed_at`` of the returned memories are bumped and the day's
    recall count (RecallDay) grows by one, found or not, by the statement that loads them, unless
    ``record_access`` is False. A withheld recall reads nothing and counts nothing. (The admin's
    preview calls it in a transaction it rolls back, so it counts nothing either.)
    """
    query = (query or "").strip()
    if not query:
        raise ApplicationError(QUERY_EMPTY, field="query")
    if len(query) > MAX_TEXT_CHARS:
        raise ApplicationError(QUERY_TOO_LONG, field="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RECALL_LIMIT_MAX:
        raise ApplicationError(LIMIT_INVALID, field="limit")
    speaker, room, language = caller.speaker, caller.room, caller.language
    if not memories_allowed_for(model_location=caller.model_location):
        return RecallResult(
            memories=[], prompt=withheld_prompt(language=language), withheld=True, withheld_reason=WITHHELD_FOR_CLOUD
        )

    embedder = active_embedder()
    embedding = embedder.embed_query(query)
    candidates = recall_candidates(speaker=speaker, room=room)
    tuning = tuning if tuning is not None else RecallTuning.for_embedder(embedder.name)
    gate = topic_gate(query=query, embedder=embedder, tuning=tuning, speaker=speaker)
    ranked = ranked_memories(
        candidates=candidates,
        query=query,
        embedding=embedding,
        languages=languages_for_query(
            conversation_language=language,
            speaker_language=speaker.preferred_language if speaker is not None else None,
        ),
        limit=limit,
        thresholds=embedder.thresholds,
        tuning=tuning,
        gate=gate,
    )
    found_by = {hit.id: hit.found_by for hit in ranked}
    ids = [hit.id for hit in ranked]
    if speaker is not None:
        about = about_speaker_hits(candidates=candidates, speaker=speaker, embedding=embedding, exclude=ids)
        if gate is not None:
            passing = set(gate.keep(pk for pk, _ in about))
            about = [(pk, similarity) for pk, similarity in about if pk in passing]
        for rank, (pk, similarity) in enumerate(about, start=1):
            found_by[pk] = {"about_speaker": Found(rank=rank, score=round(similarity, 4))}
            ids.append(pk)
    if record_access:
        # One statement: the load, with the access bump and the day's count beside it.
        read_sql, read_params = recalled_load_query(ids=ids, embedding=embedding)
        rows = recall_record(ids=ids, read_sql=read_sql, read_params=read_params)
    else:
        rows = recalled_load(ids=ids, embedding=embedding)
    memories = recalled_of(rows=rows, ids=ids, found_by=found_by)
    return RecallResult(memories=memories, prompt=prompt_block(memories=memories, language=language))
