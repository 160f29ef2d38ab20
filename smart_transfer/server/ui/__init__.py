"""The web view (``/ui``): server-rendered, read-only pages of the datasets a visitor may read, one
dataset's chain, schema and last records, and the server's state. Access is the server's own (the
tokens file); the token a visitor signs in with is kept in an HttpOnly, SameSite=Strict cookie."""

from smart_transfer.server.ui.docs import docs_router
from smart_transfer.server.ui.routes import UI_PREFIX, ui_router, wants_html

__all__ = ["UI_PREFIX", "docs_router", "ui_router", "wants_html"]
