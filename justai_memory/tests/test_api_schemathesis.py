"""Schemathesis drives every operation of the OpenAPI document with generated requests, valid and invalid.

Checks: never a 5xx, every answer matches the document (status, content type, body schema). The
examples are derandomized so that the suite is repeatable; to explore further, raise max_examples and
drop derandomize locally.
"""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from justai_memory.api.main import api

# Well-formed requests that a service refuses by its rules (an unknown id is a 404, `confirm: false` a
# 400) are as documented, so positive_data_acceptance is off; malformed ones may also be too large (413).
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {"enabled": False},
            "negative_data_rejection": {"expected-statuses": ["400", "401", "403", "404", "405", "413"]},
        },
    }
)
schema = schemathesis.openapi.from_dict(api.get_openapi_schema(path_prefix="/internal/v1"), config=CONFIG)
schema.app = get_wsgi_application()  # in-process, as from_wsgi() would set it


@pytest.fixture
def in_test_transaction():
    """As Django's test client does: requests keep the test's connection (and its transaction) open."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_documented(case, api_token, in_test_transaction, cluster_heartbeat):
    case.call_and_validate(headers={"Authorization": f"Bearer {api_token}"})
