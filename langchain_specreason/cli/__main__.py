"""``python -m langchain_specreason.cli``: the ``specreason`` command."""

import sys

from . import main

sys.exit(main())
