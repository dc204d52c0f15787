"""The cloud rule, in one place: may memories reach a model that runs in the cloud?"""

from people.models import Household

CLOUD = "cloud"
WITHHELD_FOR_CLOUD = (
    "Memories withheld: this conversation's model runs in the cloud and the household's setting "
    "'personal_memories_to_cloud' is off."
)


def memories_allowed_for(*, model_location: str) -> bool:
    """True for a local model; for a cloud model only when the admin allowed personal memories to the cloud."""
    if model_location != CLOUD:
        return True
    return Household.load().personal_memories_to_cloud
