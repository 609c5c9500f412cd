"""Optional integrations with agent frameworks; each needs its extra, the core imports none.

==========================================  =====================================  ==============
module                                      what                                   extra
==========================================  =====================================  ==============
``holon_ctx.integrations.openai_agents``    an OpenAI Agents SDK ``Session``       openai-agents
``holon_ctx.integrations.mini_swe_agent``   a mini-swe-agent model wrapper         mini-swe-agent
``holon_ctx.integrations.langchain``        LangChain messages, both ways          langchain
==========================================  =====================================  ==============

Each adapter only uses the public library API (:class:`holon_ctx.Session` helpers in,
:class:`holon_ctx.Request` out), so it does not change when the engine behind a request does.
"""

#: The package itself exports nothing: import the adapter you need (each needs its extra).
__all__: list[str] = []
