"""Ready-made tools confined to a sandbox (placeholder while building)."""

from __future__ import annotations

from helikon.tools.sandbox._files import EditTool, ReadTool, WriteTool
from helikon.tools.sandbox._sandbox import Sandbox

__all__ = ["EditTool", "ReadTool", "Sandbox", "WriteTool"]
