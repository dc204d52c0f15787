"""Extraction (job ``memory.extract``): an ended conversation's facts, preferences and summary become memories.

One LLM call (role ``memory`` of the AI router), a validated answer, and all items through
``memory_store_batch`` in one transaction: forget blocks drop items (``skipped_forgotten``) and then
the summary is left out; duplicates merge. A run holds a Postgres advisory lock on the conversation,
so parallel runs and retries do the work once; the conversation row is locked while its state changes.
"""
