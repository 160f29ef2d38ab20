"""The data plane's defaults that callers (and ``--help``) need without importing the HTTP stack."""

#: Parallel transfers unless the caller says otherwise.
DEFAULT_PARALLEL = 16
