from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConnectionsConfig(AppConfig):
    name = "connections"
    verbose_name = _("Connected assistants")
