"""A full-size rehearsal of the build with no GPU and no network: a synthetic arXiv metadata
snapshot in the real JSON-lines format (:mod:`.snapshot`) and a scripted OpenAI-compatible server
that answers every prompt of the LLM instrument and injects faults (:mod:`.scripted_server`)."""
