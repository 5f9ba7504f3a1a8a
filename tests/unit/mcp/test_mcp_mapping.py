"""How MCP results and tool listings become what the model sees.

The rules are the book's: structured content passes through, one block is
one value, several are an array, non-text blocks are described (never
pasted as base64), ``isError`` text is the tool error's message, and only
``readOnlyHint: true`` makes a tool READ_ONLY (never WRITE). Lazy mode's
search matches names and descriptions case-insensitively and caps at 20.
"""

from __future__ import annotations

import base64

import pytest
from mcp import types

from helikon.mcp._mapping import (
    PLACEHOLDER_SCHEMA,
    SEARCH_CAP,
    RemoteTool,
    error_message,
    output_value,
    remote_tool,
    search,
    tool_effect,
)
from helikon.model import ToolEffect


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_structured_content_passes_through_as_is_whatever_the_text_says() -> None:
    result = types.CallToolResult(content=[text("it is 22 degrees")], structured_content={"celsius": 22})
    assert output_value(result) == {"celsius": 22}


def test_one_text_block_is_its_string_and_several_blocks_are_an_array() -> None:
    assert output_value(types.CallToolResult(content=[text("42")])) == "42"
    both = types.CallToolResult(content=[text("a"), text("b")])
    assert output_value(both) == ["a", "b"]
    assert output_value(types.CallToolResult(content=[])) == ""


def test_images_audio_and_resources_are_described_not_pasted() -> None:
    blob = base64.b64encode(b"\x89PNG" + bytes(1496)).decode()
    image = types.ImageContent(type="image", data=blob, mime_type="image/png")
    audio = types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav")
    link = types.ResourceLink(type="resource_link", name="report", uri="https://example.com/r.pdf")
    embedded_blob = types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(uri="file:///x.bin", blob="AAAA", mime_type="application/zip"),
    )
    embedded_text = types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri="file:///a.md", text="# Notes")
    )
    values = output_value(types.CallToolResult(content=[image, audio, link, embedded_blob, embedded_text]))
    assert values == [
        "[image: image/png, 1.5 kB]",
        "[audio: audio/wav, 4 bytes]",
        "[resource link: report <https://example.com/r.pdf>]",
        "[resource: file:///x.bin, application/zip, 3 bytes]",
        "# Notes",
    ]
    assert blob[:12] not in str(values)


def test_an_error_result_gives_its_text_or_says_there_was_none() -> None:
    failed = types.CallToolResult(content=[text("Access denied"), text("path outside allowed directories")])
    assert error_message(failed) == "Access denied\npath outside allowed directories"
    assert error_message(types.CallToolResult(content=[], is_error=True)) == (
        "the MCP tool reported an error (no details)"
    )


@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        (types.ToolAnnotations(read_only_hint=True), ToolEffect.READ_ONLY),
        (types.ToolAnnotations(read_only_hint=False), ToolEffect.SIDE_EFFECT),
        (types.ToolAnnotations(read_only_hint=None, destructive_hint=False), ToolEffect.SIDE_EFFECT),
        # "Not destructive, idempotent" still is not "writes files the user accepts".
        (types.ToolAnnotations(destructive_hint=False, idempotent_hint=True), ToolEffect.SIDE_EFFECT),
        (None, ToolEffect.SIDE_EFFECT),
    ],
)
def test_only_read_only_hint_true_is_read_only_and_nothing_is_write(
    annotations: types.ToolAnnotations | None, effect: ToolEffect
) -> None:
    assert tool_effect(annotations) is effect


def test_a_listed_tool_gets_the_prefix_and_keeps_its_schemas() -> None:
    listed = types.Tool(
        name="get_weather",
        description=None,
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        output_schema={"type": "object"},
    )
    tool = remote_tool(listed, "wx_")
    assert (tool.name, tool.remote_name, tool.description) == ("wx_get_weather", "get_weather", "")
    assert tool.input_schema == {"type": "object", "properties": {"city": {"type": "string"}}}
    assert tool.output_schema == {"type": "object"}
    assert PLACEHOLDER_SCHEMA == {"type": "object", "additionalProperties": True}


def many(count: int) -> list[RemoteTool]:
    return [
        RemoteTool(
            f"srv_tool_{i:02}",
            f"tool_{i:02}",
            f"Does thing {i}",
            {"type": "object"},
            None,
            ToolEffect.READ_ONLY,
        )
        for i in range(count)
    ]


def test_search_matches_names_and_descriptions_in_any_case_in_listing_order() -> None:
    tools = [
        RemoteTool("fs_read", "read", "Read a FILE.", {"type": "object"}, None, ToolEffect.READ_ONLY),
        RemoteTool("fs_list", "list", "List a directory.", {"type": "object"}, None, ToolEffect.READ_ONLY),
        RemoteTool(
            "fs_file_info", "file_info", "Stat a path.", {"type": "object"}, None, ToolEffect.READ_ONLY
        ),
    ]
    answer = search(tools, "fIlE")
    assert answer == {
        "tools": [
            {"name": "fs_read", "description": "Read a FILE.", "input_schema": {"type": "object"}},
            {"name": "fs_file_info", "description": "Stat a path.", "input_schema": {"type": "object"}},
        ],
        "total_matches": 2,
    }
    assert search(tools, "nothing like it") == {"tools": [], "total_matches": 0}


@pytest.mark.parametrize(
    ("count", "truncated"), [(SEARCH_CAP - 1, False), (SEARCH_CAP, False), (SEARCH_CAP + 1, True)]
)
def test_search_caps_at_twenty_and_says_truncated_only_when_over(count: int, truncated: bool) -> None:
    answer = search(many(count), "THING")
    assert len(answer["tools"]) == min(count, SEARCH_CAP)
    assert answer["total_matches"] == count
    assert answer.get("truncated", False) is truncated and ("truncated" in answer) is truncated


def test_search_reports_the_full_count_of_a_big_server() -> None:
    answer = search(many(3000), "")
    assert (len(answer["tools"]), answer["total_matches"], answer["truncated"]) == (20, 3000, True)
    assert [t["name"] for t in answer["tools"]][:2] == ["srv_tool_00", "srv_tool_01"]
