"""``ncip.sequences``, the public name of :mod:`ncip.core.sequences` (NCIP for sequences)."""

import sys

from ncip.core import sequences as _module

sys.modules[__name__] = _module
