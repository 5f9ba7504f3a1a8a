"""Each adapter's keyword options are declared once (a ``TypedDict``) and every
named constructor takes them: the same keyword names as before, unknown ones
refused like a plain signature refuses them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from helikon.providers.anthropic import AnthropicModel, AnthropicOptions, CacheStrategy
from helikon.providers.bedrock import AwsCredentials, BedrockEnvOptions, BedrockModel, BedrockOptions
from helikon.providers.gemini import GeminiModel, GeminiOptions
from helikon.providers.openai import OpenAIModel, OpenAIOptions

KEY = AwsCredentials("AKIDTEST", "secret")
NOVA = "amazon.nova-micro-v1:0"


def keys(options: type) -> set[str]:
    return set(options.__required_keys__ | options.__optional_keys__)  # type: ignore[attr-defined]


def test_the_keyword_names_are_the_ones_the_constructors_always_took() -> None:
    assert keys(AnthropicOptions) == {
        "api_key", "base_url", "http_client", "stream", "max_tokens", "cache", "thinking",
        "structured_output", "parallel_tool_calls", "anthropic_version", "betas", "headers",
    }  # fmt: skip
    assert keys(OpenAIOptions) == {
        "api_key", "base_url", "organization", "project", "extra_headers", "extra_body", "http_client",
        "stream", "azure", "api_version", "provider_name", "system_role", "max_tokens_param",
        "stream_usage", "reasoning_effort", "reasoning_summary", "parallel_tool_calls", "store",
        "capabilities", "profile", "structured_output",
    }  # fmt: skip
    assert keys(GeminiOptions) == {
        "base_url", "http_client", "stream", "include_thoughts", "thinking_budget", "thinking_level",
        "headers",
    }  # fmt: skip
    assert keys(BedrockEnvOptions) == {
        "region", "profile", "http_client", "base_url", "stream", "additional_model_request_fields",
        "stop_sequences", "prompt_caching", "extra_body",
    }  # fmt: skip
    assert keys(BedrockOptions) == keys(BedrockEnvOptions) | {"credentials", "api_key", "use_botocore"}


@pytest.mark.parametrize(
    "build",
    [
        lambda **kw: AnthropicModel.messages("claude-sonnet-4-5", api_key="k", **kw),
        lambda **kw: AnthropicModel("claude-sonnet-4-5", api_key="k", **kw),
        lambda **kw: OpenAIModel.chat("gpt-4o", api_key="k", **kw),
        lambda **kw: OpenAIModel.responses("gpt-4o", api_key="k", **kw),
        lambda **kw: GeminiModel.developer("gemini-2.5-flash", "k", **kw),
        lambda **kw: GeminiModel.vertex("gemini-2.5-flash", "p", bearer_token="t", **kw),
        lambda **kw: BedrockModel.converse(NOVA, region="us-east-1", credentials=KEY, **kw),
    ],
    ids=["anthropic.messages", "anthropic", "openai.chat", "openai.responses", "gemini", "vertex", "bedrock"],
)
def test_an_unknown_keyword_is_a_type_error_naming_it(build: Any) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'strem' \(it takes: .*stream"):
        build(strem=False)


def test_options_reach_the_model_through_the_named_constructors() -> None:
    client = httpx.AsyncClient()
    anthropic = AnthropicModel.messages(
        "claude-sonnet-4-5", api_key="k", stream=False, cache=CacheStrategy.SYSTEM_AND_TOOLS, betas=["b1"]
    )
    assert anthropic.options.stream is False and anthropic.options.cache is CacheStrategy.SYSTEM_AND_TOOLS
    assert repr(anthropic).endswith("stream=False)")
    openai = OpenAIModel.responses("gpt-4o", api_key="k", base_url="http://127.0.0.1:1/v1", stream=False)
    assert openai.base_url == "http://127.0.0.1:1/v1" and openai.capabilities.streaming is False
    gemini = GeminiModel.developer("gemini-2.5-flash", "k", stream=False, http_client=client)
    assert gemini.capabilities.streaming is False
    bedrock = BedrockModel.converse(NOVA, region="eu-west-1", credentials=KEY, stream=False)
    assert bedrock.region == "eu-west-1" and bedrock.capabilities.streaming is False


def test_from_env_still_refuses_explicit_credentials() -> None:
    import trio

    with pytest.raises(TypeError, match=r"BedrockModel.from_env\(\) got an unexpected keyword argument"):
        trio.run(lambda: BedrockModel.from_env(NOVA, credentials=KEY))  # type: ignore[call-arg]
