"""The cloud rule, in one place: may memory text reach the model that reads the answer?

Every path that hands memory text to a model (recall, find_to_forget, and anything added later)
resolves where that model runs with ``model_location_of`` and asks ``memories_allowed_for``; when
it says no, the path answers with the memories withheld and the reason, never with their text.
"""

from justai_core.errors import ApplicationError
from justai_core.locations import CLOUD, LOCAL, MODEL_LOCATIONS
from people.models import Household

MODEL_LOCATION_REQUIRED = (
    "'model_location' is required: 'local' or 'cloud', where the model that reads the answer runs."
)
# The words the API's schema answers a value outside its choices with (justai_memory/edge/errors.py), so that
# every surface refuses a location alike: the API's fields, MCP's header, a service's argument.
MODEL_LOCATION_INVALID = "'model_location' must be one of: local, cloud."
WITHHELD_FOR_CLOUD = (
    "Memories withheld: this conversation's model runs in the cloud and the household's setting "
    "'personal_memories_to_cloud' is off."
)
FORGET_NEEDS_LOCAL = (
    "Candidates withheld: this conversation's model runs in the cloud and the household's setting "
    "'personal_memories_to_cloud' is off, so memories cannot be read out here. Do not guess what is "
    "stored; ask the user to repeat the request with a local model to forget something."
)


def model_location_of(*, model_location: str | None, stored_location: str | None = None, required: bool = True) -> str:
    """Where the model that reads the answer runs: the one rule every caller asks (API, MCP, conversations).

    ``model_location`` is what the caller says now; ``stored_location`` what a conversation or an
    approved connection said when it was made. Fails closed:

    - a value the caller says other than ``local``/``cloud`` is an ApplicationError (400) naming
      ``model_location``;
    - saying nothing is a 400 naming it when ``required`` and nothing is stored; when not required
      (the MCP header, which a client may leave out) it is cloud;
    - a stored location other than ``local`` (an empty or unknown value) is cloud;
    - the answer is local only when every location known says local: a caller cannot make a cloud
      conversation local, nor a local one read for a cloud model.
    """
    if model_location is not None and model_location not in MODEL_LOCATIONS:
        raise ApplicationError(MODEL_LOCATION_INVALID, field="model_location")
    said = [] if model_location is None else [model_location]
    if stored_location is not None:
        said.append(stored_location if stored_location in MODEL_LOCATIONS else CLOUD)
    if not said:
        if required:
            raise ApplicationError(MODEL_LOCATION_REQUIRED, field="model_location")
        return CLOUD
    return LOCAL if all(location == LOCAL for location in said) else CLOUD


def memories_allowed_or_refuse(*, model_location: str) -> None:
    """For endpoints that list memory text and have no withheld answer: a 403 with the reason when the cloud
    rule withholds memories from the model at ``model_location`` (resolved by ``model_location_of``)."""
    if not memories_allowed_for(model_location=model_location):
        raise ApplicationError(WITHHELD_FOR_CLOUD, field="model_location", status=403)


def memories_allowed_for(*, model_location: str) -> bool:
    """True for a local model; for any other only when the admin allowed personal memories to the cloud."""
    if model_location == LOCAL:
        return True
    return Household.load().personal_memories_to_cloud
