"""`python -m rtplan` runs the command-line interface."""

from rtplan.cli import main

raise SystemExit(main())
