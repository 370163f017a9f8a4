"""Audits of the measurement instrument: parallel-instrument agreement and the human audit."""

from rap_benchmark.audit.align import cross_fit, hungarian_map
from rap_benchmark.audit.human import analyse, design_sample, tv_permutation_test
from rap_benchmark.audit.parallel import parallel_agreement, second_instrument, truth_agreement

__all__ = [
    "analyse",
    "cross_fit",
    "design_sample",
    "hungarian_map",
    "parallel_agreement",
    "second_instrument",
    "truth_agreement",
    "tv_permutation_test",
]
