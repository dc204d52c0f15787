"""What a turn says about its own content, read from the phrases a household uses (de, it, en, es).

- a private request ("nur für mich", "tienilo per te", "entre nosotros", "keep this between us");
- a request not to remember ("das musst du dir nicht merken", "don't remember this", "non ricordarlo");
- hearsay ("hat mir erzählt", "I heard", "pare che", "me contó") and a person's private life (health,
  relationships, troubles): together, gossip about someone else, which is not the household's to keep;
- first person ("ich", "I", "io", "yo" and their forms), which names the one who speaks;
- a hypothetical ("if we ever had ...") and a question.
"""

import re


def _phrases(*alternatives: str) -> re.Pattern:
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


PRIVATE = _phrases(
    r"nur für mich",
    r"(?:bleibt |)unter uns",
    r"sag(?:e|) (?:es|das) niemandem",
    r"(?:behalte|behalt) (?:das|es) für dich",
    r"geht (?:die anderen nichts|niemanden (?:etwas|was)) an",
    r"(?:only|just) for me",
    r"(?:just |)between (?:us|you and me)",
    r"keep (?:this|it|that) (?:to yourself|private|secret|between us)",
    r"don'?t tell (?:anyone|anybody|the others)",
    r"tienilo per te",
    r"(?:solo|soltanto) per me",
    r"(?:tra|fra) (?:noi|me e te)",
    r"non dirlo a nessuno",
    r"entre nosotros|entre tú y yo",
    r"s[oó]lo para m[ií]",
    r"no se lo digas a nadie",
    r"gu[aá]rdalo para ti",
)
DO_NOT_REMEMBER = _phrases(
    r"(?:das |)(?:musst|brauchst) du (?:dir |)nicht (?:zu |)merken",
    r"merk dir das nicht",
    r"vergiss (?:das|es)(?! nicht)",
    r"nicht (?:speichern|notieren|aufschreiben)",
    r"(?:don'?t|do not|no need to) (?:remember|save|store|note|write down) (?:this|that|it)",
    r"(?<!don't )(?<!not )forget (?:this|that|it|what I said)",
    r"non (?:ricordarlo|ricordartelo|salvarlo|annotarlo|memorizzarlo|serve ricordarlo)",
    r"dimenticalo|dimentica (?:quello|questo|ciò)",
    r"no (?:lo |)(?:recuerdes|guardes|apuntes|anotes)",
    r"no hace falta (?:recordarlo|apuntarlo)",
    r"olv[ií]dalo|olvida (?:eso|lo que)",
)
HEARSAY = _phrases(
    r"(?:hat|habe) (?:mir |uns |)erzählt",
    r"erzählt(?:e|), dass",
    r"(?:ich |)(?:habe|hab) gehört",
    r"angeblich",
    r"man sagt",
    r"(?:sagt|meint|sagte|meinte)(?:,|) (?:dass|sie|er)",
    r"(?:told|tells) (?:me|us)",
    r"I (?:heard|hear)",
    r"apparently|rumou?r",
    r"(?:says|said) (?:that|she|he)",
    r"mi ha detto|ci ha detto|ho sentito|pare che|sembra che|si dice|dice che|dicono che|ha detto che",
    r"me (?:dijo|contó)|nos (?:dijo|contó)|he oído|dicen que|dice que|parece que|al parecer",
)
# Words of someone's private life: health, relationships, troubles (stems: any ending).
PRIVATE_LIFE = re.compile(
    r"(?<!\w)(?:krank|krebs|schwanger|diagnos|depress|therapie|psycholog|scheid|getrennt|trenn|affäre|verliebt|"
    r"schulden|pleite|arbeitslos|gekündigt|entlassen|krankenhaus|operation|sick|ill(?!\w)|illness|cancer|pregnan|"
    r"therap|divorc|separat|split up|broke up|affair|dating|girlfriend|boyfriend|debt|fired|lost (?:his|her) job|"
    r"surgery|hospital|rehab|malat|incinta|cancro|tumor|divorz|lasciat|tradit|fidanzat|debit|licenziat|ospedal|"
    r"operazion|si separa|separazion|litigat|enferm|embarazad|cáncer|divorci|separad|novi[oa]|deuda|despedid|operación|depresi)",
    re.IGNORECASE,
)
FIRST_PERSON = _phrases(
    r"ich|mich|mir|mein|meine|meinen|meinem|meiner|meines",
    r"(?-i:I|I'm|I've|I'd|I'll)|me|my|mine|myself",
    r"io|mi|mio|mia|miei|mie",
    r"yo|mí|mío|mía",
)
# A wish or a supposition, not a fact: "if we ever had a second car", "wenn wir ... hätten", "se avessimo", "si
# tuviéramos".
HYPOTHETICAL = _phrases(
    r"if (?:we|I|you|they|he|she) (?:ever |)(?:had|got|were|could|would|won)",
    r"wenn (?:wir|ich|du|ihr|sie|er) [^.?!]{0,60}(?:hätten|hätte|wären|wäre|würden|würde|könnten|könnte)",
    r"se (?:avessimo|avessi|fossimo|fossi|potessimo|potessi|vincessimo)",
    r"si (?:tuviéramos|tuviera|fuéramos|fuera|pudiéramos|pudiera|ganáramos)",
)
QUESTION = re.compile(r"\?\s*$")


def says_private(text: str) -> bool:
    return PRIVATE.search(text) is not None


def says_do_not_remember(text: str) -> bool:
    return DO_NOT_REMEMBER.search(text) is not None


def says_gossip(text: str) -> bool:
    """Hearsay about a private life: what a person only heard about someone's health, relationship or troubles."""
    return HEARSAY.search(text) is not None and PRIVATE_LIFE.search(text) is not None


def says_first_person(text: str) -> bool:
    return FIRST_PERSON.search(text) is not None


def is_hypothetical(text: str) -> bool:
    return HYPOTHETICAL.search(text) is not None


def is_question(text: str) -> bool:
    return QUESTION.search(text.strip()) is not None
