"""Test doubles that speak the real protocols, for tests, rehearsals and benchmarks.

:mod:`.scripted_server` is the one scripted OpenAI-compatible server: the agents' episodes (tool
calls or the text tool protocol, ``/v1/completions`` for lm-eval) and every prompt of the LLM
instrument, answered in the reply styles of served models (fences, preambles, reasoning blocks,
truncation, refusals) and with injected transport faults. Nothing in the package imports it.
"""
