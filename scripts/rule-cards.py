#!/usr/bin/env python3
"""docs/rules/: the index of the memory rules and one card per rule, made
from what is true now: `actmem rules --json` (name, framework, when, effect,
journal), planner/src/cost/memory_rules.cpp (what each rule sets in the
engine's profile), the engine's sources (which files read it) and
tests/rules/witnesses.json (the run whose prediction the rule changes, which
tests/rules_test.cpp checks).

    scripts/rule-cards.py [--actmem build/cli/actmem] --write   rewrite docs/rules/
    scripts/rule-cards.py [--actmem build/cli/actmem] --check   exit 1 if docs/rules/ is not what --write makes
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "rules"
TABLE = ROOT / "planner" / "src" / "cost" / "memory_rules.cpp"
WITNESSES = ROOT / "tests" / "rules" / "witnesses.json"
ENGINE = ROOT / "planner" / "src"
# Files that only declare or set the profile's fields.
DECLARING = {"cost/memory_rules.cpp", "cost/memory_profile.h", "cost/memory_profile.cpp"}


def fields_set(source):
    """Rule name -> the profile fields its entry in memory_rules.cpp sets."""
    entries = re.split(r'\{\{"', source)[1:]
    result = {}
    for entry in entries:
        name = entry.split('"', 1)[0]
        fields = re.findall(r"\bp\.(\w+)", entry)
        fields += [f"{kind}.{field}" for kind, field in re.findall(r"op\(p, OpKind::(\w+)\)\.(\w+)", entry)]
        result[name] = list(dict.fromkeys(fields))
    return result


def readers(field, sources):
    """The engine files (relative to planner/src) that read a profile field."""
    word = field.split(".")[-1]
    return sorted(path for path, text in sources.items() if path not in DECLARING and re.search(rf"\b{word}\b", text))


def describe_witness(w):
    plan = w.get("plan")
    where = ("the solver's least peak" if plan is None else
             f"plan `{plan}`" if isinstance(plan, str) else f"plan file `{json.dumps(plan, sort_keys=True)}`")
    delta = w["on"] - w["off"]
    if w.get("also_off"):
        where += f", with {', '.join(f'`{r}`' for r in w['also_off'])} off (it hides this rule's effect)"
    return (f"{w['model']}, {w['framework']} {w['dtype']}, batch {w['batch']}, rollout {w['rollout']}, {where}: "
            f"`{w['figure']}` {w['on']:,} B with the rule, {w['off']:,} B without ({delta:+,} B)")


def card(rule, fields, sources, witness):
    sets = ", ".join(f"`{f}`" for f in fields) or "nothing"
    read_by = sorted({r for f in fields for r in readers(f, sources)})
    lines = [
        f"# {rule['name']}",
        "",
        rule["effect"],
        "",
        "| | |",
        "|---|---|",
        f"| framework | {rule['framework']} |",
        f"| applies | {rule['applies']} |",
        f"| measurement | {rule['journal'] + ' in docs/journal.md' if rule['journal'].startswith('J') else rule['journal']}"
        " |",
        f"| sets | {sets} in the engine's profile (planner/src/cost/memory_rules.cpp) |",
        f"| read by | {', '.join(f'planner/src/{r}' for r in read_by) or '—'} |",
        f"| test | tests/rules_test.cpp: "
        f"{describe_witness(witness) if witness else 'no witness yet (kNoWitnessYet says what is suspected)'} |",
        f"| switch off | `--rule-off {rule['name']}` (CLI), `rules_off=[\"{rule['name']}\"]` (Python) |",
        "",
    ]
    return "\n".join(lines)


def index(rules, witnesses):
    lines = [
        "# The memory rules",
        "",
        "What actmem knows of each framework beyond the derivatives' own residuals, one observation per rule "
        "(`actmem rules` lists them; `--rule-off NAME` predicts without one). Each card says what the rule does, "
        "when it applies, what it sets in the engine, which files read it, the measurement that shows it and the "
        "run whose prediction it changes. How to add or change a rule: docs/architecture.md.",
        "",
        "Made by `scripts/rule-cards.py --write`; do not edit by hand.",
        "",
        "| rule | framework | applies | effect | journal | with the rule − without, on its witness |",
        "|---|---|---|---|---|---|",
    ]
    for r in rules:
        w = witnesses.get(r["name"])
        shown = f"{w['on'] - w['off']:+,} B `{w['figure']}`" if w else "none yet"
        lines.append(f"| [{r['name']}]({r['name']}.md) | {r['framework']} | {r['applies']} | {r['effect']} | "
                     f"{r['journal']} | {shown} |")
    return "\n".join(lines) + "\n"


def documents(actmem):
    rules = json.loads(subprocess.run([actmem, "rules", "--json"], capture_output=True, text=True,
                                      check=True).stdout)
    fields = fields_set(TABLE.read_text())
    sources = {str(p.relative_to(ENGINE)): p.read_text() for p in sorted(ENGINE.rglob("*")) if p.suffix in (".cpp", ".h")}
    witnesses = json.loads(WITNESSES.read_text())
    docs = {"README.md": index(rules, witnesses)}
    for r in rules:
        docs[f"{r['name']}.md"] = card(r, fields.get(r["name"], []), sources, witnesses.get(r["name"]))
    return docs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actmem", default=str(ROOT / "build" / "cli" / "actmem"))
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args()
    docs = documents(args.actmem)
    present = {p.name for p in DOCS.glob("*.md")} if DOCS.exists() else set()
    if args.write:
        DOCS.mkdir(exist_ok=True)
        for name in present - docs.keys():
            (DOCS / name).unlink()
        for name, text in docs.items():
            (DOCS / name).write_text(text)
        print(f"wrote docs/rules/: {len(docs) - 1} cards and the index")
        return 0
    stale = sorted(n for n in docs if n not in present or (DOCS / n).read_text() != docs[n])
    stale += sorted(present - docs.keys())
    if stale:
        print(f"docs/rules/ is not what the rules say now ({', '.join(stale[:5])}{' …' if len(stale) > 5 else ''}): "
              "run scripts/rule-cards.py --write", file=sys.stderr)
        return 1
    print(f"docs/rules/: {len(docs) - 1} cards, as the rules say")
    return 0


if __name__ == "__main__":
    sys.exit(main())
