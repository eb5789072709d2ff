"""`python -m cafe.cli`: the same command as `python -m cafe` and the `cafe` script."""

import sys

from cafe.cli import main

sys.exit(main())
