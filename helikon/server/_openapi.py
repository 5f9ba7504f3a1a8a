"""The server's OpenAPI 3.1 document (written by hand: the routes are few and
fixed, and it names no agent, so it is served without authentication)."""

from __future__ import annotations

from typing import Any

from helikon._version import __version__

_ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {
        400: "Bad request (query, JSON, header)",
        401: "Authentication required",
        404: "No such agent or run",
        409: "The run refuses these decisions",
        408: "The body was not received in time",
        413: "Body too large",
        415: "Body is not JSON",
        422: "Body has the wrong shape",
        500: "The run could not start",
        501: "The run backend cannot do this",
        503: "The server admits no run now (queue full, or draining); see Retry-After",
    }
    return {str(s): _json(_ERROR, text[s]) for s in statuses}


_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_RUN = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}
_SINCE = {
    "name": "since",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1},
}
_LAST = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "The `id` of the last event received: the stream resumes after it",
    "schema": {"type": "string", "pattern": "^([0-9]{1,18})?$"},
}
_SESSION = {
    "name": "X-Session-Id",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": "^[ -~]{1,256}$"},
}
_PROBE = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"enum": ["ok", "ready", "draining", "full"]}},
}
_TAGS = {
    "UserMessage": "user_message",
    "SystemMessage": "system_message",
    "AssistantMessage": "assistant_message",
    "ToolCall": "tool_call",
    "ToolResult": "tool_result",
    "TextPart": "text",
    "ReasoningPart": "reasoning",
    "ImagePart": "image",
}


def _tagged(tag: str, required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    """An item or content part, tagged helikon's way or the book's."""
    return {
        "type": "object",
        "required": ["type", *required],
        "properties": {"type": {"enum": [tag, _TAGS[tag]]}, **properties},
    }


_TEXT = {"type": "string"}
_PARTS = {
    "type": "array",
    "items": {
        "oneOf": [
            _tagged("TextPart", ["text"], {"text": _TEXT}),
            _tagged("ReasoningPart", ["text"], {"text": _TEXT, "signature": {"type": ["string", "null"]}}),
            _tagged(
                "ImagePart",
                [],
                {
                    "url": {"type": ["string", "null"]},
                    "data": {"type": ["string", "null"]},
                    "media_type": {"type": ["string", "null"]},
                },
            ),
        ]
    },
}
#: A message item: helikon's tagged form (``UserMessage``/``TextPart``) or
#: the book's snake-case one (``user_message``/``text``).
_ITEM = {
    "oneOf": [
        _tagged("UserMessage", ["content"], {"content": _PARTS}),
        _tagged("SystemMessage", ["content"], {"content": _PARTS}),
        _tagged("AssistantMessage", ["content"], {"content": _PARTS, "agent": {"type": ["string", "null"]}}),
        _tagged(
            "ToolCall",
            ["call_id", "name", "arguments"],
            {"call_id": _TEXT, "name": _TEXT, "arguments": _TEXT},
        ),
        _tagged(
            "ToolResult",
            ["call_id", "name", "content"],
            {"call_id": _TEXT, "name": _TEXT, "content": _TEXT, "is_error": {"type": "boolean"}},
        ),
    ]
}
_NULLABLE_TEXT = {"type": ["string", "null"]}
#: A cost in the pricing's currency, as a decimal string (``"0.00425"``).
_COST = {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"}
#: Each event's own fields (helikon.events), beside ``type``, ``seq`` and
#: ``path``. A field the event may leave out is not required: ``cost`` is
#: written only when the turn's model has a price.
_EVENT_FIELDS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "RunStarted": (["agent", "run_id"], {"agent": _TEXT, "run_id": _TEXT}),
    "TurnStarted": (["turn"], {"turn": {"type": "integer"}}),
    "TokenDelta": (["text"], {"text": _TEXT}),
    "ReasoningDelta": (["text"], {"text": _TEXT}),
    "ToolCallDelta": (
        ["call_id", "name", "args_delta"],
        {
            "call_id": _NULLABLE_TEXT,
            "name": _NULLABLE_TEXT,
            "args_delta": _TEXT,
            "index": {"type": ["integer", "null"]},
        },
    ),
    # ``cost``: the cost of the model turn this event closes (docs/observability.md).
    "MessageOutput": (["item"], {"item": {"type": "object"}, "cost": _COST}),
    "ToolCallItem": (["item"], {"item": {"type": "object"}, "cost": _COST}),
    "ToolOutputItem": (["item"], {"item": {"type": "object"}}),
    "HandoffItem": (["from_agent", "to_agent"], {"from_agent": _TEXT, "to_agent": _TEXT}),
    "AgentUpdated": (["agent"], {"agent": _TEXT}),
    "GuardrailTriggered": (["kind", "info"], {"kind": _TEXT, "info": _TEXT}),
    "ApprovalRequested": (["call_id", "tool", "args"], {"call_id": _TEXT, "tool": _TEXT, "args": {}}),
    "PermissionDenied": (["tool", "reason"], {"tool": _TEXT, "reason": _TEXT}),
    "RepairStarted": (["attempt"], {"attempt": {"type": "integer"}}),
    "StructuredOutputFailed": (
        ["schema_errors", "final_text"],
        {"schema_errors": {"type": "array", "items": _TEXT}, "final_text": _TEXT},
    ),
    "RunCompleted": (["usage"], {"usage": {"type": "object"}}),
    # ``synthetic``: the server's own terminal frame for a run that ended without one.
    "RunFailed": (
        ["error"],
        {"error": {"type": "object"}, "usage": {"type": "object"}, "synthetic": {"type": "boolean"}},
    ),
}


def _event(kind: str) -> dict[str, Any]:
    required, fields = _EVENT_FIELDS[kind]
    return {
        "type": "object",
        "required": ["type", "seq", *required],
        "properties": {
            "type": {"const": kind},
            "seq": {"type": "integer"},
            # The agent-tree path that emitted it (absent: the run's own agent).
            "path": {"type": "array", "items": _TEXT},
            **fields,
        },
        "additionalProperties": False,
    }


#: A run event as the server sends it: one variant per event type, each
#: naming every field the server writes (a field it does not name is refused).
_EVENT = {"oneOf": [_event(kind) for kind in _EVENT_FIELDS]}
_SSE = {"description": "Server-Sent Events, one per run event", "content": {"text/event-stream": {}}}


def openapi_document(title: str, auth: bool = True) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the agent server's routes; with
    ``auth`` false (no authenticator configured) it declares no security
    and no 401 answers."""
    document = _document(title)
    if not auth:
        del document["security"]
        del document["components"]["securitySchemes"]
        for path in document["paths"].values():
            for operation in path.values():
                operation.pop("security", None)
                operation["responses"].pop("401", None)
    return document


def _document(title: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": __version__},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                        }
                    },
                },
                "RunRequest": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["input"],
                            "properties": {"input": {"type": "string"}},
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "required": ["messages"],
                            "properties": {
                                "messages": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"$ref": "#/components/schemas/Item"},
                                }
                            },
                            "additionalProperties": False,
                        },
                    ]
                },
                "Item": _ITEM,
                "Event": _EVENT,
                "RunResult": {
                    "type": "object",
                    "required": ["run_id", "agent", "status", "output", "events"],
                    "properties": {
                        "run_id": {"type": "string"},
                        "agent": {"type": "string"},
                        "status": {"enum": ["completed", "failed", "cancelled"]},
                        "output": {"type": "string"},
                        "error": {},
                        "usage": {},
                        "events": {"type": "array", "items": {"$ref": "#/components/schemas/Event"}},
                    },
                },
                "RunStatus": {
                    "type": "object",
                    "required": ["run_id", "agent", "status"],
                    "properties": {
                        "run_id": {"type": "string"},
                        "agent": {"type": "string"},
                        "status": {
                            "enum": [
                                "queued",
                                "running",
                                "awaiting_approval",
                                "completed",
                                "failed",
                                "cancelled",
                            ]
                        },
                        "session_id": {"type": ["string", "null"]},
                        "events": {"type": "integer"},
                        "output": {"type": ["string", "null"]},
                        "error": {},
                        "usage": {},
                        "pending_approvals": {"type": "array", "items": {"type": "object"}},
                    },
                },
                "Decisions": {
                    "type": "object",
                    "required": ["decisions"],
                    "properties": {
                        "decisions": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "required": ["call_id", "approved"],
                                "properties": {
                                    "call_id": {"type": "string"},
                                    "approved": {"type": "boolean"},
                                    "reason": {"type": "string"},
                                    "path": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        }
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {
                "get": {
                    "summary": "Liveness: the process answers (never waits on runs)",
                    "operationId": "health",
                    "security": [],
                    "responses": {"200": _json(_PROBE, "Alive")},
                }
            },
            "/ready": {
                "get": {
                    "summary": "Readiness: 503 while draining or while the run queue is full",
                    "operationId": "ready",
                    "security": [],
                    "responses": {
                        "200": _json(_PROBE, "Admitting runs"),
                        "503": _json(_PROBE, "Not admitting runs (draining, or full)"),
                    },
                }
            },
            "/agents": {
                "get": {
                    "summary": "List the agents",
                    "operationId": "listAgents",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["agents"],
                                "properties": {"agents": {"type": "array", "items": {"type": "object"}}},
                            },
                            "The agents",
                        ),
                        **_errors(401),
                    },
                }
            },
            "/agents/{name}/runs": {
                "get": {
                    "summary": "The caller's runs of this agent, newest first, a page at a time",
                    "operationId": "listRuns",
                    "parameters": [
                        _NAME,
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                        },
                        {
                            "name": "after",
                            "in": "query",
                            "required": False,
                            "description": "The `next` of the previous page (empty: the first page)",
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["runs", "next"],
                                "properties": {
                                    "runs": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/RunStatus"},
                                    },
                                    "next": {"type": ["string", "null"]},
                                },
                            },
                            "A page of runs; `next` is the `after` of the next page (null on the last)",
                        ),
                        **_errors(400, 401, 404, 501),  # 404: no such agent, or `after` names no run
                    },
                },
                "post": {
                    "summary": "Start a run: one-shot JSON, ?stream=sse, or ?mode=async (202)",
                    "operationId": "startRun",
                    "parameters": [
                        _NAME,
                        {
                            "name": "stream",
                            "in": "query",
                            "required": False,
                            "description": "sse: answer with the run's events; with mode=async the run "
                            "outlives the connection",
                            "schema": {"enum": ["sse"]},
                        },
                        {
                            "name": "mode",
                            "in": "query",
                            "required": False,
                            "schema": {"enum": ["sync", "async"]},
                        },
                        _SESSION,
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/RunRequest"}}
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "The finished run (one-shot) or its events (stream=sse)",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}},
                                "text/event-stream": {},
                            },
                        },
                        "202": _json(
                            {
                                "type": "object",
                                "required": ["run_id", "status_url", "events_url"],
                                "properties": {
                                    "run_id": {"type": "string"},
                                    "status_url": {"type": "string"},
                                    "events_url": {"type": "string"},
                                },
                            },
                            "The run started in the background",
                        ),
                        **_errors(400, 401, 404, 408, 413, 415, 422, 500, 503),
                    },
                },
            },
            "/agents/{name}/runs/{run_id}": {
                "get": {
                    "summary": "A run's status and, once finished, its result",
                    "operationId": "getRun",
                    "parameters": [_NAME, _RUN],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/RunStatus"}, "The run"),
                        **_errors(401, 404),
                    },
                }
            },
            "/agents/{name}/runs/{run_id}/events": {
                "get": {
                    "summary": "The run's events: replayed, then live (SSE, or WebSocket on upgrade)",
                    "operationId": "runEvents",
                    "parameters": [_NAME, _RUN, _SINCE, _LAST],
                    "responses": {"200": _SSE, **_errors(400, 401, 404)},
                }
            },
            "/agents/{name}/runs/{run_id}/approvals": {
                "post": {
                    "summary": "Answer the tool calls a suspended run waits on",
                    "operationId": "approveRun",
                    "parameters": [_NAME, _RUN],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Decisions"}}
                        },
                    },
                    "responses": {
                        "200": _json(
                            {"$ref": "#/components/schemas/RunStatus"}, "The run after the decisions"
                        ),
                        **_errors(400, 401, 404, 408, 409, 413, 415, 422),
                    },
                }
            },
            "/agents/{name}/runs/{run_id}/cancel": {
                "post": {
                    "summary": "Cancel a run (async runs outlive their request: cancel them here)",
                    "operationId": "cancelRun",
                    "parameters": [_NAME, _RUN],
                    "responses": {
                        "202": _json({"$ref": "#/components/schemas/RunStatus"}, "Cancellation requested"),
                        **_errors(401, 404),
                    },
                }
            },
        },
    }


__all__ = ["openapi_document"]
