"""The one base class of every error a user can cause (bad input, bad files, bad parameters).

The CLI and the stage scripts print such an error as one line and exit with code 2; any other
exception is a bug and shows its traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

EXIT_BAD_INPUT = 2


class NcipError(Exception):
    """A problem with the user's input that the user must fix; the message says how."""


class InputError(NcipError, ValueError):
    """A value the user gave (a parameter, a file's content) is unusable."""


class MissingFileError(NcipError, FileNotFoundError):
    """A file or folder the user (or an earlier stage) should have made is not there."""


class MissingEntryError(NcipError, KeyError):
    """Something looked up by name (an option, a split, an epoch) is not there."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def user_errors(fn: Callable) -> Callable:
    """Wrap a command: an :class:`NcipError` becomes ``error: <message>`` on stderr and exit code
    2 (outputs untouched: commands check before they write); any other exception is a bug and
    keeps its traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NcipError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(EXIT_BAD_INPUT) from None

    return wrapper
