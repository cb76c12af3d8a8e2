"""``python -m schedlab`` runs the command line."""

import sys

from schedlab.cli import main

sys.exit(main())
