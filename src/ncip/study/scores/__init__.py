"""Prioritization scores: NCIP's own (TVD, margin, NCIP) and the baseline methods' registry.

Every module in this package registers its methods (see :mod:`ncip.study.scores.registry`):
adding a baseline is adding a module here. The registry imports them the first time a method
is looked up, so a stage that needs one module (score-ncip: :mod:`.ncip`) does not import
every baseline's dependencies (PyTorch, xgboost).
"""

from ncip.core.scores import deepgini, entropy, margin, msp, ncip_score, pcs, tvd, zscore
from ncip.study.scores.registry import (
    MethodInfo,
    ScoringContext,
    get_method,
    list_methods,
    method_info,
    register_method,
    resolve_options,
)

__all__ = [
    "MethodInfo",
    "ScoringContext",
    "deepgini",
    "entropy",
    "get_method",
    "list_methods",
    "margin",
    "method_info",
    "msp",
    "ncip_score",
    "pcs",
    "register_method",
    "resolve_options",
    "tvd",
    "zscore",
]
