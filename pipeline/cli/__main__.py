"""``python -m pipeline.cli``: the ``ratings`` command."""

from . import main

main()
