"""Settings for the test session (pytest.ini): the production settings with test-only changes.

Without DATABASE_URL the session uses a throwaway embedded server in a fresh temporary folder,
started by the first connection and deleted when the session ends.
"""

import os

from justai_memory.serving.embedded_db import shared_buffers_checked
from justai_memory.settings import *  # noqa: F403
from justai_memory.settings import DATABASES, env

if DATABASES["default"]["ENGINE"] == "justai_memory.serving.embedded_postgresql" and not env.str(
    "EMBEDDED_DB_DIR", default=""
):
    DATABASES["default"]["EMBEDDED"] = {
        "DIR": None,
        "CLEANUP": "delete",
        "SHARED_BUFFERS": shared_buffers_checked(env.str("EMBEDDED_DB_SHARED_BUFFERS", default="160MB")),
    }
    DATABASES["default"]["TEST"] = {"NAME": f"test_justai_memory_{os.getpid()}"}

MEMORY_EMBEDDER = env.str("MEMORY_EMBEDDER", default="hash")
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Static files from the apps (nothing is collected in tests); the service serves the collected ones.
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
