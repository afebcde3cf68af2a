"""``ncip.metrics``, the public name of :mod:`ncip.core.metrics` (RAUC-n, APFD and fault types)."""

import sys

from ncip.core import metrics as _module

sys.modules[__name__] = _module
