"""The CLI's commands, one module per group; each module's ``register`` adds its parsers."""
