from django.core.management.base import BaseCommand, CommandError

from transcripts.selectors import conversation_ids_with_status
from transcripts.services.rerun import RERUN_ALLOWED, conversations_extract_rerun


class Command(BaseCommand):
    help = (
        "Re-run the extraction of conversations (done, failed or skipped): reset their status and attempts "
        "and queue the job; the cluster runs it. Open, blocked and waiting conversations are refused with the reason."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--ids", type=int, nargs="+", metavar="ID", help="Conversation ids.")
        which.add_argument(
            "--status", choices=[str(s) for s in RERUN_ALLOWED], help="Every ended conversation with this status."
        )

    def handle(self, *args, ids, status, **options):
        if status:
            ids = conversation_ids_with_status(status=status)
            if not ids:
                self.stdout.write(f"No conversation has status {status}.")
                return
        result = conversations_extract_rerun(conversation_ids=ids)
        for pk, reason in sorted(result.refused.items()):
            self.stderr.write(f"Not queued #{pk}: {reason}")
        if result.queued:
            listed = ", ".join(f"#{pk}" for pk in result.queued)
            self.stdout.write(
                self.style.SUCCESS(f"Queued extraction for {len(result.queued)} conversation(s): {listed}.")
            )
        elif ids:
            raise CommandError("Nothing queued.")
