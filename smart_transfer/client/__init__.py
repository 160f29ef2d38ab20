"""The client side: the SDK (async core + sync facade) and the ``smart-transfer`` CLI."""
