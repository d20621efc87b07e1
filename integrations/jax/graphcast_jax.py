"""Reference GraphCast in JAX and DeepMind's autoregressive training step: the
network that actmem's `framework: jax` cost model describes (docs/cost-model.md,
section 1), for measuring what XLA itself allocates (judge.py).

Contracts:
  * MLP(in->out): (Linear -> SiLU) x mlp_hidden_layers at width latent_size,
    Linear(->out), LayerNorm (statistics in float32, result in the input's
    dtype); the output MLP has no LayerNorm.
  * Layout, node-major as DeepMind's code: node and edge tensors are
    [N, B, C], the batch axis kept at batch 1 too ([N, 1, C]) as DeepMind's
    xarray-backed arrays keep it. Gathers take rows of axis 0 and
    jax.ops.segment_sum sums rows of axis 0. Graph constants (features, int32
    index arrays) are shared by the batch; features are broadcast to it.
  * Edge update e' = MLP(concat[e, v_s[senders], v_r[receivers]]), optionally
    in contiguous edge blocks (block_bounds), each under
    jax.checkpoint(nothing_saveable), block outputs concatenated.
    Aggregation: segment_sum of e' over receivers; the encoder's (grid2mesh)
    in float32 under bfloat16 (DeepMind's f32_aggregation), the others in the
    activation dtype.
  * Stages: encoder, mesh_edge_embed, processor.k, decoder; stage_reads /
    stage_writes name the latents (v_g, v_m, e_m, pred) each consumes and
    produces; run_stage runs one.
  * Parameters are float32; each rollout step casts them to the activation
    dtype (DeepMind's casting.Bfloat16Cast casts each parameter where a
    module reads it, inside the step its Predictor scans, so a scanned
    rollout accumulates the parameters' gradients in float32) and every
    stage reads the cast copies. The decoder's mesh-node MLP exists
    (DeepMind's code builds it, actmem counts it) but no op reads it.
  * Training step (make_train_step): per rollout step the grid input is
    concat(frame0, frame1, forcings_t, static) cast to the activation dtype,
    the network's output is cast back to float32 and, as DeepMind's
    normalization.InputsAndResiduals does, read as a residual: its first
    C_t - 5 channels (the state variables the input frames carry) are added
    to frame1's, pred = out + frame1; the loss term is
    mean((pred - target)^2) (DeepMind's loss on the residual, out - (target -
    frame1), the same difference). The targets are laid out as DeepMind's
    data pipeline passes them where the model has a latitude-longitude grid
    (Description.target_variables: one float32 [T, B, (levels,) lat, lon]
    array per variable, the term the mean of the variables' mean squared
    errors on the prediction reshaped to the grid), else as one node-major
    [T, N_g, (B,) C] array. The next frames are (frame1,
    concat(pred[..., :C_t - 5], forcings_t)). Rollout > 1 runs jax.lax.scan
    over (targets, forcings); rollout 1 runs the step once, without scan.
    The loss is the mean over steps; jax.grad w.r.t. the float32 parameters,
    then Adam or SGD. Parameters and optimizer state are arguments 0 and 1,
    meant to be donated.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from graphcast_common import (EDGE_STAGE_KINDS, SIZE_FIELDS, STAGE_READS, STAGE_WRITES, Sizes,  # noqa: E402,F401
                              block_bounds, range_io, read_sizes, stage_kind, stage_names, stage_reads, stage_writes)

FORCINGS = 5       # forcing channels at the target time
STATIC = 5         # 2 static + 3 position channels per grid node
FRAMES = 2         # input frames
SURFACE_VARIABLES = 5       # GraphCast's target variables (docs/model-format.md)
ATMOSPHERIC_VARIABLES = 6
LAYER_NORM_EPS = 1e-5
ADAM = {"b1": 0.9, "b2": 0.999, "eps": 1e-8}
LEARNING_RATE = 1e-3
DTYPES = {"bfloat16": jnp.bfloat16, "float32": jnp.float32}
OPTIMIZERS = ("adam", "sgd")


class InputError(ValueError):
    """Bad input: `source` (a file or an option), a JSON pointer into it
    (empty for the whole source) and what was expected."""

    def __init__(self, source: str, pointer: str, expected: str):
        super().__init__(f"{source}: {pointer}: {expected}" if pointer else f"{source}: {expected}")


def _positive_int(obj: dict, key: str, source: str, pointer: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        what = "missing" if key not in obj else f"got {value!r}"
        raise InputError(source, f"{pointer}/{key}", f"expected a positive integer, {what}")
    return value


@dataclass(frozen=True)
class Description(Sizes):
    """The model's sizes (the fields of actmem's model description) and,
    where the description gives a resolution whose latitude-longitude grid
    has grid_nodes points, that grid's shape."""
    lat_lon: tuple[int, int] | None = None  # (latitudes, longitudes)

    @staticmethod
    def from_json(obj, source: str, pointer: str = "") -> "Description":
        """Reads the twelve size fields and resolution_deg (other fields are
        ignored) and checks that the grid input splits into DeepMind's
        channel layout."""
        if not isinstance(obj, dict):
            raise InputError(source, pointer, "expected a model description object")
        def fail(key: str, found: str):
            raise InputError(source, f"{pointer}/{key}", f"expected a positive integer, {found}")

        d = Description(**read_sizes(obj, fail), lat_lon=_lat_lon(obj, source, pointer))
        g, c_t = d.grid_input_features, d.time_channels
        if (g - FORCINGS - STATIC) % FRAMES or c_t < FORCINGS + 1:
            raise InputError(source, f"{pointer}/grid_input_features",
                             f"expected {FORCINGS + STATIC} + {FRAMES} x C_t with C_t >= {FORCINGS + 1} "
                             f"time-dependent channels per frame ({FRAMES} input frames, {FORCINGS} forcings, "
                             f"{STATIC} static and position channels), got {g}")
        if d.output_features < c_t - FORCINGS:
            raise InputError(source, f"{pointer}/output_features",
                             f"expected at least C_t - {FORCINGS} = {c_t - FORCINGS} predicted channels "
                             f"(C_t = {c_t} from grid_input_features), got {d.output_features}")
        return d

    @property
    def target_variables(self) -> list[tuple[int, ...]]:
        """The target as DeepMind's data pipeline hands it to the loss, one
        float32 array per variable of shape [T, B, *v] for each v here (time
        and batch first, as `variables.transpose('time', ...)` of each
        dataset variable): GraphCast's 5 surface variables [lat, lon] and 6
        atmospheric ones [levels, lat, lon] where output_features is
        5 + 6 x levels, else one [lat, lon] variable per channel; [] for a
        model without a latitude-longitude grid (its target is one
        node-major array)."""
        if self.lat_lon is None:
            return []
        c = self.output_features
        if c > SURFACE_VARIABLES and (c - SURFACE_VARIABLES) % ATMOSPHERIC_VARIABLES == 0:
            levels = (c - SURFACE_VARIABLES) // ATMOSPHERIC_VARIABLES
            return [self.lat_lon] * SURFACE_VARIABLES + [(levels, *self.lat_lon)] * ATMOSPHERIC_VARIABLES
        return [self.lat_lon] * c

    @property
    def time_channels(self) -> int:
        """C_t: channels per input frame (time-dependent variables and forcings)."""
        return (self.grid_input_features - FORCINGS - STATIC) // FRAMES

    def edges(self, stage: str) -> int:
        """Edge count of an edge-updating stage (encoder, processor.k, decoder)."""
        return {"encoder": self.grid2mesh_edges, "processor": self.mesh_edges,
                "decoder": self.mesh2grid_edges}[stage_kind(stage)]


def _lat_lon(obj: dict, source: str, pointer: str) -> tuple[int, int] | None:
    """The grid of `resolution_deg` (180/res + 1 latitudes, 360/res
    longitudes; docs/geometry.md) when it is a grid resolution (at least
    0.25 degrees, dividing 180 and 360) with grid_nodes points, else None:
    actmem's lat_lon_shape (model.h)."""
    res = obj.get("resolution_deg")
    if res is None:
        return None
    if not isinstance(res, (int, float)) or isinstance(res, bool) or not res > 0:
        raise InputError(source, f"{pointer}/resolution_deg", f"expected a positive number of degrees, got {res!r}")

    def divides(whole: float) -> bool:
        steps = whole / res
        return abs(steps - round(steps)) <= 1e-9 * max(1.0, steps)

    if not (0.25 <= res <= 180 and divides(180) and divides(360)):
        return None
    lat, lon = round(180 / res) + 1, round(360 / res)
    return (lat, lon) if lat * lon == obj.get("grid_nodes") else None


@dataclass(frozen=True)
class Run:
    """The run: activation dtype, samples per device, rollout steps,
    optimizer."""
    dtype: str = "bfloat16"
    batch: int = 1
    rollout: int = 1
    optimizer: str = "adam"

    @staticmethod
    def from_json(obj, source: str, pointer: str = "") -> "Run":
        """Reads dtype, batch, rollout, optimizer (other fields are ignored)."""
        if not isinstance(obj, dict):
            raise InputError(source, pointer, "expected a run object")
        for key, choices in (("dtype", tuple(DTYPES)), ("optimizer", OPTIMIZERS)):
            if obj.get(key) not in choices:
                raise InputError(source, f"{pointer}/{key}", f"expected one of {', '.join(choices)}, "
                                 f"got {obj.get(key)!r}")
        return Run(obj["dtype"], _positive_int(obj, "batch", source, pointer),
                   _positive_int(obj, "rollout", source, pointer), obj["optimizer"])

    @property
    def activation_dtype(self):
        return DTYPES[self.dtype]

    @property
    def lead(self) -> tuple[int, ...]:
        """Axes after the node/edge axis: (B,), batch 1 included."""
        return (self.batch,)


# ---------------------------------------------------------------- stages

# ---------------------------------------------------------------- parameters

def _mlp_shapes(d: Description) -> dict:
    """name -> (in, out, layer_norm) for every MLP; 'processor' -> one dict per step."""
    L, F = d.latent_size, d.edge_features
    return {
        "grid_embed": (d.grid_input_features, L, True), "mesh_embed": (d.mesh_input_features, L, True),
        "g2m_embed": (F, L, True), "enc_edge": (3 * L, L, True), "enc_mesh_node": (2 * L, L, True),
        "enc_grid_node": (L, L, True), "mesh_edge_embed": (F, L, True),
        "processor": [{"edge": (3 * L, L, True), "node": (2 * L, L, True)} for _ in range(d.processor_steps)],
        "m2g_embed": (F, L, True), "dec_edge": (3 * L, L, True), "dec_mesh_node": (L, L, True),
        "dec_grid_node": (2 * L, L, True), "output": (L, d.output_features, False),
    }


def _mlp_param_shapes(d_in: int, d_out: int, norm: bool, latent: int, hidden_layers: int) -> dict:
    widths = [d_in] + [latent] * hidden_layers + [d_out]
    f32 = jnp.float32
    params = {"linears": [{"w": jax.ShapeDtypeStruct((a, b), f32), "b": jax.ShapeDtypeStruct((b,), f32)}
                          for a, b in zip(widths[:-1], widths[1:])]}
    if norm:
        params["norm"] = {"scale": jax.ShapeDtypeStruct((d_out,), f32), "offset": jax.ShapeDtypeStruct((d_out,), f32)}
    return params


def param_shapes(d: Description) -> dict:
    """The float32 parameters of every MLP as ShapeDtypeStructs (dicts and lists)."""
    return jax.tree.map(lambda s: _mlp_param_shapes(*s, d.latent_size, d.mlp_hidden_layers), _mlp_shapes(d),
                        is_leaf=lambda s: isinstance(s, tuple))


def init_params(d: Description, seed: int = 0) -> dict:
    """Random parameters (numpy's generator: instant, unlike op-by-op JAX):
    weights N(0, 1/fan_in), biases and LayerNorm offsets N(0, 0.01), LayerNorm scales 1."""
    rng = np.random.default_rng(seed)

    def init(path, s):
        name = path[-1].key
        if name == "scale":
            return jnp.ones(s.shape, s.dtype)
        std = 1 / math.sqrt(s.shape[0]) if name == "w" else 0.1
        return jnp.asarray(std * rng.standard_normal(s.shape, np.float32))

    return jax.tree_util.tree_map_with_path(init, param_shapes(d))


def parameter_count(d: Description) -> int:
    return sum(math.prod(s.shape) for s in jax.tree.leaves(param_shapes(d)))


# ---------------------------------------------------------------- layers

def layer_norm(p: dict, x):
    xf = x.astype(jnp.float32)
    mean = xf.mean(-1, keepdims=True)
    var = jnp.square(xf - mean).mean(-1, keepdims=True)
    y = (xf - mean) * jax.lax.rsqrt(var + LAYER_NORM_EPS)
    return (y * p["scale"] + p["offset"]).astype(x.dtype)


def mlp(p: dict, x):
    *hidden, last = p["linears"]
    for lin in hidden:
        x = jax.nn.silu(x @ lin["w"] + lin["b"])
    x = x @ last["w"] + last["b"]
    return layer_norm(p["norm"], x) if "norm" in p else x


class Graph(NamedTuple):
    senders: jax.Array    # int32 [E]
    receivers: jax.Array  # int32 [E]


def _edge_mlp(start: int, end: int, p, e, v_s, v_r, senders, receivers):
    """The edge update of edges start..end-1: slices inside, so that a
    checkpoint around it keeps the whole tensors (already live), not copies."""
    s, r = senders[start:end], receivers[start:end]
    return mlp(p, jnp.concatenate([e[start:end], v_s[s], v_r[r]], axis=-1))


def edge_update(p: dict, e, v_s, v_r, graph: Graph, blocks: int):
    """e' for all edges: one update, or `blocks` checkpointed blocks concatenated."""
    edges = e.shape[0]
    if blocks == 1:
        return _edge_mlp(0, edges, p, e, v_s, v_r, *graph)
    parts = [jax.checkpoint(partial(_edge_mlp, a, b), policy=jax.checkpoint_policies.nothing_saveable)(
        p, e, v_s, v_r, *graph) for a, b in block_bounds(edges, blocks)]
    return jnp.concatenate(parts, axis=0)


def aggregate(e, receivers, nodes: int, dtype=None):
    """Sum of edge rows per receiver, computed in `dtype` (default e's) and returned in e's dtype."""
    acc = e if dtype is None else e.astype(dtype)
    return jax.ops.segment_sum(acc, receivers, num_segments=nodes).astype(e.dtype)


class NetworkInputs(NamedTuple):
    """One rollout step's network inputs, features in the activation dtype,
    node-major with the batch axis (if any) second."""
    grid: jax.Array        # [N_g, (B,) grid_input_features]
    mesh: jax.Array        # [N_m, (B,) mesh_input_features]
    g2m_edges: jax.Array   # [E_gm, (B,) edge_features]
    mesh_edges: jax.Array  # [E_m, (B,) edge_features]
    m2g_edges: jax.Array   # [E_mg, (B,) edge_features]
    g2m: Graph             # senders grid, receivers mesh
    mesh_graph: Graph      # senders and receivers mesh
    m2g: Graph             # senders mesh, receivers grid


def run_stage(stage: str, params: dict, x: NetworkInputs, latents: dict, blocks: int) -> dict:
    """Runs one stage on the latents it reads; returns the latents it writes.
    `blocks` is its edge-block count (1: unblocked)."""
    kind = stage_kind(stage)
    if kind == "encoder":
        return _encoder(params, x, blocks)
    if kind == "mesh_edge_embed":
        return {"e_m": mlp(params["mesh_edge_embed"], x.mesh_edges)}
    if kind == "processor":
        p = params["processor"][int(stage.split(".")[1])]
        return _processor(p, x, latents["v_m"], latents["e_m"], blocks)
    return _decoder(params, x, latents["v_g"], latents["v_m"], blocks)


def _encoder(p, x: NetworkInputs, blocks):
    v_g = mlp(p["grid_embed"], x.grid)
    v_m = mlp(p["mesh_embed"], x.mesh)
    e = edge_update(p["enc_edge"], mlp(p["g2m_embed"], x.g2m_edges), v_g, v_m, x.g2m, blocks)
    agg = aggregate(e, x.g2m.receivers, v_m.shape[0], jnp.float32)  # updated g2m edges are discarded
    v_m = v_m + mlp(p["enc_mesh_node"], jnp.concatenate([v_m, agg], axis=-1))
    v_g = v_g + mlp(p["enc_grid_node"], v_g)
    return {"v_g": v_g, "v_m": v_m}


def _processor(p, x: NetworkInputs, v_m, e_m, blocks):
    e_new = edge_update(p["edge"], e_m, v_m, v_m, x.mesh_graph, blocks)
    agg = aggregate(e_new, x.mesh_graph.receivers, v_m.shape[0])
    v_m = v_m + mlp(p["node"], jnp.concatenate([v_m, agg], axis=-1))
    return {"v_m": v_m, "e_m": e_m + e_new}


def _decoder(p, x: NetworkInputs, v_g, v_m, blocks):
    e = edge_update(p["dec_edge"], mlp(p["m2g_embed"], x.m2g_edges), v_m, v_g, x.m2g, blocks)
    agg = aggregate(e, x.m2g.receivers, v_g.shape[0])
    v_g = v_g + mlp(p["dec_grid_node"], jnp.concatenate([v_g, agg], axis=-1))
    return {"pred": mlp(p["output"], v_g)}


# ---------------------------------------------------------------- training step

class Data(NamedTuple):
    """One training example, float32, node-major (the batch axis, if any, second)."""
    frames: jax.Array    # [N_g, (B,) 2, C_t]     the two input frames: the scan carry
    targets: tuple | jax.Array  # per variable [T, B, *v] (Description.target_variables), else [T, N_g, (B,) C_out]
    forcings: jax.Array  # [T, N_g, (B,) 5]        forcings at each target time


class Constants(NamedTuple):
    """Per-model inputs shared by the batch: float32 features, int32 graphs."""
    static: jax.Array      # [N_g, 5] static and position channels
    mesh: jax.Array        # [N_m, mesh_input_features]
    g2m_edges: jax.Array   # [E_gm, edge_features]
    mesh_edges: jax.Array  # [E_m, edge_features]
    m2g_edges: jax.Array   # [E_mg, edge_features]
    g2m: Graph
    mesh_graph: Graph
    m2g: Graph


Network = Callable[[dict, NetworkInputs], jax.Array]  # cast params, inputs -> prediction


def argument_shapes(d: Description, run: Run) -> tuple:
    """(params, opt_state, data, constants) of make_train_step as ShapeDtypeStructs."""
    params = param_shapes(d)
    opt_state = jax.eval_shape(partial(init_opt_state, run.optimizer), params)
    f32, i32 = jnp.float32, jnp.int32
    ng, lead, T = d.grid_nodes, run.lead, run.rollout

    def sds(shape, dtype=f32):
        return jax.ShapeDtypeStruct(shape, dtype)

    def graph(edges):
        return Graph(sds((edges,), i32), sds((edges,), i32))

    variables = d.target_variables
    targets = (tuple(sds((T, run.batch, *v)) for v in variables) if variables
               else sds((T, ng, *lead, d.output_features)))
    data = Data(sds((ng, *lead, FRAMES, d.time_channels)), targets, sds((T, ng, *lead, FORCINGS)))
    consts = Constants(sds((ng, STATIC)), sds((d.mesh_nodes, d.mesh_input_features)),
                       sds((d.grid2mesh_edges, d.edge_features)), sds((d.mesh_edges, d.edge_features)),
                       sds((d.mesh2grid_edges, d.edge_features)),
                       graph(d.grid2mesh_edges), graph(d.mesh_edges), graph(d.mesh2grid_edges))
    return params, opt_state, data, consts


def random_arguments(d: Description, run: Run, seed: int = 0) -> tuple:
    """Real arguments of argument_shapes' shapes: random float32 features and
    random graphs with in-range int32 indices."""
    rng = np.random.default_rng(seed + 1)
    params = init_params(d, seed)
    _, _, data_shape, consts_shape = argument_shapes(d, run)

    def normal(leaf):
        return jnp.asarray(rng.standard_normal(leaf.shape, np.float32))

    def graph(g: Graph, senders: int, receivers: int) -> Graph:
        return Graph(jnp.asarray(rng.integers(0, senders, g.senders.shape, np.int32)),
                     jnp.asarray(rng.integers(0, receivers, g.receivers.shape, np.int32)))

    data = jax.tree.map(normal, data_shape)
    consts = Constants(*map(normal, consts_shape[:5]),
                       graph(consts_shape.g2m, d.grid_nodes, d.mesh_nodes),
                       graph(consts_shape.mesh_graph, d.mesh_nodes, d.mesh_nodes),
                       graph(consts_shape.m2g, d.mesh_nodes, d.grid_nodes))
    return params, init_opt_state(run.optimizer, params), data, consts


def _batched(a, lead: tuple[int, ...]):
    """[N, C] -> [N, *lead, C] (a broadcast, no copy of its own)."""
    return a if not lead else jnp.broadcast_to(a[:, None], (a.shape[0], *lead, a.shape[-1]))


def _shared_inputs(consts: Constants, run: Run) -> NetworkInputs:
    """Network inputs common to all rollout steps (grid left empty)."""
    dtype, lead = run.activation_dtype, run.lead

    def feats(a):
        return _batched(a, lead).astype(dtype)

    return NetworkInputs(None, feats(consts.mesh), feats(consts.g2m_edges), feats(consts.mesh_edges),
                         feats(consts.m2g_edges), consts.g2m, consts.mesh_graph, consts.m2g)


def make_loss(d: Description, run: Run, network: Network, step_checkpoint: bool = False,
              targets_on_host: bool = False, offload_step_inputs: bool = False):
    """loss(params, data, constants): the rollout's mean squared error, float32.
    step_checkpoint wraps the scan body in jax.checkpoint(nothing_saveable)
    (DeepMind's gradient_checkpointing); it applies only when rollout > 1.
    offload_step_inputs (with step_checkpoint): what that checkpoint keeps,
    the carried frames, is offloaded to host memory as the forward loop
    makes it and brought back for the step's backward (an outer
    jax.checkpoint whose policy offloads the frames, by name, to
    pinned_host; the scan stacks them there).
    targets_on_host: data.targets lives in host memory (the caller places it
    there: memory kind pinned_host); each step moves its own target to the
    device, inside the step, so a step checkpoint moves it again for its
    recomputation. (The forcings stay on the device: libtpu 0.0.42.1 fails a
    RET_CHECK on the dynamic slice of some host arrays, theirs among them,
    and mid's targets too.)"""
    dtype, lead, c_t = run.activation_dtype, run.lead, d.time_channels
    kept = c_t - FORCINGS  # predicted channels that feed the next input frame
    variables = d.target_variables

    def squared_error(pred, target):
        """The step's loss term: mean((pred - target)^2) over the stacked
        target, or, per variable, the mean of each variable's on the
        prediction laid out as that variable ([B, (levels,) lat, lon])."""
        if not variables:
            return jnp.mean(jnp.square(pred - target))
        grid = pred.reshape(*d.lat_lon, run.batch, d.output_features)  # [lat, lon, B, C]
        terms, c = [], 0
        for v, t in zip(variables, target):
            width = v[0] if len(v) == 3 else 1
            part = jnp.moveaxis(grid[..., c:c + width], (2, 3), (0, 1))  # [B, width, lat, lon]
            terms.append(jnp.mean(jnp.square((part if len(v) == 3 else part[:, 0]) - t)))
            c += width
        return sum(terms) / len(terms)

    def cast(params):
        return jax.tree.map(lambda p: p.astype(dtype), params)

    def loss(params, data: Data, consts: Constants):
        shared = _shared_inputs(consts, run)
        static = _batched(consts.static, lead)

        def step(frames, xs):
            target, forcings = xs
            if targets_on_host:
                target = jax.device_put(target, jax.memory.Space.Device)
            grid = jnp.concatenate([frames.reshape(*frames.shape[:-2], -1), forcings, static], axis=-1)
            pred = network(cast(params), shared._replace(grid=grid.astype(dtype))).astype(jnp.float32)
            pred = pred.at[..., :kept].add(frames[..., 1, :kept])  # a residual on the last input frame
            term = squared_error(pred, target)
            next_frame = jnp.concatenate([pred[..., :kept], forcings], axis=-1)
            return jnp.stack([frames[..., 1, :], next_frame], axis=-2), term

        if run.rollout == 1:
            return step(data.frames, (jax.tree.map(lambda t: t[0], data.targets), data.forcings[0]))[1]
        body = jax.checkpoint(step, policy=jax.checkpoint_policies.nothing_saveable) if step_checkpoint else step
        if step_checkpoint and offload_step_inputs:
            body = _offloading_frames(body)
        _, terms = jax.lax.scan(body, data.frames, (data.targets, data.forcings))
        return terms.mean()

    return loss


def _offloading_frames(step):
    """`step` (a checkpointed scan body) with the frames it is given saved
    in host memory: the residual the scan stacks for each step lives there."""
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["frames"],
        offload_src="device", offload_dst="pinned_host")

    def named(frames, xs):
        return step(checkpoint_name(frames, "frames"), xs)

    return jax.checkpoint(named, policy=policy)


def init_opt_state(optimizer: str, params: dict) -> dict:
    """Adam: step count and float32 moments; SGD: no state."""
    if optimizer == "sgd":
        return {}
    return {"count": jnp.zeros((), jnp.int32), "mu": jax.tree.map(jnp.zeros_like, params),
            "nu": jax.tree.map(jnp.zeros_like, params)}


def apply_optimizer(optimizer: str, params: dict, grads: dict, state: dict) -> tuple[dict, dict]:
    """One update: SGD, or Adam with bias correction (b1 0.9, b2 0.999, eps 1e-8), learning rate 1e-3."""
    if optimizer == "sgd":
        return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), state
    b1, b2, eps = ADAM["b1"], ADAM["b2"], ADAM["eps"]
    count = state["count"] + 1
    mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
    nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g), state["nu"], grads)
    t = count.astype(jnp.float32)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t  # bias corrections
    params = jax.tree.map(lambda p, m, v: p - LEARNING_RATE * (m / c1) / (jnp.sqrt(v / c2) + eps),
                          params, mu, nu)
    return params, {"count": count, "mu": mu, "nu": nu}


def make_train_step(d: Description, run: Run, network: Network, step_checkpoint: bool = False,
                    targets_on_host: bool = False, offload_step_inputs: bool = False):
    """train_step(params, opt_state, data, constants) -> (params, opt_state, loss).
    Jit it with donate_argnums=DONATED; make_loss says what the flags do."""
    loss_fn = make_loss(d, run, network, step_checkpoint, targets_on_host, offload_step_inputs)

    def train_step(params, opt_state, data: Data, consts: Constants):
        loss, grads = jax.value_and_grad(loss_fn)(params, data, consts)
        params, opt_state = apply_optimizer(run.optimizer, params, grads, opt_state)
        return params, opt_state, loss

    return train_step


DONATED = (0, 1)  # train_step's params and opt_state, donated as a real trainer does
