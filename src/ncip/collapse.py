"""``ncip.collapse``, the public name of :mod:`ncip.core.collapse` (σ_cos and Algorithm 1)."""

import sys

from ncip.core import collapse as _module

sys.modules[__name__] = _module
