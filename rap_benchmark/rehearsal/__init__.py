"""A full-size rehearsal of the build with no GPU and no network: a synthetic arXiv metadata
snapshot in the real JSON-lines format (:mod:`.snapshot`). The scripted OpenAI-compatible server
that answers the LLM instrument's prompts is :mod:`rap_benchmark.testing.scripted_server`."""
