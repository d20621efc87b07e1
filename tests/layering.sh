#!/usr/bin/env bash
# The library's folders follow the flow of docs/architecture.md: a file in
# planner/src/<folder>/ or planner/include/actmem/<folder>/ includes only
# headers of its own folder, of util/, or of a folder earlier in FLOW, never
# of a later one. Prints every include that breaks this; exit 1 if any.
set -euo pipefail
root="$1"
FLOW=(util geometry model cost simulate solve plan)

rank() {
  local i
  for i in "${!FLOW[@]}"; do [[ "${FLOW[$i]}" == "$1" ]] && { echo "$i"; return; }; done
  echo "layering: $2: folder '$1' is not one of ${FLOW[*]} (update FLOW and docs/architecture.md)" >&2
  exit 1
}

cd "$root"
files=$(find planner/src planner/include/actmem -mindepth 2 -type f \( -name '*.cpp' -o -name '*.h' \) | sort)
[[ -n "$files" ]] || { echo "layering: no sources under planner/ in $root" >&2; exit 1; }
broken=0
count=0
for file in $files; do
  folder=$(basename "$(dirname "$file")")
  own=$(rank "$folder" "$file")
  count=$((count + 1))
  # #include "actmem/<folder>/x.h" (public) or "<folder>/x.h" (internal).
  while IFS= read -r line; do
    target=$(sed -E 's@^#include "(actmem/)?([a-z_]+)/[a-z_0-9]+\.h".*@\2@' <<<"$line")
    theirs=$(rank "$target" "$file")
    if ((theirs > own)); then
      echo "layering: $file includes a later step of the flow: $line" >&2
      broken=1
    fi
  done < <(grep -E '^#include "(actmem/)?[a-z_]+/[a-z_0-9]+\.h"' "$file" || true)
done
((broken == 0)) || exit 1
echo "layering: $count files include only their own folder, util/ and earlier steps of ${FLOW[*]}"
