"""OpenTelemetry spans and metrics of agent runs, from one observer.

:class:`ObservingInterpreter` wraps any interpreter and reports what it does
through the OpenTelemetry API, following the GenAI semantic conventions:

- one ``invoke_agent {agent}`` span per run, holding one ``agent.turn`` span
  per model turn, which holds the turn's ``chat {model}`` span and one
  ``execute_tool {tool}`` span per tool call; handoff targets, workflow
  children and agents used as tools — sub-runs of the run's agent tree —
  nest under their parent;
- the ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``
  histograms and a ``helikon.tool.calls`` counter.

:class:`Telemetry` says where the signals go (the global providers by
default) and whether message content is captured (off by default). Put it on
the run context's :class:`~helikon.context.TracerHandle` to observe every
``agent.run`` automatically::

    ctx = RunContext.ephemeral(None).with_tracer(
        TracerHandle.builder().with_session_id("s-1").with_tracer(Telemetry()).build()
    )

Only ``opentelemetry-api`` is needed (the ``otel`` extra); exporters and the
SDK are the application's choice. See ``docs/observability.md``.
"""

from helikon.observability._interpreter import ObservingInterpreter, Telemetry

__all__ = ["ObservingInterpreter", "Telemetry"]
