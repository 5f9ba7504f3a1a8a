"""Ready-made tools confined to a sandbox (placeholder while building)."""

from __future__ import annotations

from helikon.tools.sandbox._files import EditTool, ReadTool, WriteTool
from helikon.tools.sandbox._sandbox import Sandbox
from helikon.tools.sandbox._search import GlobTool, GrepTool

__all__ = ["EditTool", "GlobTool", "GrepTool", "ReadTool", "Sandbox", "WriteTool"]
