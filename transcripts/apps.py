from django.apps import AppConfig


class TranscriptsConfig(AppConfig):
    name = "transcripts"
