from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from oauth2_provider.generators import generate_client_secret
from oauth2_provider.models import get_application_model

HOME_ASSISTANT_REDIRECT = "https://my.home-assistant.io/redirect/oauth"


class Command(BaseCommand):
    help = (
        "Register an OAuth client for the MCP server (e.g. Home Assistant) and print its client id and secret "
        "once; the secret is stored hashed. An admin then approves the client on the consent page."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="Shown on the consent page and in the admin.")
        parser.add_argument(
            "--redirect-uri",
            action="append",
            dest="redirect_uris",
            help=f"Where the client receives its code; repeat for several (default: {HOME_ASSISTANT_REDIRECT}, "
            "Home Assistant with My Home Assistant; without it, http://<home-assistant>:8123/auth/external/callback).",
        )
        parser.add_argument(
            "--public", action="store_true", help="A client without a secret (must use PKCE), e.g. a desktop app."
        )

    def handle(self, *args, name, redirect_uris, public, **options):
        Application = get_application_model()
        secret = "" if public else generate_client_secret()
        application = Application(
            name=name,
            client_type=Application.CLIENT_PUBLIC if public else Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=" ".join(redirect_uris or [HOME_ASSISTANT_REDIRECT]),
            client_secret=secret,
        )
        try:
            application.full_clean(exclude=["client_id", "client_secret"])
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            ) from None
        application.save()
        self.stdout.write(f"client_id: {application.client_id}")
        if secret:
            self.stdout.write(f"client_secret: {secret}")
            self.stderr.write("The secret is shown only now (it is stored hashed): paste both into the client.")
