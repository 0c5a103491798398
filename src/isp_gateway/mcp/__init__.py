"""The MCP server for AI agents at /mcp (CALLERS.md 5): server.py mounts it, tools.py holds
the eleven tools, auth.py decides the caller and its scopes."""
