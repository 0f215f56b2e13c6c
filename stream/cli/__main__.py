"""``python -m dphhh.stream.cli`` runs the ``dphhh`` command."""

import sys

from .app import main

sys.exit(main())
