"""The duplicate rule (memories.selectors.duplicates): one rule that store, edit, forget and consolidation ask."""

import ast
from pathlib import Path

import pytest
from django.conf import settings

from memories.models import Provenance, Scope, Source
from memories.selectors.duplicates import DUPLICATE_CANDIDATES, is_duplicate, nearest_duplicate
from memories.services.store import MemoryDraft
from people.tests.factories import PersonFactory

pytestmark = pytest.mark.django_db


def draft(content, **fields):
    return MemoryDraft(content=content, provenance=Provenance.EXTRACTED, source=Source.SESSION, **fields)


def test_same_scope_alike_and_the_same_numbers_is_a_duplicate():
    assert is_duplicate(draft("Gate code 4711"), draft("The gate code is 4711"), similarity=0.99, threshold=0.95)


@pytest.mark.parametrize(
    ("b", "similarity"),
    [
        (draft("The gate code is 4712"), 0.99),  # another number
        (draft("The gate code is 4711"), 0.94),  # below the threshold
    ],
)
def test_another_number_or_too_far_is_no_duplicate(b, similarity):
    assert not is_duplicate(draft("Gate code 4711"), b, similarity=similarity, threshold=0.95)


def test_another_owners_private_memory_is_no_duplicate():
    anna, marco = PersonFactory(), PersonFactory()
    a = draft("Gate code 4711", scope=Scope.PRIVATE, owner=anna)
    b = draft("Gate code 4711", scope=Scope.PRIVATE, owner=marco)
    assert not is_duplicate(a, b, similarity=1.0, threshold=0.95)
    assert is_duplicate(a, draft("Gate code 4711", scope=Scope.PRIVATE, owner=anna), similarity=1.0, threshold=0.95)


def test_the_nearest_duplicate_is_the_first_in_scope_with_the_same_numbers():
    anna = PersonFactory()
    item = draft("Gate code 4711")
    other_scope = draft("Gate code 4711", scope=Scope.PRIVATE, owner=anna)
    other_number = draft("Gate code 4712")
    same = draft("gate code: 4711")
    candidates = [(1.0, other_scope), (0.99, other_number), (0.98, same)]
    assert nearest_duplicate(item, candidates, threshold=0.95) is same
    assert nearest_duplicate(item, [(0.9, same)], threshold=0.95) is None


def test_only_the_first_candidates_in_scope_are_compared():
    item = draft("Gate code 4711")
    crowd = [(0.99, draft(f"Gate code {n}")) for n in range(DUPLICATE_CANDIDATES)]
    assert nearest_duplicate(item, [*crowd, (0.98, draft("Gate code 4711"))], threshold=0.95) is None


def test_only_the_duplicate_rule_compares_numbers_and_dates():
    """One rule, one place: the store, edit, forget and consolidation ask memories.selectors.duplicates."""
    root = Path(settings.BASE_DIR)
    users = {
        str(path.relative_to(root))
        for package in ("justai_core", "people", "memories", "transcripts", "connections", "justai_memory")
        for path in (root / package).rglob("*.py")
        if "tests" not in path.parts
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Name | ast.Attribute)
        and (node.id if isinstance(node, ast.Name) else node.attr) == "may_be_duplicates"
    }
    assert users == {"memories/selectors/duplicates.py"}
