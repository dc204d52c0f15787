"""Django's PostgreSQL backend for the embedded server: started by the first connection a process makes.

Settings are then free of side effects (importing them starts nothing), and every entry point that
needs the database (manage.py, the test session, a hand-started gunicorn) gets it without having
to remember. The supervisor starts the server itself and gives its children DATABASE_URL instead.
The settings dict carries ``EMBEDDED``: ``DIR`` (None = a fresh temporary folder), ``CLEANUP``
(pgserver's cleanup mode: "stop", "delete" or None) and ``SHARED_BUFFERS``.
"""

from django.db.backends.postgresql import base

from justai_memory.serving import embedded_db


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        if not self.settings_dict.get("HOST"):
            # Started once per process; its address then stands in the settings like a configured one.
            embedded = self.settings_dict["EMBEDDED"]
            self.settings_dict["HOST"], self.settings_dict["PORT"] = embedded_db.ensure_started(
                data_dir=embedded["DIR"], cleanup=embedded["CLEANUP"], shared_buffers=embedded["SHARED_BUFFERS"]
            )
        return super().get_connection_params()
