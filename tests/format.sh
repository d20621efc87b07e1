#!/usr/bin/env bash
# Every tracked .cpp and .h of the repository at $1 is formatted as its
# .clang-format says. Exit 77 (CTest: skipped) where clang-format or git is
# missing or $1 is not a git work tree, unless ACTMEM_REQUIRE_FORMAT=1.
set -euo pipefail
root="$1"
if ! command -v clang-format >/dev/null || ! git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  if [[ -n "${ACTMEM_REQUIRE_FORMAT:-}" ]]; then
    echo "actmem: error: format: needs clang-format (scripts/install-deps.sh) and a git work tree" >&2
    exit 1
  fi
  echo "format: skipped (no clang-format or not a git work tree)"
  exit 77
fi
cd "$root"
git ls-files -z '*.cpp' '*.h' | xargs -0 clang-format --dry-run -Werror
echo "format: $(git ls-files '*.cpp' '*.h' | wc -l) files as .clang-format says ($(clang-format --version))"
