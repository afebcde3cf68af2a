"""What a library's exception says, fit for ``ncip``'s one-line errors."""

from __future__ import annotations


def reason(e: BaseException, limit: int = 160, empty: str | None = None) -> str:
    """The first sentence of ``e``'s first line, at most ``limit`` characters (cut at a word,
    with "..."); ``empty`` (the exception's type name if None) where it says nothing."""
    text = str(e).strip()
    if not text:
        return type(e).__name__ if empty is None else empty
    line = text.splitlines()[0].strip()
    end = line.find(". ")
    if end >= 0:
        line = line[: end + 1]
    if len(line) <= limit:
        return line
    cut = line[: limit - 3].rsplit(" ", 1)[0]
    return (cut if cut else line[: limit - 3]) + "..."
