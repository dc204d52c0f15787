import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Create the first admin login if there is none: JUSTAI_ADMIN_USER / JUSTAI_ADMIN_PASSWORD from the "
        "environment, else 'admin' with a generated password printed once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/admin/", help="The admin URL to print.")

    def handle(self, *args, url, **options):
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write(f"Admin: {url} (log in with an existing superuser).")
            return
        username = os.environ.get("JUSTAI_ADMIN_USER", "admin").strip()
        if not username:
            raise CommandError("JUSTAI_ADMIN_USER is set but empty.")
        password = os.environ.get("JUSTAI_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        shown = password if "JUSTAI_ADMIN_PASSWORD" not in os.environ else "(from JUSTAI_ADMIN_PASSWORD)"
        self.stdout.write(self.style.SUCCESS(f"Admin: {url}  user: {username}  password: {shown}"))
        if "JUSTAI_ADMIN_PASSWORD" not in os.environ:
            self.stdout.write("This password is shown once; change it in the admin (top right, 'Change password').")
