import sys

from tscore.cli import main

sys.exit(main())
