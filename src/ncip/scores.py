"""``ncip.scores``: the public name of :mod:`ncip.study.scores` (scores, methods registry)."""

import sys

from ncip.study import scores as _module

sys.modules[__name__] = _module
