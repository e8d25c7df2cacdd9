"""``python -m finbench``."""

import sys

from finbench.cli import main

sys.exit(main())
