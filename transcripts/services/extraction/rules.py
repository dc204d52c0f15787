"""The rules that fill in what the model is not asked (scope, about the speaker, confidence, importance)."""

import dataclasses

from memories.models import Kind, Scope
from transcripts.schemas import (
    ExtractedItem,
)
from transcripts.services.extraction.grounding import text_values

# The rules that fill in what the model is not asked (an answer that gives them anyway is used where valid).
STATED_CONFIDENCE = 0.9
GUESS_CONFIDENCE = 0.5
IMPORTANCE = {"fact": 0.6, "preference": 0.5, "episode": 0.3}
VALUE_IMPORTANCE = 0.7  # a fact with a number, date or code in it (a code, an appointment)


def item_ruled(item: ExtractedItem, *, speaker: str | None) -> ExtractedItem:
    """The item with what the model was not asked filled in by rules (what it gave anyway is kept):

    - about the speaker: the item names the speaker (``about``) as whom it is about;
    - scope: a preference of the speaker is private to them; everything else is the household's (shared);
    - confidence: 0.9 for what was said, 0.5 for a guess;
    - importance: 0.7 for a fact with a number, date or code in it, 0.6 for another fact, 0.5 for a
      preference, 0.3 for a summary.
    """
    about_speaker = item.about_speaker
    if about_speaker is None:
        about_speaker = speaker is not None and item.about.strip().casefold() == speaker.casefold()
    scope = item.scope
    if scope is None:
        scope = Scope.PRIVATE if about_speaker and item.kind == Kind.PREFERENCE else Scope.SHARED
    confidence = item.confidence
    if confidence is None:
        confidence = GUESS_CONFIDENCE if item.inferred else STATED_CONFIDENCE
    importance = item.importance
    if importance is None:
        valued = item.kind == Kind.FACT and text_values(item.content)
        importance = VALUE_IMPORTANCE if valued else IMPORTANCE.get(item.kind, IMPORTANCE["fact"])
    return dataclasses.replace(
        item, about_speaker=about_speaker, scope=scope, confidence=confidence, importance=importance
    )
