"""Reads of the memories app (vector search included), one module per sub-domain."""
