"""``python -m pllzoo`` = the ``pllzoo`` command."""

from pllzoo.cli import main

main()
