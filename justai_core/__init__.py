"""What every app may use and that uses no app: the one application error, where a model runs
(local or cloud), and the AI router that reaches model providers.

A package of its own below ``people`` (the lowest app), so that the import contract has no
exceptions: every layer may import it, and it imports no layer. Named ``justai_core`` rather than
``core`` so that it cannot collide with another installed top-level ``core`` package, and rather
than a module of ``justai_memory``, which is the top layer (settings, URLs, the API).
"""
