"""Checks an `actmem report` HTML file against the CLI's own JSON figures.

    report_check.py REPORT.html SIMULATE.json PLAN.json SWEEP.json NONE.json FULL.json TIMELINE.csv

SIMULATE.json is `actmem simulate --plan PLAN.json --json`, NONE.json and
FULL.json the same for the built-in plans, SWEEP.json `actmem sweep
--devices all --json` for the same run, TIMELINE.csv `simulate --timeline`.
Every figure the report draws or embeds must equal them. Exits non-zero
with the differences.
"""
import json
import sys
from html.parser import HTMLParser

GIB, MIB, KIB = 2**30, 2**20, 2**10


def format_bytes(n):  # planner/src/units.cpp
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def format_seconds(s):
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.1f} us"


class Page(HTMLParser):
    """Every element's attributes, the texts, and the embedded figures."""

    def __init__(self):
        super().__init__()
        self.elements, self.texts, self.figures, self._in_figures = [], [], None, False

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_figures = tag == "script" and dict(attrs).get("id") == "actmem-figures"

    def handle_data(self, data):
        if self._in_figures:
            self.figures = json.loads(data)
            self._in_figures = False
        elif data.strip():
            self.texts.append(data.strip())

    def find(self, tag, **attrs):
        return [a for t, a in self.elements if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def main(report, simulate, plan, sweep, none, full, timeline):
    page = Page()
    page.feed(open(report, encoding="utf-8").read())
    sim, plan, sweep, none, full = (json.load(open(p)) for p in (simulate, plan, sweep, none, full))
    errors = []

    def expect(what, got, wanted):
        if got != wanted:
            errors.append(f"{what}: report has {got!r}, the CLI {wanted!r}")

    # The embedded figures are the CLI's, exactly.
    figures = page.figures
    expect("embedded simulate", figures["simulate"], sim)
    expect("embedded catalog", figures["catalog"], sweep)
    expect("embedded exports", figures["exports"], plan["exports"])

    # The four views are there.
    for view in ("timeline", "pareto", "catalog", "plan"):
        expect(f"<svg id={view}>", len(page.find("svg", id=view)), 1)

    # Timeline: peak, budget, where, every op, every kind.
    svg = page.find("svg", id="timeline")[0]
    expect("timeline peak", int(svg["data-peak-bytes"]), sim["peak_bytes"])
    expect("timeline budget", int(svg["data-budget-bytes"]), sim["budget_bytes"])
    rows = sum(1 for _ in open(timeline)) - 1
    expect("timeline ops", int(svg["data-ops"]), rows)
    peak = page.find("g", **{"class": "peak"})[0]
    expect("peak bytes", int(peak["data-bytes"]), sim["peak_bytes"])
    for key in ("pass", "stage", "op"):
        expect(f"peak {key}", peak[f"data-{key}"], sim["peak_at"][key])
    expect("peak label", f"peak {format_bytes(sim['peak_bytes'])}" in page.texts, True)
    expect("budget label", f"budget {format_bytes(sim['budget_bytes'])}" in page.texts, True)
    expect("kinds", sorted(a["data-kind"] for a in page.find("polygon", **{"class": "kind"})), sorted(sim["breakdown"]))

    # Pareto: each marked plan where the CLI puts it.
    marks = {a["data-key"]: a for _, a in page.elements if a.get("class") == "mark"}
    wanted = {"chosen": sim, "none": none, "full": full}
    for trainer in ("deepmind_deep_gnn", "physicsnemo", "anemoi"):
        wanted[trainer] = plan["exports"][trainer]["predicted"]
    for key, report in wanted.items():
        expect(f"mark {key} peak", int(marks[key]["data-peak-bytes"]), report["peak_bytes"])
        expect(f"mark {key} time", float(marks[key]["data-step-time-s"]), report["step_time_s"])
    expect("chosen label", any(t.startswith(f"this plan: {format_bytes(sim['peak_bytes'])}, "
                                            f"{format_seconds(sim['step_time_s'])}") for t in page.texts), True)

    # Catalog: one bar per device, as `actmem sweep` says.
    devices = {a["data-device"]: a for a in page.find("g", **{"class": "device"})}
    expect("catalog devices", list(devices), [row["device"] for row in sweep])
    for row in sweep:
        d = devices[row["device"]]
        expect(f"{row['device']} fits", d["data-fits"], "true" if row["fits"] else "false")
        for key in ("peak_bytes", "min_peak_bytes", "budget_bytes"):
            expect(f"{row['device']} {key}", int(d["data-" + key.replace("_", "-")]), row[key])
        expect(f"{row['device']} recompute", float(d["data-recompute-overhead"]), row["recompute_overhead"])

    # The plan: a bracket per region, ticks for blocks.
    regions = [(a["data-from"], a["data-to"]) for a in page.find("path") if "data-from" in a]

    def flatten(rs):
        return [(r["from"], r["to"]) for r in rs] + [x for r in rs for x in flatten(r.get("inner", []))]

    expect("regions", sorted(regions), sorted(flatten(sim["plan"]["checkpoints"])))
    blocks = {a["data-stage"]: int(a["data-edge-blocks"]) for a in page.find("g", **{"class": "stage"})}
    expect("edge blocks", {s: b for s, b in blocks.items() if b > 1}, sim["plan"]["edge_blocks"])

    for e in errors:
        print("report_check:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
