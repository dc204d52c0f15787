from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TranscriptsConfig(AppConfig):
    name = "transcripts"
    verbose_name = _("Conversations and events")
