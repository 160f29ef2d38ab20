"""``python -m smart_transfer.cli``: the same as the ``smart-transfer`` console script."""

import sys

from smart_transfer.cli.main import main

sys.exit(main())
