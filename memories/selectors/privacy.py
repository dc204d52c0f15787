"""The cloud rule, in one place: may memory text reach the model that reads the answer?

Every path that hands memory text to a model (recall, find_to_forget, and anything added later)
resolves where that model runs with ``model_location_of`` and asks ``memories_allowed_for``; when
it says no, the path answers with the memories withheld and the reason, never with their text.
"""

from justai_core.errors import ApplicationError
from justai_core.locations import CLOUD, LOCAL, MODEL_LOCATIONS
from people.models import Household

MODEL_LOCATION_REQUIRED = (
    "'model_location' is required without a conversation_id: 'local' or 'cloud', where the model that "
    "reads the answer runs."
)
MODEL_LOCATION_INVALID = "'model_location' must be 'local' or 'cloud'."
WITHHELD_FOR_CLOUD = (
    "Memories withheld: this conversation's model runs in the cloud and the household's setting "
    "'personal_memories_to_cloud' is off."
)
FORGET_NEEDS_LOCAL = (
    "Candidates withheld: this conversation's model runs in the cloud and the household's setting "
    "'personal_memories_to_cloud' is off, so memories cannot be read out here. Do not guess what is "
    "stored; ask the user to repeat the request with a local model to forget something."
)


def model_location_of(*, conversation_location: str | None, model_location: str | None) -> str:
    """Where the model that reads the answer runs: the conversation's, else the one the caller names.

    Fails closed: without a conversation the caller must say (ApplicationError 400 naming
    ``model_location``), any value but local/cloud is refused, and a caller cannot make a cloud
    conversation local.
    """
    if model_location is not None and model_location not in MODEL_LOCATIONS:
        raise ApplicationError(MODEL_LOCATION_INVALID, field="model_location")
    if conversation_location is not None:
        return CLOUD if CLOUD in (conversation_location, model_location) else LOCAL
    if model_location is None:
        raise ApplicationError(MODEL_LOCATION_REQUIRED, field="model_location")
    return model_location


def memories_allowed_or_refuse(*, model_location: str | None) -> None:
    """For endpoints that list memory text and have no withheld answer: a 400 when ``model_location`` is
    missing or invalid, a 403 with the reason when the cloud rule withholds memories from that model."""
    location = model_location_of(conversation_location=None, model_location=model_location)
    if not memories_allowed_for(model_location=location):
        raise ApplicationError(WITHHELD_FOR_CLOUD, field="model_location", status=403)


def memories_allowed_for(*, model_location: str) -> bool:
    """True for a local model; for any other only when the admin allowed personal memories to the cloud."""
    if model_location == LOCAL:
        return True
    return Household.load().personal_memories_to_cloud
