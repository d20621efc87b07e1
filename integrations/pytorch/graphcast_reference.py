"""Reference GraphCast in PyTorch: the network that actmem's `framework: pytorch`
cost model describes (docs/cost-model.md §1).

Contracts the simulator relies on:
  * MLP: linear -> silu -> linear (mlp_hidden_layers hidden layers of width
    latent_size) -> layer_norm; the output MLP has no layer_norm.
  * Edge update:  e' = MLP(cat([e, v_s[senders], v_r[receivers]], -1)),
    gathers with index_select on dim 0.
  * Aggregation:  zeros(N_r, ...).index_add(0, receivers, e')  (out of place).
  * Node update:  v' = MLP(cat([v, agg], -1)); residuals out of place.
  * Stages in order: encoder, mesh_edge_embed, processor.0..K-1, decoder;
    STAGE_READS / STAGE_WRITES name the latents each stage consumes/produces.
  * Every intermediate is released by Python right after its last use (names
    are rebound or deleted at once, MLPs consume their input list), so tensor
    lifetimes follow the op sequence, not Python scopes.
  * Op order inside a processor step: edge update, e = e + e', aggregate(e'),
    node MLP, v = v + v'.
  * Node latents are [N, C] for batch 1 and [N, B, C] for batch > 1; index
    arrays are int64 [E], shared by the batch.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from graphcast_common import (EDGE_STAGE_KINDS, SIZE_FIELDS, STAGE_READS, STAGE_WRITES, Sizes,  # noqa: E402,F401
                              block_bounds, range_io, read_sizes, stage_kind, stage_names, stage_reads, stage_writes)



@dataclass(frozen=True)
class Description(Sizes):
    @staticmethod
    def from_json(obj: dict, source: str = "model") -> "Description":
        def fail(key: str, found: str):
            raise ValueError(f"{source}: field '{key}': expected a positive integer, {found}")

        return Description(**read_sizes(obj, fail))

    @staticmethod
    def load(path: str) -> "Description":
        with open(path) as f:
            return Description.from_json(json.load(f), path)


@dataclass
class Inputs:
    """Model inputs: excluded from activation bytes (docs/cost-model.md §2)."""
    grid_x: torch.Tensor   # [Ng, (B,) grid_input_features]
    mesh_x: torch.Tensor   # [Nm, (B,) mesh_input_features]
    g2m_x: torch.Tensor    # [E_g2m, (B,) edge_features]
    mesh_x_e: torch.Tensor  # [E_mesh, (B,) edge_features]
    m2g_x: torch.Tensor    # [E_m2g, (B,) edge_features]
    g2m: tuple[torch.Tensor, torch.Tensor]   # (senders in grid, receivers in mesh)
    mesh: tuple[torch.Tensor, torch.Tensor]  # (senders, receivers) in mesh
    m2g: tuple[torch.Tensor, torch.Tensor]   # (senders in mesh, receivers in grid)
    target: torch.Tensor   # [Ng, (B,) output_features]

    def tensors(self) -> list[torch.Tensor]:
        return [self.grid_x, self.mesh_x, self.g2m_x, self.mesh_x_e, self.m2g_x,
                *self.g2m, *self.mesh, *self.m2g, self.target]


def make_inputs(d: Description, batch: int = 1, seed: int = 0) -> Inputs:
    """Random features and random graphs (int64 index arrays) of the described counts."""
    g = torch.Generator().manual_seed(seed)
    lead = () if batch == 1 else (batch,)

    def feats(n, c):
        return torch.randn(n, *lead, c, generator=g)

    def edges(e, n_s, n_r):
        return (torch.randint(0, n_s, (e,), generator=g), torch.randint(0, n_r, (e,), generator=g))

    return Inputs(
        grid_x=feats(d.grid_nodes, d.grid_input_features),
        mesh_x=feats(d.mesh_nodes, d.mesh_input_features),
        g2m_x=feats(d.grid2mesh_edges, d.edge_features),
        mesh_x_e=feats(d.mesh_edges, d.edge_features),
        m2g_x=feats(d.mesh2grid_edges, d.edge_features),
        g2m=edges(d.grid2mesh_edges, d.grid_nodes, d.mesh_nodes),
        mesh=edges(d.mesh_edges, d.mesh_nodes, d.mesh_nodes),
        m2g=edges(d.mesh2grid_edges, d.mesh_nodes, d.grid_nodes),
        target=feats(d.grid_nodes, d.output_features),
    )


class MLP(nn.Module):
    """linear(in->hidden) -> silu, hidden_layers times, then linear(->out), then layer_norm."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int, hidden_layers: int, norm: bool = True):
        super().__init__()
        widths = [d_in] + [d_hidden] * hidden_layers + [d_out]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.norm = nn.LayerNorm(d_out) if norm else None

    def forward(self, parts: list) -> torch.Tensor:
        """MLP(cat(parts, -1)); a single part is used as is. Consumes `parts`:
        the list is emptied, so no tensor outlives its last use here."""
        x = parts.pop() if len(parts) == 1 else torch.cat(parts, -1)
        parts.clear()
        *hidden, last = self.linears
        for lin in hidden:  # one rebinding per op
            x = F.linear(x, lin.weight, lin.bias)
            x = F.silu(x)
        x = F.linear(x, last.weight, last.bias)
        if self.norm is not None:
            x = F.layer_norm(x, self.norm.normalized_shape, self.norm.weight, self.norm.bias, self.norm.eps)
        return x


def _edge_block(mlp: MLP, e, v_s, v_r, senders, receivers):
    parts = [e, v_s.index_select(0, senders), v_r.index_select(0, receivers)]
    del e
    return mlp(parts)


def edge_update(mlp: MLP, e, v_s, v_r, senders, receivers, blocks: int, checkpoint_fn):
    """e' for all edges. blocks == 1: the plain update (not checkpointed).
    blocks > 1: contiguous edge blocks (block_bounds), each under checkpoint_fn, then cat on dim 0."""
    if blocks == 1:
        parts = [e, v_s.index_select(0, senders), v_r.index_select(0, receivers)]
        del e
        return mlp(parts)
    parts = [checkpoint_fn(_edge_block, mlp, e[a:b], v_s, v_r, senders[a:b], receivers[a:b])
             for a, b in block_bounds(e.shape[0], blocks)]
    del e
    return torch.cat(parts, 0)


def aggregate(e, receivers, n_receivers: int):
    return torch.zeros(n_receivers, *e.shape[1:], dtype=e.dtype, device=e.device).index_add(0, receivers, e)


class GraphCast(nn.Module):
    """Parameters plus one method per stage kind. A stage maps the latents it
    reads (stage_reads) to the latents it writes (stage_writes)."""

    def __init__(self, d: Description):
        super().__init__()
        L, h = d.latent_size, d.mlp_hidden_layers
        self.d = d
        self.grid_embed = MLP(d.grid_input_features, L, L, h)
        self.mesh_embed = MLP(d.mesh_input_features, L, L, h)
        self.g2m_embed = MLP(d.edge_features, L, L, h)
        self.enc_edge = MLP(3 * L, L, L, h)
        self.enc_mesh_node = MLP(2 * L, L, L, h)
        self.enc_grid_node = MLP(L, L, L, h)
        self.mesh_edge_embed = MLP(d.edge_features, L, L, h)
        self.proc_edge = nn.ModuleList(MLP(3 * L, L, L, h) for _ in range(d.processor_steps))
        self.proc_node = nn.ModuleList(MLP(2 * L, L, L, h) for _ in range(d.processor_steps))
        self.m2g_embed = MLP(d.edge_features, L, L, h)
        self.dec_edge = MLP(3 * L, L, L, h)
        self.dec_grid_node = MLP(2 * L, L, L, h)
        self.output = MLP(L, L, d.output_features, h, norm=False)

    def stages(self) -> list[str]:
        return stage_names(self.d.processor_steps)

    def run_stage(self, stage: str, latents: dict, x: Inputs, blocks: int, checkpoint_fn) -> dict:
        """Runs one stage. `latents` holds stage_reads(stage) and is consumed
        (emptied); the caller must keep no other reference to its values."""
        kind = stage_kind(stage)
        if kind == "encoder":
            return self._encoder(x, blocks, checkpoint_fn)
        if kind == "mesh_edge_embed":
            return {"e_m": self.mesh_edge_embed([x.mesh_x_e])}
        if kind == "processor":
            k = int(stage.split(".")[1])
            return self._processor(k, latents.pop("v_m"), latents.pop("e_m"), x, blocks, checkpoint_fn)
        return self._decoder(latents.pop("v_g"), latents.pop("v_m"), x, blocks, checkpoint_fn)

    # Stage bodies: every name is rebound or deleted right after its last use.

    def _encoder(self, x: Inputs, blocks, checkpoint_fn):
        s, r = x.g2m
        v_g = self.grid_embed([x.grid_x])
        v_m = self.mesh_embed([x.mesh_x])
        e = edge_update(self.enc_edge, self.g2m_embed([x.g2m_x]), v_g, v_m, s, r, blocks, checkpoint_fn)
        parts = [v_m, aggregate(e, r, self.d.mesh_nodes)]
        del e  # updated grid2mesh edges are discarded
        v_m = v_m + self.enc_mesh_node(parts)
        v_g = v_g + self.enc_grid_node([v_g])
        return {"v_g": v_g, "v_m": v_m}

    def _processor(self, k, v_m, e_m, x: Inputs, blocks, checkpoint_fn):
        s, r = x.mesh
        e_new = edge_update(self.proc_edge[k], e_m, v_m, v_m, s, r, blocks, checkpoint_fn)
        e_m = e_m + e_new
        parts = [v_m, aggregate(e_new, r, self.d.mesh_nodes)]
        del e_new
        v_m = v_m + self.proc_node[k](parts)
        return {"v_m": v_m, "e_m": e_m}

    def _decoder(self, v_g, v_m, x: Inputs, blocks, checkpoint_fn):
        s, r = x.m2g
        e = edge_update(self.dec_edge, self.m2g_embed([x.m2g_x]), v_m, v_g, s, r, blocks, checkpoint_fn)
        del v_m
        parts = [v_g, aggregate(e, r, self.d.grid_nodes)]
        del e
        out = [v_g + self.dec_grid_node(parts)]
        del v_g
        return {"pred": self.output(out)}


def loss_fn(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(pred, target)
