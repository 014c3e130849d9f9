"""``python -m conq.cli``: the command line (as ``conq``)."""

from conq.cli import main

main()
