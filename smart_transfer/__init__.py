"""smart-transfer: sync versioned datasets between workspaces and object storage."""

__version__ = "0.1.0"
