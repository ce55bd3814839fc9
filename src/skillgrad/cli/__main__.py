"""``python -m skillgrad.cli ARGS``: the ``skillgrad`` command."""

from skillgrad.cli.main import main

main()
