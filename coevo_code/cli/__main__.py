"""``python -m coevo_code.cli``: the ``coevo`` command."""

import sys

from . import main

sys.exit(main())
