"""The stored side of a validation (integrations/*/validate.py): each
measured case as one JSON line, and the Markdown table a doc carries
between markers that name the script writing it. Files are replaced whole
(written aside, then renamed), so an interrupted run leaves the old ones."""
from __future__ import annotations

import json
import os

END = "<!-- end of table -->"


def read_results(path: str) -> list[dict]:
    """Every stored case; [] when there is no file. A file that cannot be
    read, or a line that is not JSON, is a ValueError whose message names
    the file (and the line): one line for the caller's error."""
    if not os.path.exists(path):
        return []
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from None
    results = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {number}: not JSON ({e.msg})") from None
    return results


def write_whole(path: str, text: str) -> None:
    """Replaces `path` with `text`: written aside, then renamed, so a reader
    (or an interrupted run) sees the old file or the new one, never part."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def write_results(path: str, results: list[dict]) -> None:
    """All results, one JSON line each, replacing `path` whole."""
    write_whole(path, "".join(json.dumps(r) + "\n" for r in results))


def write_table(path: str, text: str, writer: str) -> None:
    """Replaces the table between the markers `writer` (a script's path in
    the repository, and its options where they make another table) writes
    in `path`; a file without them gets them at its end, and what it holds
    stays."""
    begin = f"<!-- validation table: written by {writer} -->"
    block = f"{begin}\n{text}{END}"
    old = open(path).read() if os.path.exists(path) else ""
    if begin in old and END in old[old.index(begin):]:  # this writer's end, not another table's
        start = old.index(begin)
        write_whole(path, old[:start] + block + old[old.index(END, start) + len(END):])
    else:
        write_whole(path, (old.rstrip("\n") + "\n\n" if old.strip() else "") + block + "\n")
