"""Where a model runs, in one place: ``local`` (this house) or ``cloud``.

The AI router tells a provider's location from its address, conversations store it, and the cloud
rule (``memories.selectors.privacy``) decides from it whether memory text may reach the model.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _


class ModelLocation(models.TextChoices):
    LOCAL = "local", _("Local")
    CLOUD = "cloud", _("Cloud")


LOCAL = ModelLocation.LOCAL.value
CLOUD = ModelLocation.CLOUD.value
MODEL_LOCATIONS = (LOCAL, CLOUD)
