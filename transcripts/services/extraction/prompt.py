"""The extraction's question: the system rules, the worked examples, the numbered transcript, and the answer's bounds."""

import dataclasses
import functools
import re
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from justai_core import ai_router
from memories.languages import language_name
from transcripts.models import Conversation
from transcripts.schemas import (
    EXTRACTION_SCHEMA,
    MAX_ITEMS,
    Extraction,
    answer_max_tokens,
    answer_should_stop,
    extraction_parse,
    same_saying,
)
from transcripts.selectors import (
    transcript_turns,
)

MAX_TRANSCRIPT_CHARS = 24_000
MIN_TRANSCRIPT_CHARS = 2_000
PROMPT_RULES_TOKENS = 1_000  # the system rules and the header, with room to spare
PROMPT_CHARS_PER_TOKEN = 2.5  # a transcript's characters a token, at the least (German on a small vocabulary)
# The answer's bound from what the users said (extraction_max_tokens): a summary and the JSON around it, and
# per character an item's share of restating it and of its keys.
ANSWER_TOKENS = 200
ANSWER_TOKENS_PER_USER_CHAR = 2.0
USER_CHARS_PER_ITEM = 30
MIN_ITEM_BOUND = 3
STOPPED = "stopped at a loop: {n} items kept"  # a streamed answer ended where it loops (or holds too many items)
# A small model that loops writes the same item again and again: a mild penalty on what it just wrote (llama.cpp's
# default window of 64 tokens) breaks the loop without keeping it from restating a code it read.
REPEAT_PENALTY = 1.1
FREQUENCY_PENALTY = 0.3

# With EXTRACTION_HINTS, what the transcript's marks mean (hints.hinted_turns writes them).
HINT_RULES = """\
- A relative date in a turn is followed by its day in parentheses, "(YYYY-MM-DD)": write that day.
- A turn marked "[private to NAME: still to remember]" is to be written like any other.
"""

SYSTEM_PROMPT = """\
You extract long-term memories for a household assistant from one conversation.
Answer with JSON only, in exactly this shape:
{{"facts": [ITEM, ...], "preferences": [ITEM, ...], "summary": {{"content": "..."}}}}
where ITEM is {{"content": "...", "turns": [N], "inferred": false, "about": "..."}}

Rules:
- facts: lasting facts worth remembering (where things are, codes, appointments, names, relations,
  household routines). preferences: likes, dislikes, habits, how someone wants to be treated.
- Only what a person said in a user turn. Not what only the assistant said or suggested, not
  questions, not small talk (weather, greetings), not hypotheticals ("if we had ..."), not
  gossip about someone's health or relationships, nothing a person asked not to remember.
- turns: the numbers [N] of the user turns that say it. Every number, date, name and code in the
  content must appear in those turns. When a person corrects a value, keep only the corrected one.
- Each thing once: never repeat an item, not as a fact and again as a preference.
- inferred: false for what a person said or confirmed; true for what you only conclude (a guess).
- about: the name of the person the item is about; "" when it is about the household.
- Write every content as one self-contained sentence in the language it was said in (mostly
  {language}). Name people instead of writing "I" or "you".
- The conversation took place on {date} ({weekday}). Resolve relative dates ("tomorrow", "next
  Friday", "morgen", "domani") to YYYY-MM-DD against that date.
{hints}- summary: what the conversation was about in one sentence in {language}; "" when nothing worth
  remembering happened. Nothing to remember: empty lists.

Example:
{example}
"""

# One short worked example per conversation language (English for the others).
EXAMPLES = {
    "de": (
        "[1] Lena (user): Der WLAN-Code ist 3141, nein, jetzt 3142. Ich mag keinen Fisch.\n"
        "[2] assistant (assistant): Notiert. Soll ich Tee kaufen?\n"
        '-> {{"facts": [{{"content": "Der WLAN-Code ist 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "Lena mag keinen Fisch.", "turns": [1], "inferred": false, "about": "Lena"}}], '
        '"summary": {{"content": "Lena nannte den WLAN-Code."}}}}'
    ),
    "it": (
        "[1] Lena (user): Il codice del WiFi è 3141, no, ora è 3142. Non mi piace il pesce.\n"
        "[2] assistant (assistant): Annotato. Compro del tè?\n"
        '-> {{"facts": [{{"content": "Il codice del WiFi è 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "A Lena non piace il pesce.", "turns": [1], "inferred": false, '
        '"about": "Lena"}}], "summary": {{"content": "Lena ha detto il codice del WiFi."}}}}'
    ),
    "es": (
        "[1] Lena (user): El código del wifi es 3141, no, ahora es 3142. No me gusta el pescado.\n"
        "[2] assistant (assistant): Anotado. ¿Compro té?\n"
        '-> {{"facts": [{{"content": "El código del wifi es 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "A Lena no le gusta el pescado.", "turns": [1], "inferred": false, '
        '"about": "Lena"}}], "summary": {{"content": "Lena dio el código del wifi."}}}}'
    ),
    "en": (
        "[1] Lena (user): The wifi code is 3141, no, it is 3142 now. I don't like fish.\n"
        "[2] assistant (assistant): Noted. Shall I buy tea?\n"
        '-> {{"facts": [{{"content": "The wifi code is 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "Lena does not like fish.", "turns": [1], "inferred": false, "about": "Lena"}}], '
        '"summary": {{"content": "Lena gave the wifi code."}}}}'
    ),
}


EXAMPLE_COPIED = "restates the prompt's worked example"
# What the worked examples say (every language's): an item that says it again was copied, not heard.
EXAMPLE_SAYINGS = frozenset(
    same_saying(content) for example in EXAMPLES.values() for content in re.findall(r'"content": "([^"]+)"', example)
)


@dataclass(frozen=True)
class PromptTurn:
    """A turn as the prompt numbers it ([n], from 1): what grounding checks an item against."""

    number: int
    pk: int
    role: str
    text: str
    speaker: str
    time: str = ""  # HH:MM, local time


def extraction_max_tokens(user_chars: int | None = None) -> int:
    """The answer's token bound: what the users said allows (ANSWER_TOKENS plus ANSWER_TOKENS_PER_USER_CHAR a
    character), at most what the schema's limits allow and AI_MEMORY_MAX_TOKENS (the server's bound).

    A small model that loops writes until this bound: sized to the transcript, a two-sentence conversation's
    answer ends within a minute even at ~10 tokens a second.
    """
    bound = min(answer_max_tokens(EXTRACTION_SCHEMA), settings.AI_MEMORY_MAX_TOKENS)
    if user_chars is None:
        return bound
    return min(bound, ANSWER_TOKENS + int(user_chars * ANSWER_TOKENS_PER_USER_CHAR))


def extraction_max_items(user_chars: int) -> int:
    """How many items an answer may hold: one per USER_CHARS_PER_ITEM characters the users said, at least
    MIN_ITEM_BOUND; a streamed answer is ended once it writes more (``answer_should_stop``)."""
    return min(MAX_ITEMS, max(MIN_ITEM_BOUND, user_chars // USER_CHARS_PER_ITEM + MIN_ITEM_BOUND))


def transcript_max_chars(provider: ai_router.Provider, max_tokens: int) -> int:
    """How much transcript the prompt holds: MAX_TRANSCRIPT_CHARS, and for the embedded model what its context
    (AI_EMBEDDED_CONTEXT) leaves beside the rules and the answer."""
    if provider.name != "embedded":
        return MAX_TRANSCRIPT_CHARS
    free = settings.AI_EMBEDDED_CONTEXT - max_tokens - PROMPT_RULES_TOKENS
    return max(MIN_TRANSCRIPT_CHARS, min(MAX_TRANSCRIPT_CHARS, int(free * PROMPT_CHARS_PER_TOKEN)))


def extraction_ask(
    *, provider: ai_router.Provider, messages: list[dict], user_chars: int, answer: ai_router.Answer | None = None
) -> Extraction:
    """Ask the model (streamed, bounded by the transcript's size, ended at its first repeated item) and parse
    its answer. The one place the question is asked: the service and bench/extraction_quality.py."""
    answer = answer if answer is not None else ai_router.Answer()
    text = ai_router.chat_complete(
        provider=provider,
        messages=messages,
        schema=EXTRACTION_SCHEMA,
        schema_name="memory_extraction",
        max_tokens=extraction_max_tokens(user_chars),
        stop_when=functools.partial(answer_should_stop, max_items=extraction_max_items(user_chars)),
        answer=answer,
        extra=penalty_for(provider),
    )
    extraction = extraction_parse(text=text)
    if answer.stopped:
        extraction = dataclasses.replace(extraction, note=STOPPED.format(n=len(extraction.items)))
    return extraction


def prompt_messages(
    *,
    date,
    language: str,
    room: str,
    speaker: str,
    lines: list[str],
    max_chars: int = MAX_TRANSCRIPT_CHARS,
    noted: tuple[str, ...] = (),
    hinted: bool = False,
) -> list[dict]:
    """The system rules and the transcript lines ("[n] HH:MM who (role): text"), with the speaker, room and date,
    and what earlier windows of the conversation found (``noted``: not to be written again); ``hinted``: the lines
    carry code's marks (a date's day, a private request), and the rules say what they mean.

    The one place the extraction prompt is built (the service and bench/extraction_quality.py).
    """
    system = SYSTEM_PROMPT.format(
        language=language_name(language),
        date=date.isoformat(),
        weekday=date.strftime("%A"),
        example=EXAMPLES.get(language, EXAMPLES["en"]).format(),
        hints=HINT_RULES if hinted else "",
    )
    transcript = "\n".join(lines)
    if len(transcript) > max_chars:
        # The end of a long conversation holds what was settled; keep that.
        transcript = "[... earlier part left out ...]\n" + transcript[-max_chars:]
    user = (
        f'Conversation of {date.isoformat()} ({date:%A}) in the room "{room}".\n'
        f"Speaker: {speaker}.\nLanguage: {language}.\n\nTranscript:\n{transcript}"
    )
    if noted:
        user += "\n\nAlready noted from the earlier turns (do not write these again):\n" + "\n".join(
            f"- {content}" for content in noted
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def prompt_turns(conversation: Conversation) -> list[PromptTurn]:
    """The conversation's turns as the prompt numbers them."""
    return [
        PromptTurn(
            number=number,
            pk=turn.pk,
            role=turn.role,
            text=turn.text,
            speaker=turn.speaker.name if turn.speaker else ("unknown person" if turn.role == "user" else "assistant"),
            time=f"{timezone.localtime(turn.created_at):%H:%M}",
        )
        for number, turn in enumerate(transcript_turns(conversation=conversation), start=1)
    ]


def transcript_lines(turns: list[PromptTurn]) -> list[str]:
    """The prompt's lines of ``turns``: "[n] HH:MM who (role): text"."""
    return [f"[{t.number}] {t.time} {t.speaker} ({t.role}): {t.text}" for t in turns]


def penalty_for(provider: ai_router.Provider) -> dict:
    """The repetition penalty in the field the provider's server takes: llama.cpp's ``repeat_penalty`` (its
    servers: embedded, llamacpp), the OpenAI field ``frequency_penalty`` for Ollama; none for the rest (a
    cloud model does not loop, and a field a server does not know may be refused)."""
    if provider.name in ("embedded", "llamacpp"):
        return {"repeat_penalty": REPEAT_PENALTY}
    if provider.name == "ollama":
        return {"frequency_penalty": FREQUENCY_PENALTY}
    return {}
