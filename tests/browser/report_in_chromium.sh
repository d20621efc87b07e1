#!/usr/bin/env bash
# `actmem report` in a real browser: headless Chromium loads the GraphCast
# TPU v4 report, the DOM must hold the four pictures with their shapes, laid
# out at their sizes, and a screenshot of the whole page is taken.
#   bash report_in_chromium.sh ACTMEM_BINARY SOURCE_DIR [SCREENSHOT.png]
# With a third argument the screenshot is kept there (docs/report.png is made
# so: scripts/report-screenshot.sh). Without Chromium (Debian's `chromium`)
# the test is skipped (exit 77), unless ACTMEM_REQUIRE_BROWSER=1.
source "$(dirname "$0")/../cli/lib.sh"
keep=${3:-}

browser=""
for name in chromium chromium-browser google-chrome; do
  command -v "$name" >/dev/null && { browser=$name; break; }
done
if [ -z "$browser" ]; then
  if [ "${ACTMEM_REQUIRE_BROWSER:-0}" = 1 ]; then
    echo "FAIL: ACTMEM_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)" >&2
    exit 1
  fi
  echo "SKIP: no chromium on PATH (apt-get install chromium; ACTMEM_REQUIRE_BROWSER=1 makes this a failure)"
  exit 77
fi
# headless BROWSER_ARGS...: one headless run with a throwaway profile.
headless() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile" "$@" 2>>"$work/browser.log"
}

"$actmem" report --model graphcast --device tpu-v4 -o "$work/report.html" -q || fail "report exited $?"

# What the browser built from the report itself: the four views and their shapes.
headless --dump-dom "file://$work/report.html" >"$work/dom.html" || fail "chromium --dump-dom exited $? ($(tail -3 "$work/browser.log"))"
for view in timeline pareto catalog plan; do
  grep -q "<svg [^>]*id=\"$view\"" "$work/dom.html" || fail "the DOM has no <svg id=\"$view\">"
done

# Their laid-out sizes: a copy of the report with a measuring script (the
# report itself has none) writes them into the DOM, which is dumped.
sed 's|</body>|<script>\
const views = [...document.querySelectorAll("svg.actmem-view")].map(svg => {\
  const box = svg.getBoundingClientRect();\
  const texts = [...svg.querySelectorAll("text")].filter(t => t.getBBox().width > 0).length;\
  return {id: svg.id, width: box.width, height: box.height, texts,\
          shapes: svg.querySelectorAll("rect,path,polygon,polyline,circle,line").length};\
});\
document.body.dataset.layout = JSON.stringify({views, height: document.documentElement.scrollHeight});\
</script></body>|' "$work/report.html" >"$work/measured.html"
headless --window-size=1200,900 --dump-dom "file://$work/measured.html" >"$work/measured-dom.html" || fail "chromium --dump-dom (measured) exited $?"
height=$(python3 - "$work/measured-dom.html" <<'PY'
import html, json, re, sys
dom = open(sys.argv[1]).read()
layout = json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
views = {v["id"]: v for v in layout["views"]}
assert sorted(views) == ["catalog", "pareto", "plan", "timeline"], views
least = {"timeline": (1100, 450, 25), "pareto": (1100, 400, 25), "catalog": (1100, 380, 14 * 3), "plan": (1100, 120, 20)}
for view, (width, height, texts) in least.items():
    v = views[view]
    assert v["width"] >= width and v["height"] >= height, f"{view} laid out at {v['width']}x{v['height']}"
    assert v["texts"] >= texts, f"{view}: only {v['texts']} texts rendered with a width"
    assert v["shapes"] >= 10, f"{view}: only {v['shapes']} shapes"
print(layout["height"])
PY
) || fail "layout: $height"

# The whole page as one screenshot.
if [[ "$height" =~ ^[0-9]+$ ]]; then
  headless --screenshot="$work/report.png" --window-size="1200,$height" "file://$work/report.html" >/dev/null ||
    fail "chromium --screenshot exited $?"
  python3 - "$work/report.png" "$height" <<'PY' || fail "screenshot"
import struct, sys, os
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1200, int(sys.argv[2])), (width, height)
assert len(data) > 100_000, f"{len(data)} bytes: a blank page?"
PY
  [ -z "$keep" ] || cp "$work/report.png" "$keep"
fi
finish
