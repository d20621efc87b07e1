#!/usr/bin/env bash
# `pip install actmem` as a user does it, outside the source tree and its
# build folders: the files a clone holds (tracked, and untracked ones git
# does not ignore) are copied to a temporary folder; a fresh virtual
# environment `pip install .`s them (scikit-build-core builds the wheel,
# pip's build isolation fetching the pinned build requirements from PyPI);
# then, from outside the copy, the installed module and `actmem` command are
# tested: README's one-liner, the module's test suite and the command.
#   scripts/test-wheel.sh
# ACTMEM_WHEEL_WORK=<dir> works there and keeps it instead of a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${ACTMEM_WHEEL_WORK:-}" ]]; then
  work="$ACTMEM_WHEEL_WORK"
  rm -rf "$work/src" "$work/v"
  mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/actmem-wheel.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi

echo "== wheel: a clean copy of the sources"
mkdir -p "$work/src"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$work/src"

echo "== wheel: python3 -m venv v && v/bin/pip install . (builds the wheel)"
python3 -m venv "$work/v"
start=$SECONDS
(cd "$work/src" && CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$work/v/bin/pip" install --no-cache-dir --quiet .)
echo "built and installed in $((SECONDS - start)) s"

echo "== wheel: the installed module and command, from outside the sources"
cd "$work"
v/bin/python -c "import actmem; print(actmem.fits())" >fits.txt
grep -q "'fits': True" fits.txt || { echo "test-wheel: FAILED: actmem.fits(): $(head -c 300 fits.txt)" >&2; exit 1; }
v/bin/python - "$work/v" <<'PY'
import pathlib, sys
import actmem
where = pathlib.Path(actmem.__file__).resolve()
assert where.is_relative_to(pathlib.Path(sys.argv[1]).resolve()), f"imported from {where}, not the venv"
assert actmem.__version__, actmem.__version__
try:
    actmem.fits(batch=0)
    raise SystemExit("no InputError for batch=0")
except actmem.InputError as e:
    assert str(e) == "batch: expected an integer from 1 to 65536, got 0", e
PY
# The module's own tests against the installed module (pytest pinned).
v/bin/pip install --no-cache-dir --quiet pytest==8.3.4 pluggy==1.5.0 iniconfig==2.0.0 packaging==24.2
v/bin/python -m pytest -q -p no:cacheprovider "$work/src/python/tests/test_actmem.py"
# The queue scheduler of docs/api.md, on the installed module.
v/bin/python "$work/src/docs/examples/schedule_queue.py" plans >queue.txt
[ "$(ls plans/*.plan.json | wc -l)" -ge 4 ] || { echo "test-wheel: FAILED: schedule_queue.py: $(cat queue.txt)" >&2; exit 1; }
# The command, and no libfmt needed where it runs.
v/bin/actmem fit --model graphcast --device tpu-v4 >fit.txt
grep -q '^FITS' fit.txt || { echo "test-wheel: FAILED: actmem fit: $(cat fit.txt)" >&2; exit 1; }
v/bin/actmem report --model graphcast --device tpu-v4 -o report.html -q
grep -q '<svg [^>]*id="timeline"' report.html || { echo "test-wheel: FAILED: report.html has no timeline" >&2; exit 1; }
if ldd v/bin/actmem v/lib/python3*/site-packages/actmem*.so | grep libfmt >/dev/null; then
  echo "test-wheel: FAILED: the wheel links libfmt" >&2
  exit 1
fi
echo "test-wheel: OK"
