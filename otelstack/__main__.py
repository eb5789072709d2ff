"""`python -m otelstack up|down --dir DIR` (see otelstack.local)."""

import sys

from otelstack.local import main

sys.exit(main())
