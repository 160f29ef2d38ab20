"""The ``smart-transfer`` command: the parser, exit codes, the progress display and every command (the
client's and the server's). It may import every other package of the project; nothing imports it."""
