"""One line about a --json summary on stdin (for scripts/demo.sh): `transfer` or `ingest`."""

from __future__ import annotations

import json
import sys

summary = json.load(sys.stdin)
if sys.argv[1] == "ingest":
    print(
        f"   ingest: {summary['rows_added']} of {summary['rows_read']} row(s) added; checkpoint stored "
        f"{summary['checkpoint_files_stored']} new file(s), {summary['checkpoint_bytes_stored']} bytes"
    )
else:
    print(
        f"   {summary['operation']}: {summary['blocks']} block(s), {summary['objects_transferred']} object(s) / "
        f"{summary['bytes_transferred']} bytes moved, {summary['objects_skipped']} skipped, {summary['seconds']} s"
    )
