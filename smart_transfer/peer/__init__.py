"""``smart-transfer peer serve``: a workspace's objects, read-only over HTTP, for other clients' pulls."""
