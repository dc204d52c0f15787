"""Writes of the transcripts app, one module per sub-domain: conversations, ingest, extraction, retention."""
