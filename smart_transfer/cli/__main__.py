"""``python -m smart_transfer.cli``: the same as the ``smart-transfer`` console script."""

from smart_transfer.cli.main import console

console()
