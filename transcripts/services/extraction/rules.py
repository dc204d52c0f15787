"""The rules code applies to an answer: what the model is not asked (scope, about the speaker, confidence,
importance), and what code reads reliably from the turns (``extraction_said``): corrected values, resolved
dates, who said it, a private request, a request not to remember, a question, gossip, a text that loops."""

import dataclasses
import datetime as dt
import functools
import re
from dataclasses import dataclass

from memories.models import Kind, Scope
from transcripts.models import FORGOTTEN_MARKER
from transcripts.schemas import ExtractedItem, Extraction, Rejection, same_saying
from transcripts.services.extraction.corrections import corrected, superseded_values
from transcripts.services.extraction.dates import dates_resolved
from transcripts.services.extraction.phrases import (
    DO_NOT_REMEMBER,
    PRIVATE,
    is_hypothetical,
    is_question,
    says_do_not_remember,
    says_first_person,
    says_gossip,
    says_private,
)
from transcripts.services.extraction.prompt import PromptTurn
from transcripts.services.extraction.words import content_words, digits_read, text_values

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


# Why the rules dropped an item (text-free).
ASKED_NOT_TO_REMEMBER = "a person asked not to remember it"
QUESTION_ONLY = "cites only questions"
HYPOTHETICAL_ONLY = "cites only hypotheticals"
GOSSIP = "hearsay about another person's private life"
SHARED_WORDS = 2  # an item that cites no turn is read against the user turn it shares this many words with
REQUEST_ONLY_WORDS = 2  # a turn that says little besides "don't remember this" covers its speaker's turn before
# A private request with one word more is the request ("Das bleibt bitte nur für mich."); with two it says something
# ("Keep this between us: I'm interviewing in Leeds.").
PRIVATE_REQUEST_ONLY_WORDS = 1


@dataclass(frozen=True)
class Said:
    """What the rules read an answer against: the numbered turns, the conversation's date and language."""

    turns: list[PromptTurn]
    today: dt.date
    language: str

    @functools.cached_property
    def users(self) -> list[PromptTurn]:
        return [turn for turn in self.turns if turn.role == "user"]

    @functools.cached_property
    def superseded(self) -> dict[str, str]:
        return superseded_values(self.turns)

    @functools.cached_property
    def private_requests_only(self) -> dict[int, int]:
        """The private requests that say little else, each with the turn it covers: its speaker's turn before."""
        found: dict[int, int] = {}
        for index, turn in enumerate(self.users):
            before = [t for t in self.users[:index] if t.speaker == turn.speaker]
            rest = content_words(PRIVATE.sub(" ", turn.text))
            if says_private(turn.text) and before and len(rest) <= PRIVATE_REQUEST_ONLY_WORDS:
                found[turn.number] = before[-1].number
        return found

    @functools.cached_property
    def private_turns(self) -> set[int]:
        """The user turns a private request covers: its own and, when it says little else, its speaker's turn before."""
        requests = {turn.number for turn in self.users if says_private(turn.text)}
        return requests | set(self.private_requests_only.values())

    @functools.cached_property
    def unremembered_turns(self) -> set[int]:
        """The user turns a person asked not to remember: the request's own and, when it says little else, its
        speaker's turn before."""
        covered: set[int] = set()
        for index, turn in enumerate(self.users):
            if says_do_not_remember(turn.text):
                covered.add(turn.number)
                rest = content_words(DO_NOT_REMEMBER.sub(" ", turn.text))
                before = [t for t in self.users[:index] if t.speaker == turn.speaker]
                if before and len(rest) <= REQUEST_ONLY_WORDS:
                    covered.add(before[-1].number)
        return covered

    def cited(self, item: ExtractedItem) -> list[PromptTurn]:
        """The user turns an item cites; when it cites none, the one user turn that shares the most of its words
        (at least SHARED_WORDS), so that the rules that read a turn apply to it too."""
        numbers = set(item.turns)
        if numbers:
            return [turn for turn in self.users if turn.number in numbers]
        words = content_words(digits_read(item.content))
        scored = [(len(words & content_words(digits_read(t.text))), -t.number, t) for t in self.users]
        best = max(scored, key=lambda row: row[:2], default=None)
        return [best[2]] if best is not None and best[0] >= SHARED_WORDS else []


def _dropped_by_rules(item: ExtractedItem, cited: list[PromptTurn], said: Said) -> str:
    """Why the rules drop an item ("" when they keep it)."""
    if any(turn.number in said.unremembered_turns for turn in cited):
        return ASKED_NOT_TO_REMEMBER
    if cited and all(is_question(turn.text) for turn in cited):
        return QUESTION_ONLY
    if cited and all(is_hypothetical(turn.text) for turn in cited):
        return HYPOTHETICAL_ONLY
    if (cited and all(says_gossip(turn.text) for turn in cited)) or says_gossip(item.content):
        return GOSSIP  # what the turns report, or what the item itself reports whatever it cites
    return ""


def _recited(item: ExtractedItem, said: Said) -> ExtractedItem:
    """An item that cites only the assistant's echo of a number ("Noted: 5892") cites the user turns that said it."""
    numbers = set(item.turns)
    cited = [turn for turn in said.turns if turn.number in numbers]
    values = text_values(item.content)
    if not cited or any(turn.role == "user" for turn in cited) or not values:
        return item
    holding = [turn for turn in said.users if values <= text_values(digits_read(turn.text))]
    return dataclasses.replace(item, turns=(holding[-1].number,)) if holding else item


def _with_correction(item: ExtractedItem, said: Said) -> ExtractedItem:
    """The later of a value and its correction: the item says the corrected value and cites the turn that said it."""
    content = corrected(item.content, said.superseded)
    if content == item.content:
        return item
    new = text_values(content) - text_values(item.content)
    words = _words(content) - _words(item.content)  # a corrected weekday ("Wednesday" for a Tuesday's date)
    sayers = [
        turn.number
        for turn in said.users
        if (new and new <= text_values(digits_read(turn.text))) or (not new and words and words <= _words(turn.text))
    ]
    turns = tuple(dict.fromkeys([*item.turns, *sayers[-1:]]))
    return dataclasses.replace(item, content=content, turns=turns)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def _who(item: ExtractedItem, cited: list[PromptTurn], names: list[str]) -> ExtractedItem:
    """The person of an item: the one who said it (its cited turns' one speaker); first person becomes that name, and
    a household name the cited turns neither say nor speak is the speaker's (a dislike given to the wrong person)."""
    speakers = {turn.speaker for turn in cited}
    if len(speakers) != 1:
        return item
    [speaker] = speakers
    content, about = item.content, item.about
    heard = digits_read("\n".join(turn.text for turn in cited))
    named = [n for n in names if _named(n, content)]
    wrong = [n for n in named if n.casefold() != speaker.casefold() and not _named(n, heard)]
    others = [n for n in names if n.casefold() != speaker.casefold() and _named(n, heard) and n not in named]
    if len(wrong) == 1 and speaker not in named and says_first_person(heard):
        content = re.sub(rf"(?<!\w){re.escape(wrong[0])}(?!\w)", speaker, content, flags=re.IGNORECASE)
        about = speaker
    elif speaker in named and not _named(speaker, heard) and not says_first_person(heard) and len(others) == 1:
        # "Anna: Marco has a dentist appointment" read as Anna's: the one the turn names is whom it is about.
        content = re.sub(rf"(?<!\w){re.escape(speaker)}(?!\w)", others[0], content, flags=re.IGNORECASE)
        about = others[0]
    elif says_first_person(content) and not _named(speaker, content):
        content, about = f"{speaker}: {content}", speaker
    return dataclasses.replace(item, content=content, about=about, speaker=speaker)


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", text.casefold()) is not None


def _private(item: ExtractedItem, cited: list[PromptTurn], said: Said) -> ExtractedItem:
    """What a person asked to keep to themselves is private to them."""
    if item.speaker and any(turn.number in said.private_turns for turn in cited):
        return dataclasses.replace(item, scope=Scope.PRIVATE)
    return item


def item_said(item: ExtractedItem, said: Said, *, names: list[str]) -> tuple[ExtractedItem | None, str]:
    """One item under the conversation's rules: the item as it is to be stored, or None and why it is dropped."""
    item = _recited(item, said)
    cited = said.cited(item)
    if reason := _dropped_by_rules(item, cited, said):
        return None, reason
    item = _with_correction(item, said)
    cited = said.cited(item)
    heard = "\n".join(turn.text for turn in cited or said.users)
    content = unrepeated(dates_resolved(item.content, said=heard, today=said.today, language=said.language))
    item = _who(dataclasses.replace(item, content=content), cited, names)
    return _private(item, cited, said), ""


def private_left_out(kept: list[ExtractedItem], said: Said, *, names: list[str]) -> list[ExtractedItem]:
    """What a household member asked to keep to themselves and no kept item holds, as code's own items: per user
    turn a private request covers that no item of ``kept`` cites, its statement (the request phrase and what says
    nothing, "Ja, bitte", left out) as a guess citing that turn, under the rules of every item (``item_said``:
    dropped as a question, hypothetical, gossip or not to remember; first person, dates; private to its speaker),
    led by its speaker's name where it does not say it ("Davide: sto cercando ...", first person in the verb).
    A request that says nothing else, a turn of someone not in the household and a forgotten value make none."""
    cited = {turn.number for item in kept for turn in said.cited(item)}
    household = {name.casefold() for name in names}
    made = []
    for turn in said.users:
        if (
            turn.number not in said.private_turns
            or turn.number in cited
            or turn.number in said.private_requests_only
            or turn.speaker.casefold() not in household
            or FORGOTTEN_MARKER in turn.text.casefold()
        ):
            continue
        statement = _statement(turn.text)
        if not content_words(statement) and not text_values(statement):
            continue
        item = ExtractedItem(kind=Kind.FACT, content=statement, about=turn.speaker, inferred=True, turns=(turn.number,))
        ruled, _ = item_said(item, said, names=names)
        if ruled is not None and not _named(turn.speaker, ruled.content):  # "sto cercando": first person unsaid
            ruled = dataclasses.replace(ruled, content=f"{turn.speaker}: {ruled.content}")
        if ruled is not None:
            made.append(ruled)
    return made


_CLAUSE = re.compile(r"\s*[,;:]\s+")  # "8:15" and "3,5" stay whole


def _statement(text: str) -> str:
    """A turn's text without its private request: the sentences and clauses that say something, as said (a clause
    with the request only when it says more than the request: "das bleibt nur für mich" goes whole)."""
    sentences = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        clauses = []
        for clause in _CLAUSE.split(sentence):
            rest = PRIVATE.sub(" ", clause).strip(" .!?")
            request = says_private(clause) and len(content_words(rest)) <= PRIVATE_REQUEST_ONLY_WORDS
            if not request and (content_words(rest) or text_values(rest)):
                clauses.append(" ".join(rest.split()))
        if clauses:
            sentences.append(", ".join(clauses) + ".")
    return " ".join(sentences)


def summary_said(summary: ExtractedItem | None, said: Said) -> ExtractedItem | None:
    """The summary under the same rules: corrected values, resolved dates, no loop (None when nothing is left)."""
    if summary is None:
        return None
    heard = "\n".join(turn.text for turn in said.users)
    content = corrected(summary.content, said.superseded)
    content = unrepeated(dates_resolved(content, said=heard, today=said.today, language=said.language))
    return dataclasses.replace(summary, content=content) if content else None


def extraction_said(extraction: Extraction, said: Said, *, names: list[str]) -> tuple[Extraction, list[Rejection]]:
    """An answer under the conversation's rules: the items kept (rewritten where the rules say so), and why the
    others were dropped (text-free). Items that now say the same thing are kept once."""
    kept: list[ExtractedItem] = []
    dropped: list[Rejection] = []
    sayings: set[str] = set()
    repeats = extraction.repeats
    for index, item in enumerate(extraction.items):
        ruled, reason = item_said(item, said, names=names)
        if ruled is None:
            dropped.append(Rejection(path=f"answer.items[{index}]", rule=reason))
        elif same_saying(ruled.content) in sayings:
            repeats += 1
        else:
            sayings.add(same_saying(ruled.content))
            kept.append(ruled)
    summary = summary_said(extraction.summary, said)
    return dataclasses.replace(extraction, items=kept, summary=summary, repeats=repeats), dropped


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_LOOP = re.compile(
    r"(.{6,200}?)(?:\W*\1){2,}", re.DOTALL
)  # a phrase said three times over (bounded: no backtracking blow-up)


def unrepeated(text: str) -> str:
    """A text that repeats itself cut to what it says once: each sentence once, a phrase said three times over once."""
    text = _LOOP.sub(r"\1", text)
    sentences, seen = [], set()
    for sentence in _SENTENCE_END.split(text.strip()):
        if (saying := same_saying(sentence)) and saying not in seen:
            seen.add(saying)
            sentences.append(sentence)
    return " ".join(sentences)
