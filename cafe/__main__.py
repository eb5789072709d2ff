"""`python -m cafe`: the same command as the `cafe` script."""

import sys

from cafe.cli import main

sys.exit(main())
