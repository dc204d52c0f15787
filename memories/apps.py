from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MemoriesConfig(AppConfig):
    name = "memories"
    verbose_name = _("Memories")

    def ready(self):
        from django.db.models.signals import post_delete, post_save

        from memories.selectors.topic import household_names_changed
        from people.models import Person

        # The topic gate keeps the household's names per process: a person saved or deleted here counts at once.
        post_save.connect(household_names_changed, sender=Person, dispatch_uid="household_names_saved")
        post_delete.connect(household_names_changed, sender=Person, dispatch_uid="household_names_deleted")
