"""A ``--model`` string: the user's module or file imported (whatever its import does turned
into one line), and the literal arguments written after the factory's name."""

from __future__ import annotations

from typing import Any

from ncip.core.factory import ModelSourceError, import_named
from ncip.tool.messages import reason

MAX_ARGUMENTS = 10_000  # characters of literal arguments (deeply nested ones exhaust the parser)


def split_call(spec: str) -> tuple[str, tuple, dict[str, Any]]:
    """``"mynet:Net(64, hidden=256)"`` -> ``("mynet:Net", (64,), {"hidden": 256})``: the
    arguments are Python literals (numbers, strings, lists, dicts, True/None), nothing is
    evaluated; a spec without parentheses has none."""
    import ast

    # where the module (a path may hold '(') ends: after ".py", else at the first ':'
    colon = spec.index(".py:") + 3 if ".py:" in spec else spec.find(":")
    if not spec.endswith(")") or "(" not in spec[colon + 1 :]:
        return spec, (), {}
    name = spec[: spec.index("(", colon + 1)]
    if len(spec) - len(name) > MAX_ARGUMENTS:
        raise ModelSourceError(
            f"--model: the arguments after {name} are {len(spec) - len(name):,} characters "
            f"long; give at most {MAX_ARGUMENTS:,} (or build the model in a function)"
        )
    try:
        call = ast.parse(f"f{spec[len(name) :]}", mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            raise ValueError
        args = tuple(ast.literal_eval(a) for a in call.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        if None in kwargs:
            raise ValueError
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ModelSourceError(
            f"--model {spec[:80]!r}: the arguments after {name} must be Python literals, e.g. "
            f"'{name}(hidden=256, depth=3)' (quote the whole --model for the shell)"
        ) from None
    return name, args, kwargs


def import_user(spec: str):
    """Import the user's model module or file, turning whatever its import does into one line:
    an exception, a syntax error, ``sys.exit`` (argv is hidden from scripts that parse it)."""
    import sys

    mod = spec.rpartition(":")[0]
    see = (
        f"python -c 'import runpy; runpy.run_path(\"{mod}\")'"
        if mod.endswith(".py")
        else (f"python -c 'import {mod}'")
    )
    argv = sys.argv
    sys.argv = [mod]
    try:
        return import_named(spec)
    except ModelSourceError:
        raise
    except SystemExit as e:
        raise ModelSourceError(
            f"--model {spec}: importing {mod} called sys.exit({e.code!r}); guard its script "
            'code with `if __name__ == "__main__":`'
        ) from None
    except BaseException as e:  # noqa: BLE001  (user code: any error, one line)
        if isinstance(e, KeyboardInterrupt):
            raise
        first = reason(e, empty="")
        raise ModelSourceError(
            f"--model {spec}: importing {mod} raised {type(e).__name__}"
            + (f": {first}" if first else "")
            + f"; run `{see}` to see the traceback"
        ) from None
    finally:
        sys.argv = argv
