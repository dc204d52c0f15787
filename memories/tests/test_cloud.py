"""The cloud rule (memories.selectors.privacy): memories reach a cloud model only when the admin allowed it."""

import pytest

from justai_core.errors import ApplicationError
from justai_core.locations import ModelLocation
from memories.selectors.privacy import (
    MODEL_LOCATION_INVALID,
    MODEL_LOCATION_REQUIRED,
    WITHHELD_FOR_CLOUD,
    memories_allowed_for,
    model_location_of,
)
from people.models import Household

pytestmark = pytest.mark.django_db


def test_by_default_memories_do_not_go_to_the_cloud():
    assert Household.load().personal_memories_to_cloud is False
    assert memories_allowed_for(model_location=ModelLocation.CLOUD) is False
    assert memories_allowed_for(model_location=ModelLocation.LOCAL) is True


def test_when_the_admin_allows_it_cloud_models_get_memories():
    settings = Household.load()
    settings.personal_memories_to_cloud = True
    settings.save()
    assert memories_allowed_for(model_location=ModelLocation.CLOUD) is True
    assert memories_allowed_for(model_location=ModelLocation.LOCAL) is True


def test_switching_it_off_again_takes_effect_at_once():
    Household.objects.update_or_create(pk=1, defaults={"personal_memories_to_cloud": True})
    assert memories_allowed_for(model_location=ModelLocation.CLOUD) is True
    Household.objects.filter(pk=1).update(personal_memories_to_cloud=False)
    assert memories_allowed_for(model_location=ModelLocation.CLOUD) is False


def test_the_withheld_reason_names_the_setting():
    assert "personal_memories_to_cloud" in WITHHELD_FOR_CLOUD and "cloud" in WITHHELD_FOR_CLOUD


def test_the_admin_can_switch_it(admin_client):
    Household.load()
    response = admin_client.post(
        "/admin/people/household/1/change/",
        {
            "personal_memories_to_cloud": "on",
            "transcript_retention_days": 365,
            "sighting_retention_days": 30,
            "event_retention_days": 90,
        },
    )
    assert response.status_code == 302, response.content[:2000]
    assert memories_allowed_for(model_location=ModelLocation.CLOUD) is True


@pytest.mark.parametrize(
    ("said", "stored", "required", "expected"),
    [
        ("local", None, True, "local"),
        ("cloud", None, True, "cloud"),
        (None, "local", True, "local"),
        (None, "cloud", True, "cloud"),
        ("local", "cloud", True, "cloud"),  # a caller cannot make a cloud conversation local
        ("cloud", "local", True, "cloud"),
        (None, "", True, "cloud"),  # a stored location that says nothing, or something unknown: cloud
        (None, "LOCAL", True, "cloud"),
        ("local", "moon", True, "cloud"),
        (None, None, False, "cloud"),  # nothing said where it need not be (the MCP header): cloud
        ("local", None, False, "local"),
    ],
)
def test_one_rule_decides_where_the_model_runs_and_an_unknown_location_is_cloud(said, stored, required, expected):
    assert model_location_of(model_location=said, stored_location=stored, required=required) == expected


@pytest.mark.parametrize(
    ("said", "message"),
    [
        (None, MODEL_LOCATION_REQUIRED),
        ("", MODEL_LOCATION_INVALID),
        ("LOCAL", MODEL_LOCATION_INVALID),
        (1, MODEL_LOCATION_INVALID),
    ],
)
def test_a_location_the_caller_must_say_and_did_not_say_well_is_refused_naming_it(said, message):
    with pytest.raises(ApplicationError) as refused:
        model_location_of(model_location=said)
    assert (refused.value.field, refused.value.message, refused.value.status) == ("model_location", message, 400)
