"""justai-memory: the household assistant's long-term memory."""

# The release: the date of its CHANGELOG.md section (CalVer, PEP 440 form). The MCP server's serverInfo.version.
__version__ = "2026.12.2"
