#!/usr/bin/env python3
"""actmem-jax deepmind_step: XLA's own memory figures for DeepMind's GraphCast
training step, built from DeepMind's code, to check that the reference
(graphcast_jax.py) makes the program DeepMind trains.

DeepMind's code is not on PyPI and is not part of this repository: give a
checkout of github.com/google-deepmind/graphcast (the folder that holds
`weathernext/`) and of github.com/google-deepmind/xarray_jax, which it
imports. The step is the one DeepMind's demo notebook builds
(`docs/weathernext1_graph/graphcast_demo.ipynb`, "loss_fn"): `GraphCast`
wrapped in `casting.Bfloat16Cast`, `normalization.InputsAndResiduals` and
`autoregressive.Predictor(gradient_checkpointing=True)`; its loss's
gradient, then the reference's Adam update (graphcast_jax.apply_optimizer),
parameters and optimizer state donated, as judge.py jits the reference.
Data are zero-stride arrays of the right shapes (nothing materialised):
normalisation statistics of ones, so no value changes a shape or a buffer.

Models, as DeepMind configures them (weathernext1_graph/graphcast.py):
  graphcast              0.25 deg, mesh 6, 37 levels (TASK)
  graphcast-operational  0.25 deg, mesh 6, 13 levels, precipitation out (TASK_13_PRECIP_OUT)
  graphcast-small        1 deg, mesh 5, 13 levels (TASK_13)
all with latent 512, 16 message-passing steps, one hidden layer, radius 0.6.

Figures, for TPU v4 compiled deviceless (judge.py's topology):
  default        the whole compile: memory_analysis(), or XLA's refusal
  --as-written   XLA's rematerialisation pass with 16 MiB of HBM, where
                 nothing fits: the temporaries' peak as written, to the byte
                 (what docs/validation-jax.md compares actmem with)
  --remat        the same pass with the chip's HBM: as written, after XLA's
                 rematerialisation, its limit, and whether it got there

Usage: deepmind_step.py --weathernext DIR --xarray-jax DIR [--model NAME] [--rollout T] [--batch B]
                        [--no-gradient-checkpointing] [--as-written | --remat] [--json]
Run it with .venv-deepmind/bin/python (scripts/install-deepmind.sh).
Exit: 0 fits, 1 does not fit, 2 bad input or a compile XLA itself fails.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge  # noqa: E402  (sets the deviceless environment before JAX loads)
from judge import Parser, UsageError, positive_int  # noqa: E402

# name: (resolution, mesh refinements, DeepMind's task config)
MODELS = {"graphcast": (0.25, 6, "TASK"), "graphcast-operational": (0.25, 6, "TASK_13_PRECIP_OUT"),
          "graphcast-small": (1.0, 5, "TASK_13")}
SOURCES = (("--weathernext", "ACTMEM_WEATHERNEXT", "weathernext",
            "a checkout of github.com/google-deepmind/graphcast (the folder holding weathernext/)"),
           ("--xarray-jax", "ACTMEM_XARRAY_JAX", "xarray_jax",
            "a checkout of github.com/google-deepmind/xarray_jax (the folder holding xarray_jax/)"))


def parse_args(argv):
    p = Parser(prog="deepmind_step.py", description=__doc__.split("\n\n")[0])
    for flag, env, _, what in SOURCES:
        p.add_argument(flag, default=os.environ.get(env), metavar="DIR", help=f"{what} (default: ${env})")
    p.add_argument("--model", default="graphcast", choices=tuple(MODELS))
    p.add_argument("--rollout", type=positive_int, default=1)
    p.add_argument("--batch", type=positive_int, default=1)
    p.add_argument("--no-gradient-checkpointing", action="store_true",
                   help="autoregressive.Predictor(gradient_checkpointing=False) (default: True, as DeepMind trains)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--as-written", action="store_true", help="XLA's figures as written (16 MiB of HBM)")
    mode.add_argument("--remat", action="store_true", help="XLA's rematerialisation pass on the chip's HBM")
    p.add_argument("--target", default="tpu-v4", choices=("tpu-v4",), help=argparse.SUPPRESS)  # the probe's child call
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = p.parse_args(argv)
    for flag, _, package, what in SOURCES:
        folder = getattr(args, flag[2:].replace("-", "_"))
        if not folder:
            raise UsageError(f"{flag}: expected {what}")
        if not os.path.isdir(os.path.join(folder, package)):
            raise UsageError(f"{flag} {folder}: no {package}/ in it; expected {what}")
    return args


def import_deepmind(args):
    """DeepMind's modules, or UsageError naming the missing package or module."""
    try:
        import haiku as hk
        import jraph  # noqa: F401  (DeepMind's graph networks import these; name them here, not deep inside)
        import trimesh  # noqa: F401
        import xarray
    except ModuleNotFoundError as e:
        raise UsageError(f"Python package '{e.name.split('.')[0]}' is not installed for {sys.executable}: "
                         "run scripts/install-deepmind.sh and use .venv-deepmind/bin/python") from None
    sys.path[:0] = [args.weathernext, args.xarray_jax]
    try:
        import xarray_jax
        from weathernext.utils import autoregressive, casting, normalization
        from weathernext.weathernext1_graph import graphcast
    except ImportError as e:
        raise UsageError(f"cannot import DeepMind's code from --weathernext {args.weathernext} and --xarray-jax "
                         f"{args.xarray_jax}: {e}") from None
    return hk, xarray, xarray_jax, autoregressive, casting, normalization, graphcast


def build_step(args):
    """(train_step, its abstract arguments on a deviceless TPU v4, parameter count)."""
    import jax
    import numpy as np

    from graphcast_jax import apply_optimizer, init_opt_state
    hk, xarray, xarray_jax, autoregressive, casting, normalization, graphcast = import_deepmind(args)
    resolution, mesh_size, task_name = MODELS[args.model]
    model = graphcast.ModelConfig(resolution=resolution, mesh_size=mesh_size, latent_size=512, gnn_msg_steps=16,
                                  hidden_layers=1, radius_query_fraction_edge_length=0.6)
    task = getattr(graphcast, task_name)
    lat = np.linspace(-90, 90, int(round(180 / resolution)) + 1)
    lon = np.arange(0, 360, resolution)
    levels = np.array(task.pressure_levels)
    batch, hour = args.batch, np.timedelta64(1, "h")

    def variable(name: str, times: int):
        zeros = lambda *shape: np.broadcast_to(np.zeros((), np.float32), shape)  # noqa: E731
        if name in ("year_progress_sin", "year_progress_cos"):
            return ("batch", "time"), zeros(batch, times)
        if name in ("day_progress_sin", "day_progress_cos"):
            return ("batch", "time", "lon"), zeros(batch, times, lon.size)
        if name in graphcast.TARGET_ATMOSPHERIC_VARS:
            return ("batch", "time", "level", "lat", "lon"), zeros(batch, times, levels.size, lat.size, lon.size)
        if name in ("geopotential_at_surface", "land_sea_mask"):
            return ("lat", "lon"), zeros(lat.size, lon.size)
        return ("batch", "time", "lat", "lon"), zeros(batch, times, lat.size, lon.size)

    def dataset(names, times):
        return xarray.Dataset({n: variable(n, len(times)) for n in names},
                              coords={"lat": lat, "lon": lon, "level": levels, "time": times})

    target_times = np.arange(1, args.rollout + 1) * 6 * hour
    inputs = dataset(task.input_variables, np.array([-6, 0]) * hour)
    targets = dataset(task.target_variables, target_times)
    forcings = dataset(task.forcing_variables, target_times)
    names = set(task.input_variables) | set(task.target_variables) | set(task.forcing_variables)
    ones = xarray.Dataset({n: (("level",), np.ones(levels.size, np.float32))
                           if n in graphcast.TARGET_ATMOSPHERIC_VARS else ((), np.float32(1)) for n in names},
                          coords={"level": levels})

    @hk.transform_with_state
    def loss_fn(inputs, targets, forcings):
        predictor = casting.Bfloat16Cast(graphcast.GraphCast(model, task))
        predictor = normalization.InputsAndResiduals(predictor, diffs_stddev_by_level=ones, mean_by_level=ones,
                                                     stddev_by_level=ones)
        predictor = autoregressive.Predictor(predictor, gradient_checkpointing=not args.no_gradient_checkpointing)
        loss, _ = predictor.loss(inputs, targets, forcings)
        return xarray_jax.unwrap_data(loss.mean(), require_jax=True)

    params, state = jax.eval_shape(lambda *d: loss_fn.init(jax.random.PRNGKey(0), *d), inputs, targets, forcings)

    def rebuild(arrays, like):
        return xarray_jax.Dataset({k: (like[k].dims, a) for k, a in arrays.items()},
                                  coords={k: like.coords[k].values for k in like.coords})

    def train_step(params, opt_state, i, t, f):
        def loss(params):
            return loss_fn.apply(params, state, None, rebuild(i, inputs), rebuild(t, targets),
                                 rebuild(f, forcings))[0]
        value, grads = jax.value_and_grad(loss)(params)
        params, opt_state = apply_optimizer("adam", params, grads, opt_state)
        return params, opt_state, value

    sharding = jax.sharding.SingleDeviceSharding(judge.target_device("tpu-v4"))

    def place(tree):
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)

    data = [{k: v.data for k, v in ds.data_vars.items()} for ds in (inputs, targets, forcings)]
    arguments = (place(params), place(jax.eval_shape(lambda p: init_opt_state("adam", p), params)), *map(place, data))
    count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
    return train_step, arguments, count


def compile_step(args) -> dict:
    import jax
    step, arguments, count = build_step(args)
    start = time.perf_counter()
    lowered = jax.jit(step, donate_argnums=(0, 1)).lower(*arguments)
    out = {"parameters": count}
    try:
        out.update(judge.memory_fields(lowered.compile().memory_analysis()), fits=True,
                   available_bytes=judge.available_hbm(judge.target_device("tpu-v4")), required_bytes=None)
    except jax.errors.JaxRuntimeError as e:
        oom = judge.out_of_memory(str(e))
        if oom is None:
            raise UsageError(f"tpu-v4: XLA could not compile the step: {str(e).strip().splitlines()[0]}") from None
        out.update(judge.memory_fields(None), fits=False, available_bytes=oom[1], required_bytes=oom[0])
    out["compile_seconds"] = round(time.perf_counter() - start, 1)
    return out


def readable(r: dict) -> str:
    gib = judge.gib
    head = (f"DeepMind's {r['model']} step, rollout {r['rollout']}, batch {r['batch']}"
            f"{'' if r['gradient_checkpointing'] else ', no gradient checkpointing'}: ")
    if "hbm_mib" not in r:  # the whole compile
        if not r["fits"]:
            return head + f"DOES NOT FIT: needs {gib(r['required_bytes'])} GiB of {gib(r['available_bytes'])} GiB HBM"
        return head + (f"fits, XLA peak {gib(r['peak_bytes'])} GiB (argument {gib(r['argument_bytes'])}, "
                       f"temp {gib(r['temp_bytes'])}) of {gib(r['available_bytes'])} GiB HBM")
    if r["as_written_bytes"] is None:
        return head + "under XLA's rematerialisation limit as written (the pass had nothing to do)"
    return head + (f"as written {gib(r['as_written_bytes'])} GiB of temporaries, after XLA's rematerialisation "
                   f"{gib(r['after_remat_bytes'])} against its limit of {gib(r['remat_limit_bytes'])} "
                   f"(arguments {gib(r['arguments_bytes'])}): {'fits' if r['remat_fits'] else 'does not fit'}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
        judge.require_packages(["tpu-v4"])
        import_deepmind(args)  # here too, so that the probe's child cannot be the first to find one missing
        case = {"model": args.model, "rollout": args.rollout, "batch": args.batch,
                "gradient_checkpointing": not args.no_gradient_checkpointing}
        if args.as_written or args.remat:
            child = [a for a in argv if a not in ("--as-written", "--remat", "--json")]
            probe = judge.remat_probe(child, judge.PROBE_HBM_MIB if args.as_written else None,
                                      script=os.path.abspath(__file__))
            result = {**case, **probe}
            fits = probe["remat_fits"]
        else:
            result = {**case, **compile_step(args)}
            fits = result["fits"]
    except UsageError as e:
        print(f"actmem-jax: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else readable(result), flush=True)
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
