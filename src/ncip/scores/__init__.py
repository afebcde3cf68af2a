"""Prioritization scores: NCIP's own (TVD, margin, NCIP) and the baseline methods' registry.

Importing this package registers every baseline; see :mod:`ncip.scores.registry` for how to
add one.
"""

from ncip.scores import (  # noqa: F401  (importing registers the methods)
    dropout,
    effimap,
    nns,
    random_selection,
    sets,
    surprise,
    tdpr,
    uncertainty,
)
from ncip.scores.ncip import margin, ncip_score, tvd, zscore
from ncip.scores.registry import (
    ScoringContext,
    get_method,
    list_methods,
    register_method,
)
from ncip.scores.uncertainty import deepgini, entropy, msp, pcs

__all__ = [
    "ScoringContext",
    "deepgini",
    "entropy",
    "get_method",
    "list_methods",
    "margin",
    "msp",
    "ncip_score",
    "pcs",
    "register_method",
    "tvd",
    "zscore",
]
