"""What both reference models (integrations/jax, integrations/pytorch) read
of GraphCast the same way: the twelve sizes of a model description, how
edge blocks split a stage's edges, and the stage chain as actmem's builder
declares it (models/graphcast_builder.cpp):
encoder, mesh_edge_embed, processor.0..K-1, decoder. Stages pass latents by
name: v_g grid nodes, v_m mesh nodes, e_m mesh edges, pred the prediction.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable


@dataclass(frozen=True)
class Sizes:
    """The twelve sizes of a model description (docs/model-format.md), in its
    order; each reference model's Description adds how it reads them."""
    grid_nodes: int
    mesh_nodes: int
    grid2mesh_edges: int
    mesh_edges: int
    mesh2grid_edges: int
    latent_size: int
    mlp_hidden_layers: int
    processor_steps: int
    grid_input_features: int
    mesh_input_features: int
    edge_features: int
    output_features: int


# The sizes' field names, in the description's order.
SIZE_FIELDS = tuple(f.name for f in fields(Sizes))


def read_sizes(obj: dict, fail: Callable[[str, str], None]) -> dict[str, int]:
    """The twelve sizes of a description (other fields ignored), each a
    positive integer; otherwise fail(field, what was found), which raises."""
    sizes = {}
    for key in SIZE_FIELDS:
        value = obj.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            fail(key, "missing" if key not in obj else f"got {value!r}")
        sizes[key] = value
    return sizes


def stage_names(processor_steps: int) -> list[str]:
    return ["encoder", "mesh_edge_embed"] + [f"processor.{k}" for k in range(processor_steps)] + ["decoder"]


def stage_kind(stage: str) -> str:
    """'processor' for processor.k, else the stage's own name."""
    return "processor" if stage.startswith("processor.") else stage


# The kinds of stage with an edge update, which a plan may block.
EDGE_STAGE_KINDS = ("encoder", "processor", "decoder")
STAGE_READS = {"encoder": (), "mesh_edge_embed": (), "processor": ("v_m", "e_m"), "decoder": ("v_g", "v_m")}
STAGE_WRITES = {"encoder": ("v_g", "v_m"), "mesh_edge_embed": ("e_m",), "processor": ("v_m", "e_m"),
                "decoder": ("pred",)}


def stage_reads(stage: str) -> tuple[str, ...]:
    return STAGE_READS[stage_kind(stage)]


def stage_writes(stage: str) -> tuple[str, ...]:
    return STAGE_WRITES[stage_kind(stage)]


def range_io(stages, first: int, last: int) -> tuple[list[str], set[str]]:
    """Latents that stages[first..last] read from before them (sorted), and the latents they write."""
    reads, writes = set(), set()
    for s in stages[first:last + 1]:
        reads |= set(stage_reads(s)) - writes
        writes |= set(stage_writes(s))
    return sorted(reads), writes


def block_bounds(edges: int, blocks: int) -> list[tuple[int, int]]:
    """[start, end) of `blocks` contiguous blocks of edges, as actmem's schedule
    splits them: the first edges % blocks are one edge larger."""
    if not 1 <= blocks <= edges:
        raise ValueError(f"edge blocks must be in 1..{edges}, got {blocks}")
    size, extra = divmod(edges, blocks)
    bounds, start = [], 0
    for b in range(blocks):
        end = start + size + (b < extra)
        bounds.append((start, end))
        start = end
    return bounds
