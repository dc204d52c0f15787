"""Writes of the memories app, one module per sub-domain."""
