"""The JSON schema of the extraction answer, and its validation (a small checker for the subset the schema uses).

Reasons for rejection name the path and the rule ("facts[2].confidence: above maximum 1"), never
the content, so they can be stored on the conversation and logged.
"""

import json
import re
from dataclasses import dataclass

from memories.languages import LANGUAGE_CODE_REGEX
from memories.models import Kind, Scope

MAX_ITEMS = 40
MAX_ITEM_CHARS = 1000
MAX_SUMMARY_CHARS = 2000
SCOPE_HINTS = [Scope.PRIVATE, Scope.ROOM, Scope.SHARED]


def _item_schema(max_chars: int) -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["content", "language", "subject", "predicate", "scope", "confidence", "importance"],
        "properties": {
            "content": {"type": "string", "minLength": 1, "maxLength": max_chars},
            "language": {"type": "string", "pattern": LANGUAGE_CODE_REGEX},
            "subject": {"type": "string", "maxLength": 200},
            "predicate": {"type": "string", "maxLength": 200},
            "scope": {"type": "string", "enum": [str(s) for s in SCOPE_HINTS]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "importance": {"type": "number", "minimum": 0, "maximum": 1},
            "about_speaker": {"type": "boolean"},
        },
    }


# Sent to the provider as the structured-output schema, and checked below. Unknown keys are
# ignored when checking (a tolerant reader: a chatty model's extra field is no reason to fail).
EXTRACTION_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["facts", "preferences", "summary"],
    "properties": {
        "facts": {"type": "array", "maxItems": MAX_ITEMS, "items": _item_schema(MAX_ITEM_CHARS)},
        "preferences": {"type": "array", "maxItems": MAX_ITEMS, "items": _item_schema(MAX_ITEM_CHARS)},
        "summary": {
            "type": "object",
            "additionalProperties": False,
            "required": ["content", "language", "scope", "importance"],
            "properties": {
                "content": {"type": "string", "maxLength": MAX_SUMMARY_CHARS},
                "language": {"type": "string", "pattern": LANGUAGE_CODE_REGEX},
                "scope": {"type": "string", "enum": [str(s) for s in SCOPE_HINTS]},
                "importance": {"type": "number", "minimum": 0, "maximum": 1},
            },
        },
    },
}

NOT_JSON = "answer is not JSON"
WRONG_LANGUAGE = "{path}.language: not the conversation's language"
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(?P<body>.*)\n```\s*$", re.DOTALL)
_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
}


class MalformedAnswer(Exception):
    """The answer broke the schema; the message is a short, text-free reason."""


@dataclass(frozen=True)
class ExtractedItem:
    kind: str
    content: str
    language: str
    subject: str
    predicate: str
    scope: str
    confidence: float
    importance: float
    about_speaker: bool = False


@dataclass(frozen=True)
class Extraction:
    items: list[ExtractedItem]
    summary: ExtractedItem | None


def schema_errors(value, schema: dict, path: str = "answer") -> list[str]:
    """Every violation of ``schema`` (type, required, properties, items, maxItems, min/maxLength, pattern, enum, minimum, maximum)."""
    expected = schema.get("type")
    if expected == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return [f"{path}: not a number"]
        errors = []
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: below minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: above maximum {schema['maximum']}")
        return errors
    if expected and not isinstance(value, _TYPES[expected]):
        return [f"{path}: not a{'n' if expected[0] in 'aeiou' else ''} {expected}"]
    errors: list[str] = []
    if expected == "object":
        errors += [f"{path}.{key}: missing" for key in schema.get("required", []) if key not in value]
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                errors += schema_errors(value[key], sub, f"{path}.{key}")
    elif expected == "array":
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    elif expected == "string":
        if len(value.strip()) < schema.get("minLength", 0):
            errors.append(f"{path}: empty")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and not re.match(schema["pattern"], value):
            errors.append(f"{path}: does not match {schema['pattern']}")
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{path}: not one of {', '.join(schema['enum'])}")
    return errors


def _loads(text: str):
    text = text.strip()
    if match := _FENCE.match(text):  # some local models wrap JSON in a Markdown fence
        text = match.group("body")
    try:
        return json.loads(text)
    except ValueError:
        raise MalformedAnswer(NOT_JSON) from None


def extraction_parse(*, text: str, language: str) -> Extraction:
    """Parse and validate the LLM's answer for a conversation in ``language``; MalformedAnswer with a text-free reason."""
    data = _loads(text)
    errors = schema_errors(data, EXTRACTION_SCHEMA)
    if not errors:
        for key in ("facts", "preferences"):
            errors += [
                WRONG_LANGUAGE.format(path=f"answer.{key}[{i}]")
                for i, item in enumerate(data[key])
                if item["language"] != language
            ]
        summary = data["summary"]
        if summary["content"].strip() and summary["language"] != language:
            errors.append(WRONG_LANGUAGE.format(path="answer.summary"))
    if errors:
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        raise MalformedAnswer("; ".join(errors[:3]) + more)

    def item(raw: dict, kind: str) -> ExtractedItem:
        return ExtractedItem(
            kind=kind,
            content=raw["content"].strip(),
            language=raw["language"],
            subject=raw.get("subject", ""),
            predicate=raw.get("predicate", ""),
            scope=raw["scope"],
            confidence=float(raw.get("confidence", 1.0)),
            importance=float(raw["importance"]),
            about_speaker=bool(raw.get("about_speaker", False)),
        )

    items = [item(raw, Kind.FACT) for raw in data["facts"]]
    items += [item(raw, Kind.PREFERENCE) for raw in data["preferences"]]
    summary = data["summary"]
    return Extraction(
        items=items,
        summary=item(summary, Kind.EPISODE) if summary["content"].strip() else None,
    )
