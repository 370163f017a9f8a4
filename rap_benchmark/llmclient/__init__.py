"""The one OpenAI-compatible client, below both of its users (the LLM instrument in
``pipeline/instrument/llm`` and the agents' backends): endpoints with failover and backoff
(:mod:`.endpoints`), what attempts left behind (:mod:`.failures`) and the price table
(:mod:`.pricing`)."""
