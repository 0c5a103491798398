"""The MCP server for AI agents at /mcp (CALLERS.md 5): server.py mounts it and dispatches
calls, tools/ holds the tools (one module per family), results.py shapes their answers,
instructions.py tells an agent what its key can do, auth.py decides the caller and scopes."""
