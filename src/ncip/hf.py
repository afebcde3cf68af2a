"""``ncip.hf``, the public name of :mod:`ncip.tool.hf` (the Hugging Face Trainer callback)."""

import sys

from ncip.tool import hf as _module

sys.modules[__name__] = _module
