"""The extraction answer as pydantic models: the structured-output JSON schema is generated from them, and they validate.

Every complete, valid item of an answer is kept: each item is validated on its own (a malformed one
is dropped and reported), a missing or mistyped list or summary is reported and read as absent, and
an answer cut off by the token limit or broken part-way keeps what precedes the cut (read with
pydantic_core's partial mode, which never makes up a value). Only an answer with no readable item
(and something wrong with it), or one that breaks the limits (more than MAX_ITEMS in a list), is
malformed: the conversation fails (and is retried). Reasons name
the path and the rule ("answer.facts[2].confidence: Input should be less than or equal to 1"), never
the content (pydantic's messages carry no input; ``include_input=False`` keeps it out of the error
objects too), so they can be stored on the conversation and logged.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, TypeAdapter, ValidationError
from pydantic_core import from_json

from memories.models import Kind

MAX_ITEMS = 40
MAX_ITEM_CHARS = 1000
MAX_SUMMARY_CHARS = 2000
MAX_KEY_CHARS = 200
NOT_JSON = "answer is not JSON"
NOT_OBJECT = "answer is not a JSON object"
NO_ITEM = "no readable item in the answer"
CUT = "cut off: {n} items kept"  # the answer ended before its JSON closed (the token limit)
BROKEN = "malformed: {n} items kept"  # the JSON broke somewhere; what precedes the break is kept
MAX_REASONS = 3
LOOP_SAYINGS = 3  # the same item said this often: the answer loops
LIST_KEYS = ("facts", "preferences")
CHARS_PER_TOKEN = 3.0  # a conservative bound for de/en/it/es text and JSON punctuation

Unit = Annotated[float, Field(ge=0, le=1, strict=True)]  # strict: a bool or "0.5" is not a number
TurnNumber = Annotated[int, Field(ge=1, le=10_000, strict=True)]  # a turn's number [n] in the prompt
MAX_TURNS_CITED = 20
ScopeHint = Literal["private", "room", "shared"]


class _Model(BaseModel):
    # A tolerant reader (a chatty model's extra key is no reason to drop an item), while the schema
    # sent to the provider still says additionalProperties: false.
    model_config = ConfigDict(
        extra="ignore", str_strip_whitespace=True, json_schema_extra={"additionalProperties": False}
    )


class AskedItem(_Model):
    """One fact or preference as the model is asked for it: only what the model must judge (the rest comes
    from rules in code, transcripts.services.extraction.rules)."""

    content: str = Field(min_length=1, max_length=MAX_ITEM_CHARS)
    turns: list[TurnNumber] = Field(
        max_length=MAX_TURNS_CITED, description="the numbers [n] of the person's turns that say it"
    )
    inferred: StrictBool = Field(
        description="false: a person said or confirmed it; true: the model's own conclusion (a guess)"
    )
    about: str = Field(max_length=MAX_KEY_CHARS, description="the name of the person it is about; empty: the household")


class AnswerItem(AskedItem):
    """One fact or preference as it is read: what was asked (an item that cites no turn is checked against
    every user turn) and the keys a model may add on its own, used when valid."""

    turns: list[TurnNumber] = Field(default_factory=list, max_length=MAX_TURNS_CITED)
    about: str = Field("", max_length=MAX_KEY_CHARS)
    subject: str = Field("", max_length=MAX_KEY_CHARS)
    predicate: str = Field("", max_length=MAX_KEY_CHARS)
    scope: ScopeHint | None = None
    confidence: Unit | None = None
    importance: Unit | None = None
    about_speaker: StrictBool | None = None


class AskedSummary(_Model):
    """What the conversation was about; an empty content when nothing was worth remembering."""

    content: str = Field(max_length=MAX_SUMMARY_CHARS)


class AnswerSummary(AskedSummary):
    scope: ScopeHint | None = None
    importance: Unit | None = None


class AskedAnswer(_Model):
    """The whole answer as asked for (the structured-output schema)."""

    facts: list[AskedItem] = Field(max_length=MAX_ITEMS)
    preferences: list[AskedItem] = Field(max_length=MAX_ITEMS)
    summary: AskedSummary


_ITEM_LIST = TypeAdapter(Annotated[list[Any], Field(max_length=MAX_ITEMS)])


def _inline_refs(schema: dict) -> dict:
    """The schema with every ``$ref`` replaced by its definition: not every local server resolves ``$defs``."""
    definitions = schema.pop("$defs", {})

    def resolve(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(value) for value in node]
        return node

    return resolve(schema)


# Sent to the provider as the structured-output schema.
EXTRACTION_SCHEMA = _inline_refs(AskedAnswer.model_json_schema())


class MalformedAnswer(Exception):
    """The answer broke the schema at the top level; the message is a short, text-free reason."""


@dataclass(frozen=True)
class Rejection:
    """Why one item was dropped: where, and which rule (never what it said)."""

    path: str
    rule: str

    def as_dict(self) -> dict:
        return {"path": self.path, "rule": self.rule}


@dataclass(frozen=True)
class ExtractedItem:
    """An item as read; None where the answer left it to the rules (scope, confidence, importance, about_speaker)."""

    kind: str
    content: str
    subject: str = ""
    predicate: str = ""
    scope: str | None = None
    confidence: float | None = None
    importance: float | None = None
    about_speaker: bool | None = None
    inferred: bool = False
    about: str = ""
    turns: tuple[int, ...] = ()
    speaker: str = ""  # who said it (the one speaker of its cited user turns; set by the rules, never by the model)


@dataclass(frozen=True)
class Extraction:
    items: list[ExtractedItem]
    summary: ExtractedItem | None
    rejected: list[Rejection] = field(default_factory=list)
    note: str = ""  # how a cut-off or broken answer was read ("cut off: 2 items kept"); "" when whole
    repeats: int = 0  # items that said again what an earlier item of the answer said (kept once)


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(?P<body>.*?)(\n```\s*)?$", re.DOTALL)  # the close may be cut off


def _path(prefix: str, loc: tuple) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _reasons(error: ValidationError, prefix: str) -> list[Rejection]:
    return [
        Rejection(path=_path(prefix, e["loc"]), rule=e["msg"])
        for e in error.errors(include_input=False, include_url=False, include_context=False)
    ]


def _partial(text: str):
    """What a truncated JSON text holds up to its cut (pydantic_core's partial mode: no value is made up), the open item left out.

    Items are flat objects, so the last item of the list that was being written is complete only
    when the text ends right after its ``}`` (a comma may follow).
    """
    data = from_json(text, allow_partial=True)
    if isinstance(data, dict) and data:
        last = list(data)[-1]
        if last in LIST_KEYS and isinstance(data[last], list) and data[last]:
            if not text.rstrip().rstrip(",").rstrip().endswith("}"):
                data[last].pop()
    return data


def _loads(text: str) -> tuple[object, str]:
    """The answer as JSON and how it was read: ``""`` whole, ``CUT`` cut off, ``BROKEN`` malformed after a readable start.

    A cut-off text (the token limit) and a text that breaks somewhere keep what precedes the cut or
    the break; only a text with nothing readable raises MalformedAnswer.
    """
    text = text.strip()
    if match := _FENCE.match(text):  # some local models wrap JSON in a Markdown fence
        text = match.group("body").strip()
    try:
        return json.JSONDecoder().raw_decode(text)[0], ""  # whole (a chatty model's trailing words ignored)
    except json.JSONDecodeError as exc:
        error = exc
    cut = error.pos >= len(text) or error.msg.startswith("Unterminated string")  # the text ran out
    try:
        return (_partial(text), CUT) if cut else (_partial(text[: error.pos]), BROKEN)
    except ValueError:
        raise MalformedAnswer(NOT_JSON) from None


def same_saying(content: str) -> str:
    """What two items of one answer must share to say the same thing: their words, case and punctuation aside."""
    return " ".join(re.findall(r"\w+", content.casefold()))


def answer_should_stop(text: str, *, max_items: int) -> bool:
    """Whether a streamed answer, as far as it came, should end now: it loops (an item said a LOOP_SAYINGS-th time:
    a small model that loops repeats until its token limit), or there are more than ``max_items`` items. An item
    said twice (a fact and again as a preference) is no reason: the parse keeps it once and the rest goes on."""
    try:
        data = _partial(text)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    said: dict[str, int] = {}
    for key in LIST_KEYS:
        items = data.get(key)
        for item in items if isinstance(items, list) else ():
            content = item.get("content") if isinstance(item, dict) else None
            if not isinstance(content, str):
                continue
            saying = same_saying(content)
            said[saying] = said.get(saying, 0) + 1
            if said[saying] >= LOOP_SAYINGS or len(said) > max_items:
                return True
    return False


def _top_level_value(data: dict, key: str, whole: bool, rejected: list[Rejection]):
    """``data[key]``; None when missing, reported unless the answer was cut before it (its note says so)."""
    if key not in data and whole:
        rejected.append(Rejection(path=f"answer.{key}", rule="Field required"))
    return data.get(key)


def _top_level_list(data: dict, key: str, whole: bool, rejected: list[Rejection]) -> list:
    """``data[key]`` as a list: missing or not a list is reported and read as empty; more than MAX_ITEMS breaks the limits."""
    if _top_level_value(data, key, whole, rejected) is None:
        return []
    try:
        return _ITEM_LIST.validate_python(data[key])
    except ValidationError as exc:
        [reason] = _reasons(exc, f"answer.{key}")[:1]
        if isinstance(data[key], list):  # too long: the answer broke the schema's limits
            raise MalformedAnswer(f"{reason.path}: {reason.rule}") from None
        rejected.append(reason)
    return []


def extraction_parse(*, text: str) -> Extraction:
    """Parse the LLM's answer: every complete, valid item is kept; MalformedAnswer (text-free) when nothing is readable.

    Dropped items, a missing or mistyped list or summary are reported (``rejected``); a cut-off or
    broken answer keeps what precedes the cut and says so (``note``: "cut off: 2 items kept"). An
    answer with nothing to keep fails only when something was wrong with it (a clean answer with
    empty lists is "nothing to remember"); more than MAX_ITEMS in a list breaks the limits and fails.
    """
    data, how = _loads(text)
    if not isinstance(data, dict):
        raise MalformedAnswer(NOT_OBJECT)
    items: list[ExtractedItem] = []
    rejected: list[Rejection] = []
    sayings: set[str] = set()
    repeats = 0
    for key, kind in (("facts", Kind.FACT), ("preferences", Kind.PREFERENCE)):
        for i, raw in enumerate(_top_level_list(data, key, not how, rejected)):
            try:
                item = AnswerItem.model_validate(raw)
            except ValidationError as exc:
                rejected += _reasons(exc, f"answer.{key}[{i}]")[:1]  # one reason per dropped item
                continue
            if (saying := same_saying(item.content)) in sayings:
                repeats += 1  # the same thing said again: stored once
                continue
            sayings.add(saying)
            values = item.model_dump()
            values["turns"] = tuple(values["turns"])
            items.append(ExtractedItem(kind=kind, **values))
    summary = None
    raw_summary = None
    if (value := _top_level_value(data, "summary", not how, rejected)) is not None:
        try:
            raw_summary = AnswerSummary.model_validate(value)
        except ValidationError as exc:
            rejected += _reasons(exc, "answer.summary")[:1]
    if raw_summary is not None:
        if raw_summary.content:
            summary = ExtractedItem(
                kind=Kind.EPISODE,
                content=raw_summary.content,
                subject="",
                predicate="",
                scope=raw_summary.scope,
                confidence=1.0,
                importance=raw_summary.importance,
            )
    note = how.format(n=len(items)) if how else ""
    if not items and summary is None and (how or rejected):
        reasons = [note] if note else []
        reasons += [f"{r.path}: {r.rule}" for r in rejected]
        more = f" (+{len(reasons) - MAX_REASONS} more)" if len(reasons) > MAX_REASONS else ""
        raise MalformedAnswer(f"{NO_ITEM}: " + "; ".join(reasons[:MAX_REASONS]) + more)
    return Extraction(items=items, summary=summary, rejected=rejected, note=note, repeats=repeats)


def answer_max_tokens(schema: dict, *, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """The tokens the longest answer the schema allows can take: every string at its maxLength, every list full.

    JSON punctuation and key names are counted as characters too; a token is ``chars_per_token``
    characters or more (a bound: real answers are far shorter).
    """

    def chars(node: dict) -> int:
        kind = node.get("type")
        if kind == "object":
            return 2 + sum(len(key) + 6 + chars(value) for key, value in node.get("properties", {}).items())
        if kind == "array":
            return 2 + node.get("maxItems", 1) * (chars(node["items"]) + 2)
        if kind == "string":
            if "enum" in node:
                return 2 + max(len(value) for value in node["enum"])
            return 2 + node.get("maxLength", MAX_KEY_CHARS)
        if "enum" in node:
            return 2 + max(len(str(value)) for value in node["enum"])
        return 10  # a number or a boolean

    return int(chars(schema) / chars_per_token) + 1
