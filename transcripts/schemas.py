"""The extraction answer as pydantic models: the structured-output JSON schema is generated from them, and they validate.

The top level (``facts`` and ``preferences`` lists of at most MAX_ITEMS, a ``summary`` object) must
hold, or the answer is malformed and the conversation fails (and is retried). Each item is then
validated on its own: a malformed item is dropped and reported, the others are kept. Reasons name
the path and the rule ("answer.facts[2].confidence: Input should be less than or equal to 1"), never
the content (pydantic's messages carry no input; ``include_input=False`` keeps it out of the error
objects too), so they can be stored on the conversation and logged.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from memories.models import Kind

MAX_ITEMS = 40
MAX_ITEM_CHARS = 1000
MAX_SUMMARY_CHARS = 2000
MAX_KEY_CHARS = 200
NOT_JSON = "answer is not JSON"
MAX_REASONS = 3

Unit = Annotated[float, Field(ge=0, le=1, strict=True)]  # strict: a bool or "0.5" is not a number
ScopeHint = Literal["private", "room", "shared"]


class _Model(BaseModel):
    # A tolerant reader (a chatty model's extra key is no reason to drop an item), while the schema
    # sent to the provider still says additionalProperties: false.
    model_config = ConfigDict(
        extra="ignore", str_strip_whitespace=True, json_schema_extra={"additionalProperties": False}
    )


class AnswerItem(_Model):
    """One fact or preference as the model answers it."""

    content: str = Field(min_length=1, max_length=MAX_ITEM_CHARS)
    inferred: StrictBool = Field(
        description="false: a person said or confirmed it; true: the model's own conclusion (a guess)"
    )
    subject: str = Field(max_length=MAX_KEY_CHARS)
    predicate: str = Field(max_length=MAX_KEY_CHARS)
    scope: ScopeHint
    confidence: Unit
    importance: Unit
    about_speaker: StrictBool = False


class AnswerSummary(_Model):
    """What the conversation was about; an empty content when nothing was worth remembering."""

    content: str = Field(max_length=MAX_SUMMARY_CHARS)
    scope: ScopeHint
    importance: Unit


class ExtractionAnswer(_Model):
    """The whole answer (the structured-output schema)."""

    facts: list[AnswerItem] = Field(max_length=MAX_ITEMS)
    preferences: list[AnswerItem] = Field(max_length=MAX_ITEMS)
    summary: AnswerSummary


class _Shape(_Model):
    """The top level alone: what must hold for the answer to count at all."""

    facts: list[Any] = Field(max_length=MAX_ITEMS)
    preferences: list[Any] = Field(max_length=MAX_ITEMS)
    summary: dict


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
EXTRACTION_SCHEMA = _inline_refs(ExtractionAnswer.model_json_schema())


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
    kind: str
    content: str
    subject: str
    predicate: str
    scope: str
    confidence: float
    importance: float
    about_speaker: bool = False
    inferred: bool = False


@dataclass(frozen=True)
class Extraction:
    items: list[ExtractedItem]
    summary: ExtractedItem | None
    rejected: list[Rejection] = field(default_factory=list)


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(?P<body>.*)\n```\s*$", re.DOTALL)


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


def _loads(text: str):
    text = text.strip()
    if match := _FENCE.match(text):  # some local models wrap JSON in a Markdown fence
        text = match.group("body")
    try:
        return json.loads(text)
    except ValueError:
        raise MalformedAnswer(NOT_JSON) from None


def extraction_parse(*, text: str) -> Extraction:
    """Parse the LLM's answer: MalformedAnswer (text-free) when its top level is wrong; bad items dropped and reported."""
    data = _loads(text)
    try:
        _Shape.model_validate(data)
    except ValidationError as exc:
        reasons = [f"{r.path}: {r.rule}" for r in _reasons(exc, "answer")]
        more = f" (+{len(reasons) - MAX_REASONS} more)" if len(reasons) > MAX_REASONS else ""
        raise MalformedAnswer("; ".join(reasons[:MAX_REASONS]) + more) from None

    items: list[ExtractedItem] = []
    rejected: list[Rejection] = []
    for key, kind in (("facts", Kind.FACT), ("preferences", Kind.PREFERENCE)):
        for i, raw in enumerate(data[key]):
            try:
                item = AnswerItem.model_validate(raw)
            except ValidationError as exc:
                rejected += _reasons(exc, f"answer.{key}[{i}]")[:1]  # one reason per dropped item
                continue
            items.append(ExtractedItem(kind=kind, **item.model_dump()))
    summary = None
    try:
        raw_summary = AnswerSummary.model_validate(data["summary"])
    except ValidationError as exc:
        rejected += _reasons(exc, "answer.summary")[:1]
    else:
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
    return Extraction(items=items, summary=summary, rejected=rejected)
