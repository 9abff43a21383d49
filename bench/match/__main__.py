"""`python -m bench.match`: a match against an outside engine, or `compare` of two."""

import sys

from bench.match._cli import main

sys.exit(main())
