"""Evaluation harnesses: lm-evaluation-harness (:mod:`.lmeval`) and Inspect AI (:mod:`.inspect`).

Both run the package's own episode loop, Search tool, prompts and scorer; both read their
instance from :mod:`.source` (a build, the published datasets through :mod:`.hub_instance`, or
the embedded mini); both convert their logs into prediction files with the submission metadata of
:mod:`.submission`. (The scripted model server for tests is :mod:`rap_benchmark.testing.scripted_server`.)
Nothing here imports a harness at import time.
"""
