"""A projection laid out for a provider.

    providers.py       a stateless projection as OpenAI or Anthropic messages, and its count
    native.py          a history laid out as the provider's own conversation (RFC 0010): a session
                       request's parts and their messages
"""
