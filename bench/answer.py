"""Answers from recall: LoCoMo dev questions answered by a model from the recall prompt block, beside a "no memory"
baseline and the gold evidence turns (the ceiling a perfect recall would give this model).

    flock /tmp/justai-bench.lock .venv/bin/python bench/answer.py --bundled --questions 30
    nice -n 5 .venv/bin/python bench/answer.py --model-file ~/.cache/justai-models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --questions 120
    .venv/bin/python bench/answer.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b-instruct
    .venv/bin/python bench/answer.py --base-url https://api.openai.com/v1 --model gpt-4.1-mini --api-key-env OPENAI_API_KEY

The data (../shared/data/locomo-dev, CC BY-NC 4.0, Maharana et al. 2024; read in place) is stored
as bench/locomo.py stores it (every turn a room memory, ``memory_store_batch``). Each question of
categories 1 (multi-hop), 2 (temporal) and 4 (single-hop) with evidence is then asked three times, in
the same run and to the same model, each time with the same system message around a different block:
the block ``memory_recall`` gives for it (limit 10, as the API runs it), the block for no memories
(the baseline), and the block of its gold evidence turns (the stored turns its evidence ids name, in
the conversation's order, through the same ``prompt_block``: "[from conversation, date] speaker:
text" lines). The answers are scored against the gold answer with LoCoMo's token F1 (answers normalised: lower case,
punctuation and the articles a/an/the/and removed; multi-hop: the gold split at commas, each part's
best F1 over the answer's comma-separated parts, averaged). LoCoMo also stems words with Porter's
stemmer; no stemmer is installed here, so words must match exactly (every column alike). The recall
block's F1 is also given as a share of the evidence turns' F1. ``--questions N`` takes every k-th
question so the categories and conversations stay mixed; the figures so far are printed every
``--every`` questions and when the run is stopped (SIGTERM, e.g. from ``timeout``), so a cut run
still gives them.
"""

import argparse
import json
import os
import re
import signal
import statistics
import string
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import percentile, setup
from bench.extraction_quality import serve_gguf
from bench.locomo import CATEGORIES, DATA, questions_of, store_conversations
from memories.limits import RECALL_LIMIT_DEFAULT

SYSTEM = (
    "You answer questions about a long conversation between two people, from the memories below only. "
    "Answer with a short phrase (a few words, a name, a date); no sentence, no explanation. "
    "If the memories do not say, answer with your best guess.\n\n{block}"
)
ARTICLES = re.compile(r"\b(a|an|the|and)\b")
ARMS = ("recall", "no memory", "evidence")


def normalise(text: str) -> list[str]:
    text = str(text).lower().replace(",", "")
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return ARTICLES.sub(" ", text).split()


def token_f1(prediction: str, gold: str) -> float:
    p, g = normalise(prediction), normalise(gold)
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    if category == 1:  # multi-hop: each gold part's best match among the answer's parts
        parts = [p.strip() for p in prediction.split(",")] or [prediction]
        golds = [g.strip() for g in str(gold).split(",")]
        return statistics.mean(max(token_f1(p, g) for p in parts) for g in golds)
    return token_f1(prediction, str(gold))


def evidence_block(*, evidence: list[str], memory_of: dict[str, int]) -> tuple[str, int]:
    """The prompt block of a question's gold evidence turns, as recall's block shows memories, in the
    conversation's order; and how many of its evidence ids name no stored turn (LoCoMo has a few malformed ones)."""
    from django.utils import timezone

    from memories.models import Memory
    from memories.selectors.recall import RecalledMemory, prompt_block

    ids = list(dict.fromkeys(memory_of[e] for e in evidence if e in memory_of))  # a merged turn once
    rows = Memory.objects.in_bulk(ids)
    turns = [
        RecalledMemory(
            id=m.pk,
            content=m.content,
            language=m.language,
            kind=m.kind,
            label=m.label,
            provenance=m.provenance,
            scope=m.scope,
            date=timezone.localdate(m.valid_at),
            score=1.0,
        )
        for m in sorted(rows.values(), key=lambda m: m.pk)
    ]
    return prompt_block(memories=turns, language="en"), sum(e not in memory_of for e in evidence)


class Figures:
    """F1 per column and category, seconds and tokens of every answer, failed calls."""

    def __init__(self):
        self.scores: dict[tuple[str, int], list[float]] = defaultdict(list)
        self.seconds: list[float] = []
        self.tokens = 0
        self.generating = 0.0
        self.failed = 0
        self.questions = 0
        self.unresolved = 0  # evidence ids that name no stored turn

    def add(self, arm: str, category: int, f1: float, answer) -> None:
        self.scores[(arm, category)].append(f1)
        self.scores[(arm, 0)].append(f1)
        self.seconds.append(answer.seconds)
        self.tokens += answer.tokens
        self.generating += max(0.0, answer.seconds - (answer.first_token_seconds or answer.seconds))

    def print(self, title: str) -> None:
        mean = statistics.mean
        print(f"\n{title}: {self.questions} questions; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'':>10}  {'all':>6}" + "".join(f"  {name:>12}" for name in CATEGORIES.values()))
        for arm in ARMS:
            row = f"{arm:>10}  {mean(self.scores[(arm, 0)]):6.3f}"
            for category in CATEGORIES:
                values = self.scores[(arm, category)]
                row += f"  {mean(values):6.3f} ({len(values):>3})" if values else f"  {'-':>12}"
            print(row)
        row = f"{'share':>10}  {self._share(0):>6}"
        print(row + "".join(f"  {self._share(category):>12}" for category in CATEGORIES) + "   (recall / evidence)")
        print(
            f"seconds per answer p50 {statistics.median(self.seconds):.2f}, p95 {percentile(self.seconds, 95):.2f}; "
            f"tokens/s {self.tokens / self.generating if self.generating else 0:.1f} (generation, after the first token); "
            f"failed calls {self.failed}; evidence ids without a turn {self.unresolved}",
            flush=True,
        )

    def _share(self, category: int) -> str:
        recall, evidence = self.scores[("recall", category)], self.scores[("evidence", category)]
        if not evidence or not statistics.mean(evidence):
            return "-"
        return f"{statistics.mean(recall) / statistics.mean(evidence):.2f}"


def ask(*, provider, block: str, question: str, max_tokens: int, figures: Figures):
    """The model's answer (its first line) to ``question`` with ``block`` in the system message, and its figures."""
    from justai_core import ai_router

    answer = ai_router.Answer()
    try:
        text = ai_router.chat_complete(
            provider=provider,
            messages=[
                {"role": "system", "content": SYSTEM.format(block=block)},
                {"role": "user", "content": question},
            ],
            max_tokens=max_tokens,
            answer=answer,
        )
    except ai_router.AIRouterError:
        text, figures.failed = "", figures.failed + 1
    return (text.strip().splitlines()[0] if text.strip() else ""), answer


def model_provider(args) -> tuple:
    """The model the answers come from: (the served GGUF's process or None, its provider, a label)."""
    from justai_core import ai_router
    from justai_memory.serving import embedded_model

    server = None
    if args.bundled or args.model_file:
        path = Path(args.model_file) if args.model_file else embedded_model.bundled_path()
        server, base_url = serve_gguf(path, threads=args.threads, context=4096, max_tokens=args.max_tokens)
        label = path.name
    else:
        base_url, label = args.base_url, f"{args.model} at {ai_router.public_url(args.base_url)}"
    provider = ai_router.Provider(
        role="answer",
        name="embedded" if server is not None else "custom",  # the served GGUF takes the service's key only
        base_url=base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        location=ai_router.location_of(base_url),
        response_format="none",
        timeout=300.0,
        max_retries=0,
    )
    return server, provider, label


def stopped(signum, frame):
    raise SystemExit(f"stopped by signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bundled", action="store_true", help="the bundled SmolLM2-135M, served as the service would")
    source.add_argument("--model-file", help="a GGUF file, served as AI_MEMORY_PROVIDER=embedded would")
    source.add_argument("--base-url", help="any OpenAI-compatible endpoint")
    parser.add_argument("--model", default="default")
    parser.add_argument("--api-key-env", default="")
    parser.add_argument("--questions", type=int, default=None, help="a spread subset of N questions (default: all)")
    parser.add_argument("--limit", type=int, default=RECALL_LIMIT_DEFAULT, help="memories recalled per question")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--every", type=int, default=20, help="print the figures so far every N questions")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", default="e5-small", help="the embedder (default e5-small, as shipped)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, stopped)  # ``timeout`` stops the run: the server is stopped, the figures printed
    setup(embedder=args.embedder)

    from memories.caller import Caller
    from memories.embedding_space import active_embedder
    from memories.models import Memory
    from memories.selectors.recall import prompt_block
    from memories.services.recall import memory_recall

    samples = json.loads(args.data.read_text(encoding="utf-8"))
    Memory.objects.all().delete()
    stored = store_conversations(samples, embedder=active_embedder())
    asked = [
        (room, memory_of, qa)
        for sample, (room, memory_of, _) in zip(samples, stored, strict=True)
        for qa in questions_of(sample)
    ]
    if args.questions and args.questions < len(asked):
        step = len(asked) / args.questions
        asked = [asked[int(i * step)] for i in range(args.questions)]

    server, provider, label = model_provider(args)
    print(f"answers from recall: {label}, {len(asked)} questions, embedder {args.embedder}, recall limit {args.limit}")
    figures = Figures()
    no_memory = prompt_block(memories=[], language="en")
    try:
        for room, memory_of, qa in asked:
            recalled = memory_recall(
                query=qa["question"],
                caller=Caller(room=room, speaker=None, model_location="local", language="en"),
                limit=args.limit,
            )
            evidence, unresolved = evidence_block(evidence=qa["evidence"], memory_of=memory_of)
            figures.unresolved += unresolved
            for arm, block in zip(ARMS, (recalled.prompt, no_memory, evidence), strict=True):
                text, answer = ask(
                    provider=provider, block=block, question=qa["question"], max_tokens=args.max_tokens, figures=figures
                )
                figures.add(arm, qa["category"], locomo_f1(text, qa["answer"], qa["category"]), answer)
            figures.questions += 1
            if figures.questions % args.every == 0 and figures.questions < len(asked):
                figures.print("so far")
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
        if figures.questions:
            figures.print("all" if figures.questions == len(asked) else "cut run")


if __name__ == "__main__":
    main()
