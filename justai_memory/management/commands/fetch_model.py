"""``manage.py fetch_model``: fetch the embedded provider's model once from its publisher, checked against a pinned SHA-256."""

import hashlib
import os
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from justai_memory.serving import embedded_model

CHUNK = 1 << 20
TIMEOUT = 60.0  # seconds without a byte


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class Command(BaseCommand):
    help = (
        "Fetch the embedded model (AI_MEMORY_PROVIDER=embedded) once into JUSTAI_DATA_DIR/models/, checked against "
        "its pinned SHA-256; nothing is kept when the check fails. Needs internet."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--url", default=embedded_model.FETCH_URL, help="where from (default: the publisher's file)"
        )
        parser.add_argument("--sha256", default=embedded_model.FETCH_SHA256, help="the file's expected SHA-256")

    def handle(self, *args, url: str, sha256: str, **options):
        target = embedded_model.fetched_path(settings.DATA_DIR)
        expected = sha256.strip().lower()
        if target.is_file():
            if sha256_of(target) == expected:
                self.stdout.write(f"Already there: {target}")
                return
            raise CommandError(f"{target} exists but its SHA-256 is not {expected}: remove it and fetch again")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        digest, size = hashlib.sha256(), 0
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as response, partial.open("wb") as file:
                while chunk := response.read(CHUNK):
                    digest.update(chunk)
                    file.write(chunk)
                    size += len(chunk)
                file.flush()
                os.fsync(file.fileno())
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise CommandError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
        if digest.hexdigest() != expected:
            partial.unlink(missing_ok=True)
            raise CommandError(
                f"the file from {url} has SHA-256 {digest.hexdigest()}, not the pinned {expected}: not kept"
            )
        partial.replace(target)  # whole and checked, or not there at all
        self.stdout.write(
            f"Fetched {size} bytes into {target} (SHA-256 checked); AI_MEMORY_PROVIDER=embedded serves it"
        )
