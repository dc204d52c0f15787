"""Answers from recall: LoCoMo dev questions answered by a model from the recall prompt block, beside a "no memory" baseline.

    flock /tmp/justai-bench.lock .venv/bin/python bench/answer.py --bundled --questions 30
    .venv/bin/python bench/answer.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b-instruct
    .venv/bin/python bench/answer.py --base-url https://api.openai.com/v1 --model gpt-4.1-mini --api-key-env OPENAI_API_KEY

The data (../shared/data/locomo-dev, CC BY-NC 4.0, Maharana et al. 2024; read in place) is stored
as bench/locomo.py stores it (every turn a room memory, ``memory_store_batch``). Each question of
categories 1 (multi-hop), 2 (temporal) and 4 (single-hop) with evidence is then asked twice, in the
same run and to the same model: once with the block ``memory_recall`` gives for it (limit 10, as the
API runs it) as the system message, once with the block for no memories (the baseline). Both
answers are scored against the gold answer with LoCoMo's token F1 (answers normalised: lower case,
punctuation and the articles a/an/the/and removed; multi-hop: the gold split at commas, each part's
best F1 over the answer's comma-separated parts, averaged). LoCoMo also stems words with Porter's
stemmer; no stemmer is installed here, so words must match exactly (both columns alike).
``--questions N`` takes every k-th question so the categories and conversations stay mixed.
"""

import argparse
import json
import re
import signal
import statistics
import string
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import setup
from bench.extraction_quality import serve_gguf
from bench.locomo import CATEGORIES, DATA, questions_of, store_conversations

SYSTEM = (
    "You answer questions about a long conversation between two people, from the memories below only. "
    "Answer with a short phrase (a few words, a name, a date); no sentence, no explanation. "
    "If the memories do not say, answer with your best guess.\n\n{block}"
)
ARTICLES = re.compile(r"\b(a|an|the|and)\b")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bundled", action="store_true", help="the bundled SmolLM2-135M, served as the service would")
    source.add_argument("--model-file", help="a GGUF file, served as AI_MEMORY_PROVIDER=embedded would")
    source.add_argument("--base-url", help="any OpenAI-compatible endpoint")
    parser.add_argument("--model", default="default")
    parser.add_argument("--api-key-env", default="")
    parser.add_argument("--questions", type=int, default=None, help="a spread subset of N questions (default: all)")
    parser.add_argument("--limit", type=int, default=10, help="memories recalled per question")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", default="e5-small", help="the embedder (default e5-small, as shipped)")
    args = parser.parse_args()
    setup(embedder=args.embedder)

    from justai_core import ai_router
    from justai_memory.serving import embedded_model
    from memories.caller import Caller
    from memories.embedding_space import active_embedder
    from memories.models import Memory
    from memories.selectors.recall import prompt_block
    from memories.services.recall import memory_recall

    samples = json.loads(args.data.read_text(encoding="utf-8"))
    Memory.objects.all().delete()
    stored = store_conversations(samples, embedder=active_embedder())
    asked = [
        (sample, room, qa) for sample, (room, _, _) in zip(samples, stored, strict=True) for qa in questions_of(sample)
    ]
    if args.questions and args.questions < len(asked):
        step = len(asked) / args.questions
        asked = [asked[int(i * step)] for i in range(args.questions)]

    server = None
    if args.bundled or args.model_file:
        path = Path(args.model_file) if args.model_file else embedded_model.bundled_path()
        server, base_url = serve_gguf(path, threads=args.threads, context=4096, max_tokens=args.max_tokens)
        label = path.name
    else:
        base_url, label = args.base_url, f"{args.model} at {ai_router.public_url(args.base_url)}"
    provider = ai_router.Provider(
        role="answer",
        name="custom",
        base_url=base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        location=ai_router.location_of(base_url),
        response_format="none",
        timeout=300.0,
        max_retries=0,
    )
    print(f"answers from recall: {label}, {len(asked)} questions, recall limit {args.limit}")
    scores: dict[tuple[str, int], list[float]] = defaultdict(list)
    seconds: list[float] = []
    failed = 0
    try:
        for _sample, room, qa in asked:
            recalled = memory_recall(
                query=qa["question"],
                caller=Caller(room=room, speaker=None, model_location="local", language="en"),
                limit=args.limit,
            )
            for arm, block in (("memory", recalled.prompt), ("no memory", prompt_block(memories=[], language="en"))):
                started = time.perf_counter()
                try:
                    answer = ai_router.chat_complete(
                        provider=provider,
                        messages=[
                            {"role": "system", "content": SYSTEM.format(block=block)},
                            {"role": "user", "content": qa["question"]},
                        ],
                        max_tokens=args.max_tokens,
                    )
                except ai_router.AIRouterError:
                    answer, failed = "", failed + 1
                seconds.append(time.perf_counter() - started)
                f1 = locomo_f1(answer.strip().splitlines()[0] if answer.strip() else "", qa["answer"], qa["category"])
                scores[(arm, qa["category"])].append(f1)
                scores[(arm, 0)].append(f1)
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    print(f"{'':>10}  {'all':>6}" + "".join(f"  {name:>10}" for name in CATEGORIES.values()))
    for arm in ("memory", "no memory"):
        row = f"{arm:>10}  {statistics.mean(scores[(arm, 0)]):6.3f}"
        for category in CATEGORIES:
            values = scores[(arm, category)]
            row += f"  {statistics.mean(values):6.3f} ({len(values):>3})" if values else f"  {'-':>10}"
        print(row)
    print(f"seconds per answer: p50 {statistics.median(seconds):.2f}, max {max(seconds):.2f}; failed calls {failed}")


if __name__ == "__main__":
    main()
