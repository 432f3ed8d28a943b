"""`python -m routectl`. Ctrl-C handling is already installed when this runs: the package's
`__init__` installs it first thing (`routectl.runtime.interrupt.early_start`)."""

from routectl.cli import main

main()
