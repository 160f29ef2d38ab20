"""Looking without moving anything: ``status`` and ``ls`` (how a dataset relates to its remote, what a
server holds) and ``verify`` (re-check a local dataset, compare it with a remote one)."""
