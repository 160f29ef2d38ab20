"""Reading the code blocks of a Markdown page: what the documentation tests run and check."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: A fenced block, with the HTML comment that may stand right before it (blank lines between allowed).
FENCE = re.compile(r"(?:<!--(?P<note>[^>]*)-->\s*\n)?```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)\n```", re.S)


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    lang: str
    body: str
    note: str


def code_blocks(page: Path) -> list[Block]:
    """Every fenced code block of ``page``, in order."""
    return [
        Block(match["lang"], match["body"], (match["note"] or "").strip()) for match in FENCE.finditer(page.read_text())
    ]


def shell_commands(body: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and here-document bodies dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    commands, heredoc_end = [], None
    for line in joined.splitlines():
        if heredoc_end is not None:
            heredoc_end = None if line.strip() == heredoc_end else heredoc_end
            continue
        marker = re.search(r"<<-?\s*'?(\w+)'?", line)
        heredoc_end = marker.group(1) if marker else None
        code = line.split(" #", 1)[0].strip()
        if code and not code.startswith("#"):
            commands.append(code)
    return commands
