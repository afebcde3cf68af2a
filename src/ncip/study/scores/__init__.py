"""Prioritization scores: NCIP's own (TVD, margin, NCIP) and the baseline methods' registry.

Importing this package imports every module in it, which registers its methods (see
:mod:`ncip.study.scores.registry`): adding a baseline is adding a module here.
"""

import importlib
import pkgutil

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
