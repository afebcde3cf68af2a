"""``python -m ncip``: the ``ncip`` command."""

from ncip.cli import app

app(prog_name="ncip")
