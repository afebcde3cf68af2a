"""``ncip.lightning``: the public name of :mod:`ncip.tool.lightning` (Lightning callback)."""

import sys

from ncip.tool import lightning as _module

sys.modules[__name__] = _module
