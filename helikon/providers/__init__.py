"""Model adapters: OpenAI, Anthropic, Gemini, Bedrock, and retrying.

Each adapter speaks its provider's HTTP API directly with httpx (install
the extra: ``pip install 'paigasus-helikon[openai]'``), implements the
:class:`~helikon.protocols.Model` protocol and is imported from its own
module, so ``import helikon`` never pays for them::

    from helikon.providers.openai import OpenAIModel
    from helikon.providers.anthropic import AnthropicModel
    from helikon.providers.gemini import GeminiModel
    from helikon.providers.bedrock import BedrockModel
    from helikon.providers.retry import RetryingModel, RetryPolicy
"""
