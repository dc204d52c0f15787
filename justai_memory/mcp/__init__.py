"""The MCP server at ``/mcp``: ``server`` (the tools, on the API's schemas and services) and ``auth`` (the
Host and bearer-token checks in front of the SDK's transport: an API token with its headers, or an OAuth
token answered as its connection's binding).

Inside this package ``import mcp`` is still the SDK's top-level package (imports are absolute).
"""
