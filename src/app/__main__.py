"""``python -m app``: the imbucket command line."""

from app.cli import main

main()
