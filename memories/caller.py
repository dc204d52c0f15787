"""Who asks: the one resolved caller value every service and selector that reads for someone takes.

The surfaces resolve it once (the JSON API, MCP and the admin's recall preview through
justai_memory/api/caller.py, from ids or from loaded objects) and hand it down whole; no service takes
the room, the speaker, the model location and the language as separate arguments, nor resolves them
again. A value holds a model location the rule resolved (``privacy.model_location_of``): building one
with anything but ``local`` or ``cloud`` is the rule's 400 naming ``model_location``.
"""

from dataclasses import dataclass

from justai_core.errors import ApplicationError
from justai_core.locations import MODEL_LOCATIONS
from memories.selectors.privacy import MODEL_LOCATION_INVALID, MODEL_LOCATION_REQUIRED
from people.models import Person, Room


@dataclass(frozen=True)
class Caller:
    """Who asks (``speaker`` None: unknown) in which room, for a model that runs where, in which language.

    ``language`` is the conversation's when the request names one (the answer's language; None: the
    speaker's, else the household's).
    """

    room: Room
    speaker: Person | None
    model_location: str
    language: str | None = None

    def __post_init__(self):
        if self.model_location not in MODEL_LOCATIONS:
            message = MODEL_LOCATION_REQUIRED if self.model_location is None else MODEL_LOCATION_INVALID
            raise ApplicationError(message, field="model_location")
