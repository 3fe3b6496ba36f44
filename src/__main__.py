"""``python -m imbucket``: the command line."""

from imbucket.app.cli import main

main()
