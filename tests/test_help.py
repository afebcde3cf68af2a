"""`ncip rank --help` reads in an 80-column terminal (issue 48 item 6): plain text, no boxes,
every option under its group's heading, the examples as written."""

from __future__ import annotations

import os
import subprocess
import sys

from ncip.cli_options import GROUPS


def test_rank_help_fits_80_columns_and_groups_its_options():
    env = os.environ | {"COLUMNS": "80", "TERM": "xterm"}
    r = subprocess.run(
        [sys.executable, "-m", "ncip", "rank", "--help"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not any(c in r.stdout for c in "╭│╰─")  # no rich boxes
    headings = [line[:-1] for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert headings[: len(GROUPS)] == list(GROUPS)
    section = r.stdout[r.stdout.index("Texts and prompts:") : r.stdout.index("Selection and")]
    assert "--text-column" in section and "--prompts" in section
    assert "one per feature of a table" in " ".join(r.stdout.split())  # --mean/--std on tables
    assert "--holdout val.npz" in r.stdout.split("Examples:")[1]
