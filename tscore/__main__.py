"""python -m tscore: the tscore command line."""

import sys

from tscore.cli import main

sys.exit(main())
