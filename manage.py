#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db.utils import OperationalError

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        sys.exit(f"error: {exc}")
    except OperationalError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sys.exit(
            f"error: cannot reach the database ({first_line}). Check DATABASE_URL, or unset it to use the embedded one."
        )


if __name__ == "__main__":
    main()
