#!/usr/bin/env bash
# The engine (planner/src/cost, simulate, solve) recognises what its memory
# rules need by the marks the architecture's builder puts on the cost graph
# (tensor and row tags, op kinds, stage declarations), never by a model's
# counts or geometry: no code line there reads a ModelDescription's node,
# edge, width or depth fields or its latitude–longitude shape
# (docs/architecture.md, "The architecture seam"), reads no stage role
# (the rules that need the output's stage take the chain's last; the
# built-in plans, which place regions by role, are planner/src/plan's),
# and names no part of GraphCast in an identifier.
# Prints every line that breaks this; exit 1 if any.
set -euo pipefail
root="$1"
source "$(dirname "$0")/lib/code_lines.sh"
cd "$root"

FIELDS='grid_nodes|mesh_nodes|grid2mesh_edges|mesh_edges|mesh2grid_edges|latent_size|mlp_hidden_layers|processor_steps|grid_input_features|mesh_input_features|edge_features|output_features|resolution_deg|mesh_level|radius_query_fraction'

files=$(find planner/src/cost planner/src/simulate planner/src/solve -type f \( -name '*.cpp' -o -name '*.h' \) | sort)
broken=0
# Names of GraphCast's parts, in identifiers: the rules are named for what
# they do (a stage role's enumerator is reported as a role read).
PARTS='grid|mesh|encoder|decoder|processor|graphcast'
for file in $files; do
  report anatomy "$file" "reads the model's counts or geometry" \
    < <(code "$file" | grep -nE "(\.|->)($FIELDS)\b|lat_lon_shape\(" || true)
  report anatomy "$file" "names a part of GraphCast in code (name it for what it does, or tag it in the builder)" \
    < <(code "$file" | sed -E 's@StageRole::[a-z_]+@@g' | grep -niE "[a-z_0-9]*($PARTS)[a-z_0-9]*" || true)
  report anatomy "$file" "reads a stage role (mark what the rule needs in the builder)" \
    < <(code "$file" | grep -nE 'StageRole::' || true)
done
((broken == 0)) || exit 1
echo "anatomy: $(wc -w <<<"$files") engine files read no model counts, geometry or stage roles and name no part of GraphCast"
