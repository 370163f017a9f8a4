"""The leaderboard beyond its rows: model-vs-model contrasts, rank intervals and exposure strata
(``stats``), the cells people read (``display``), the figures (``plots``) and ``index.html``
(``page``). Scoring itself is ``rap_benchmark.evaluation.submissions``."""
