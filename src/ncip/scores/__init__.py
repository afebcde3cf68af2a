"""Prioritization scores: NCIP's own (TVD, margin, NCIP) and the baseline methods' registry.

Importing this package imports every module in it, which registers its methods (see
:mod:`ncip.scores.registry`): adding a baseline is adding a module here.
"""

import importlib
import pkgutil

from ncip.scores.ncip import margin, ncip_score, tvd, zscore
from ncip.scores.registry import (
    MethodInfo,
    ScoringContext,
    get_method,
    list_methods,
    method_info,
    register_method,
    resolve_options,
)
from ncip.scores.uncertainty import deepgini, entropy, msp, pcs

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

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
