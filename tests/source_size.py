#!/usr/bin/env python3
"""The library's sources stay readable: no file of planner/src over
MAX_FILE_LINES lines, no function body over MAX_FUNCTION_LINES lines
(docs/architecture.md, "The engine"). A function is a definition whose
body opens a line's last `{` after a parameter list (free, member, or
defined in a class), not a control statement or a lambda; its length is
its lines from that `{` to its closing `}`, both included.

usage: source_size.py ROOT. Prints every file and function over its limit;
exit 1 if any."""
import pathlib
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60
NOT_FUNCTIONS = re.compile(r"^(if|for|while|switch|catch|else|do|return|namespace|class|struct|enum|union)\b|^}|\]\s*\(|=\s*\[")


def code(line):
    """The line without its // comment and string literals (rough, enough for braces and parentheses)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//", 1)[0].rstrip()


def functions(lines):
    """(name line, first line, body lines) of every function defined in `lines`."""
    stripped = [code(l) for l in lines]
    for i, line in enumerate(stripped):
        if not line.endswith("{") or ")" not in line or re.search(r"\]\s*\(", line):
            continue
        # The statement's first line: back until its parentheses balance.
        start, depth = i, line.count("(") - line.count(")")
        while depth < 0 and start > 0:
            start -= 1
            depth += stripped[start].count("(") - stripped[start].count(")")
        # A constructor's initializer list: back to the constructor's name.
        while start > 0 and (stripped[start].lstrip().startswith(":") or stripped[start - 1].endswith(",")):
            start -= 1
        while depth < 0 and start > 0:
            start -= 1
            depth += stripped[start].count("(") - stripped[start].count(")")
        head = stripped[start].strip()
        if NOT_FUNCTIONS.search(head) or head.startswith(":") or head.startswith(","):
            continue
        indent = len(stripped[start]) - len(stripped[start].lstrip())
        close = " " * indent + "}"
        for j in range(i + 1, len(stripped)):
            if stripped[j] == close:
                yield head, start + 1, j - i + 1
                break


def main(root):
    broken = 0
    files = sorted(p for p in pathlib.Path(root, "planner/src").rglob("*") if p.suffix in (".cpp", ".h"))
    for path in files:
        lines = path.read_text().split("\n")
        name = path.relative_to(root)
        if len(lines) - 1 > MAX_FILE_LINES:
            print(f"source_size: {name} has {len(lines) - 1} lines, at most {MAX_FILE_LINES}: split it by concept",
                  file=sys.stderr)
            broken = 1
        for head, at, length in functions(lines):
            if length > MAX_FUNCTION_LINES:
                print(f"source_size: {name}:{at}: a function of {length} lines, at most {MAX_FUNCTION_LINES}: {head}",
                      file=sys.stderr)
                broken = 1
    if broken:
        return 1
    print(f"source_size: {len(files)} files of planner/src, each at most {MAX_FILE_LINES} lines, "
          f"no function over {MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
