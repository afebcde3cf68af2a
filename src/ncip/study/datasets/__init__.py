"""Loaders for standard on-disk dataset formats, one module per format.

Importing this package imports every module in it, and each module registers its datasets with
:func:`ncip.study.data.register_dataset`: adding a dataset is adding a module here (see
docs/internals.md, "Adding a dataset").
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
