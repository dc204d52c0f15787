from django.core.management.base import BaseCommand

from justai_memory.schedules import schedules_upsert


class Command(BaseCommand):
    help = "Create or update every periodic job (consolidation, extraction sweep, retention purge) by name."

    def handle(self, *args, **options):
        for schedule in schedules_upsert():
            self.stdout.write(f"Schedule {schedule.name}: {schedule.func} ({schedule.get_schedule_type_display()})")
