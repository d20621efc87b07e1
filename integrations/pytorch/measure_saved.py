#!/usr/bin/python3
"""Measures, in this torch version, the memory behaviour that actmem's PyTorch
profile must mirror, and writes it as JSON (default: saved_tensors.json next to
this file). Three parts:

  saved       per op kind, what autograd saves for backward (saved_tensors_hooks):
              which input/output (matched by storage data_ptr), shape, dtype, bytes.
  backward    per op kind, what its backward allocates and frees (bytes from
              mallinfo2, sampled after every aten op).
  checkpoint  lifetimes under torch.utils.checkpoint: what a region keeps
              after forward, when recomputation happens, what it holds, when
              it is freed; plain, one region, two regions, nested regions.

Byte figures in `backward` and `checkpoint` are in units U (one E x C float32
tensor, E = 3000, C = 64: 768,000 bytes); non-tensor overhead is about 0.002 U
per op, so figures are rounded to 0.01 U. Doc: docs/pytorch-memory-profile.md.

usage: /usr/bin/python3 measure_saved.py [--out FILE]
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys

from mallinfo import ensure_malloc_env, live_bytes

# The context every measured forward pass runs in: nothing, or
# torch.autocast("cpu", dtype=torch.bfloat16) with --autocast bfloat16.
forward_context = contextlib.nullcontext

E, N, C, B = 3000, 1000, 64, 2
U = E * C * 4


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="measure_saved.py")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "saved_tensors.json"))
    p.add_argument("--autocast", choices=["bfloat16"],
                   help="run every forward pass under torch.autocast('cpu', dtype=torch.bfloat16) "
                        "(torch >= 2), and add the `autocast` part: its weight-cast cache")
    args = p.parse_args(argv)
    ensure_malloc_env()
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.autocast:
        global forward_context
        forward_context = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    report = {
        "torch_version": torch.__version__,
        "how": "integrations/pytorch/measure_saved.py (MALLOC_ARENA_MAX=1, fixed MALLOC_MMAP_THRESHOLD_, "
               "tcache off, torch.set_num_threads(1))" + (f" --autocast {args.autocast}" if args.autocast else ""),
        "autocast": args.autocast,
        "unit_U_bytes": U,
        "saved": saved_table(),
        "backward": backward_table(),
        "checkpoint": checkpoint_table(),
    }
    if args.autocast:
        report["autocast_weight_cache"] = autocast_weight_cache()
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0


# ---------------------------------------------------------------- saved tensors

# Small distinct dimensions, so that shapes can be written symbolically.
SYM = {7: "N", 5: "Cin", 3: "Cout", 2: "B", 11: "E", 13: "R", 14: "N*B", 10: "2*Cin"}


def _sym(shape):
    return "[" + ", ".join(SYM.get(d, str(d)) for d in shape) + "]"


def saved_table():
    import torch
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    n, cin, cout, b, e, r = 7, 5, 3, 2, 11, 13
    leaf = lambda *s: torch.randn(*s, requires_grad=True)  # noqa: E731
    x, x3, w, bias = leaf(n, cin), leaf(n, b, cin), leaf(cout, cin), leaf(cout)
    g, beta = leaf(cin), leaf(cin)
    src, idx, tgt = leaf(e, cin), torch.randint(0, n, (e,)), torch.randn(n, cin)
    y = leaf(n, cin)
    w2, b2, g2, beta2, y2 = leaf(cout, cout), leaf(cout), leaf(cout), leaf(cout), leaf(n, cout)
    tgt2 = torch.randn(n, cout)
    cases = [
        ("linear, 2-D input", "F.linear(x, w, b)", lambda: F.linear(x, w, bias), dict(x=x, w=w, b=bias)),
        ("linear, 3-D contiguous input", "F.linear(x3, w, b)", lambda: F.linear(x3, w, bias),
         dict(x3=x3, w=w, b=bias)),
        ("linear, 3-D non-contiguous input", "F.linear(x3.transpose(0, 1), w, b)",
         lambda: F.linear(x3.transpose(0, 1), w, bias), dict(x3=x3, w=w, b=bias)),
        ("silu", "F.silu(x)", lambda: F.silu(x), dict(x=x)),
        ("layer_norm, 2-D", "F.layer_norm(x, (Cin,), g, beta)", lambda: F.layer_norm(x, (cin,), g, beta),
         dict(x=x, g=g, beta=beta)),
        ("layer_norm, 3-D", "F.layer_norm(x3, (Cin,), g, beta)", lambda: F.layer_norm(x3, (cin,), g, beta),
         dict(x3=x3, g=g, beta=beta)),
        ("cat", "torch.cat([x, y], -1)", lambda: torch.cat([x, y], -1), dict(x=x, y=y)),
        ("index_select", "x.index_select(0, idx)", lambda: x.index_select(0, idx), dict(x=x, idx=idx)),
        ("index_add on zeros", "torch.zeros(N, Cin).index_add(0, idx, src)",
         lambda: torch.zeros(n, cin).index_add(0, idx, src), dict(src=src, idx=idx)),
        ("add", "x + y", lambda: x + y, dict(x=x, y=y)),
        ("slice", "src[1:5]", lambda: src[1:5], dict(src=src)),
        ("mse_loss", "F.mse_loss(x, target)", lambda: F.mse_loss(x, tgt), dict(x=x, target=tgt)),
        ("zeros", "torch.zeros(R, Cin)", lambda: torch.zeros(r, cin), {}),
        # Chains as the model runs them: under autocast, what the later ops
        # receive is what the earlier ones return (bfloat16 or float32).
        ("MLP: linear, silu, linear, layer_norm", "F.layer_norm(F.linear(F.silu(F.linear(x, w, b)), w2, b2), "
         "(Cout,), g2, beta2)", lambda: F.layer_norm(F.linear(F.silu(F.linear(x, w, bias)), w2, b2), (cout,), g2,
                                                     beta2),
         dict(x=x, w=w, b=bias, w2=w2, b2=b2, g2=g2, beta2=beta2)),
        ("residual add of a linear's output", "y2 + F.linear(x, w, b)", lambda: y2 + F.linear(x, w, bias),
         dict(y2=y2, x=x, w=w, b=bias)),
        ("index_add on zeros of a linear's output (zeros in its dtype)",
         "h = F.linear(src, w, b); torch.zeros(N, Cout, dtype=h.dtype).index_add(0, idx, h)",
         lambda: (lambda h: torch.zeros(n, cout, dtype=h.dtype).index_add(0, idx, h))(F.linear(src, w, bias)),
         dict(src=src, idx=idx, w=w, b=bias)),
        ("scatter_add_ on new_zeros of a linear's output",
         "h = F.linear(src, w, b); h.new_zeros(N, Cout).scatter_add_(0, idx[:, None].expand_as(h), h)",
         lambda: (lambda h: h.new_zeros(n, cout).scatter_add_(0, idx[:, None].expand_as(h), h))(
             F.linear(src, w, bias)), dict(src=src, idx=idx, w=w, b=bias)),
        ("mse_loss of a linear's output", "F.mse_loss(F.linear(x, w, b), target2)",
         lambda: F.mse_loss(F.linear(x, w, bias), tgt2), dict(x=x, w=w, b=bias, target2=tgt2)),
    ]

    class Outputs(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.by_storage = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            label = f"{func} output {{}}"
            if func == torch.ops.aten._to_copy.default:  # autocast's casts: of what
                ptr = args[0].storage().data_ptr()
                src = self.names[ptr][0] if ptr in self.names else self.by_storage.get(ptr, "unknown")
                label += f" (a {str(args[0].dtype).replace('torch.', '')} -> "
                label += f"{str((kwargs or {}).get('dtype')).replace('torch.', '')} cast of {src})"
            for k, t in enumerate(tree_flatten(out)[0]):
                if isinstance(t, torch.Tensor):
                    self.by_storage.setdefault(t.storage().data_ptr(), label.format(k))
            return out

    table = []
    for name, call, fn, named in cases:
        packed = []
        names = {t.storage().data_ptr(): (k, tuple(t.shape)) for k, t in named.items()}
        outputs = Outputs()
        outputs.names = names
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t), outputs, \
                forward_context():
            out = fn()
        saved = []
        for t in packed:
            ptr = t.storage().data_ptr()
            if ptr in names:
                k, shape = names[ptr]
                what = k if tuple(t.shape) == shape else f"{k} (a view, shape {_sym(t.shape)})"
            else:
                what = "new tensor: " + outputs.by_storage.get(ptr, "unknown")
            saved.append({"is": what, "shape": _sym(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                          "bytes": t.storage().nbytes()})
        entry = {"op": name, "call": call, "grad_fn": type(out.grad_fn).__name__ if out.grad_fn else None,
                 "output_shape": _sym(out.shape), "output_dtype": str(out.dtype).replace("torch.", ""),
                 "saved": saved}
        if name == "mse_loss":
            entry["output_storage_bytes"] = out.storage().nbytes()
        table.append(entry)
    return table


# ---------------------------------------------------------------- autocast's weight casts

def autocast_weight_cache():
    """What autocast's cast cache holds: a float32 leaf weight W (1024 x 1024,
    4 MiB: W4) used by F.linear on a small input, once, twice, or once inside
    a non-reentrant checkpoint, with the cache on (the default) or off. Bytes above the level before autocast is
    entered, in units of W4: inside autocast after the forward, after
    leaving it, and after backward; plus how many casts of W ran."""
    import torch
    import torch.nn.functional as F
    from op_meter import OpMeter

    k = 1024
    w = torch.randn(k, k, requires_grad=True)
    w4 = w.numel() * 4
    x = torch.randn(8, k, requires_grad=True)
    from torch.utils.checkpoint import checkpoint

    table = []
    for uses in (1, 2, "checkpointed"):
        for cache in (True, False):
            for _ in range(2):  # warm-up, measured
                w.grad = x.grad = None
                meter = OpMeter(0, record=True)
                gc.collect()
                meter.base = base = live_bytes()
                with meter:
                    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cache):
                        h = x
                        if uses == "checkpointed":  # a non-reentrant region drops the saved cast
                            h = checkpoint(F.linear, h, w, use_reentrant=False, preserve_rng_state=False)
                        for _ in range(uses if uses != "checkpointed" else 0):
                            h = F.linear(h, w)
                        out = h.float().sum()
                        del h
                        inside = live_bytes() - base
                    after_exit = live_bytes() - base
                    out.backward()
                    del out
                after_backward = live_bytes() - base - w4  # w.grad is float32 W4
            casts = sum(1 for op, *_ in meter.recorded() if op == torch.ops.aten._to_copy.default)
            what = "under a checkpoint, used once" if uses == "checkpointed" else f"used {uses}x"
            table.append({"case": f"F.linear with W {what}, cache_enabled={cache}",
                          "casts_dispatched": casts,
                          "forward_inside_autocast_W4": round(inside / w4, 3),
                          "after_leaving_autocast_W4": round(after_exit / w4, 3),
                          "after_backward_minus_grad_W4": round(after_backward / w4, 3)})
    return table


# ---------------------------------------------------------------- backward allocations

def _trace(make, label_fns=False):
    """Runs make() -> (forward, seed_grad) twice (warm-up, measured). Returns
    live bytes after forward and after backward, and the per-op timeline (op,
    phase, live bytes), all above the level before forward (leaves and the
    seed grad exist before). forward(meter) returns the tensor to call
    backward on."""
    from op_meter import OpMeter

    out_dtype = None
    for _ in range(2):
        forward, seed = make()
        if seed is not None and out_dtype is not None:
            seed = seed.to(out_dtype)  # the output's dtype, as the warm-up showed (autocast)
        meter = OpMeter(0, record=True)
        gc.collect()
        meter.base = live_bytes()
        with meter:
            with forward_context():
                out = forward(meter)
            out_dtype = out.dtype
            after_forward = live_bytes() - meter.base
            with meter.labelled(phase="backward"):
                out.backward(seed)
            del out
        after_backward = live_bytes() - meter.base  # the seed grad existed before, too
        del seed
    rows = [(str(op).replace("aten.", ""), phase, live) for op, phase, _, live in meter.recorded()]
    return after_forward, after_backward, rows


def _compact(rows, start_phase="backward"):
    """Ops from the first one of start_phase on, with live U and the change;
    ops that change live bytes by less than 0.01 U are folded away."""
    out, prev, started = [], None, False
    for op, phase, live in rows:
        started = started or phase == start_phase
        if started and (prev is None or abs(live - prev) >= U / 100):
            out.append(f"{phase[:4]} {op}: {live / U:.2f} U ({(live - (prev or 0)) / U:+.2f})")
        prev = live
    return out


def _u(b):
    return round(b / U, 2)


def backward_table():
    """Each case: leaves exist before the measured level; `forward` builds the
    op under test on non-leaf inputs (h = leaf * 1) unless the case is about
    leaves; the timeline shows what the backward ops allocate."""
    import torch
    import torch.nn.functional as F

    idx = torch.randint(0, N, (E,))
    ones = lambda *s: torch.ones(*s)  # noqa: E731
    leaf = lambda *s: torch.randn(*s, requires_grad=True)  # noqa: E731
    cases = {
        "index_select (source N x C = U/3, E x C output)":
            lambda: ((lambda v: lambda m: v.index_select(0, idx))(leaf(N, C)), ones(E, C)),
        "cat of two E x C (grad of each input is a view of the incoming grad)":
            lambda: ((lambda a, b: lambda m: torch.cat([F.silu(a * 1), F.silu(b * 1)], -1))(leaf(E, C), leaf(E, C)),
                     ones(E, 2 * C)),
        "add (both inputs get the incoming grad itself)":
            lambda: ((lambda a, b: lambda m: F.silu(a * 1) + F.silu(b * 1))(leaf(E, C), leaf(E, C)), ones(E, C)),
        "two consumers of one tensor h (h * 2, h * 3; grads summed out of place)":
            lambda: ((lambda a: lambda m: (lambda h: torch.cat([h * 2, h * 3], -1))(a * 1))(leaf(E, C)),
                     ones(E, 2 * C)),
        "silu": lambda: ((lambda a: lambda m: F.silu(a * 1))(leaf(E, C)), ones(E, C)),
        "linear C -> C, 2-D": lambda: ((lambda a, w, b: lambda m: F.linear(a * 1, w, b))(leaf(E, C), leaf(C, C),
                                                                                        leaf(C)), ones(E, C)),
        "linear C -> C, 3-D [E/2, 2, C]":
            lambda: ((lambda a, w, b: lambda m: F.linear(a * 1, w, b))(leaf(E // 2, 2, C), leaf(C, C), leaf(C)),
                     ones(E // 2, 2, C)),
        "layer_norm": lambda: ((lambda a, g, b: lambda m: F.layer_norm(a * 1, (C,), g, b))(leaf(E, C), leaf(C),
                                                                                           leaf(C)), ones(E, C)),
        "index_add on zeros (E x C source into N x C)":
            lambda: ((lambda a: lambda m: torch.zeros(N, C).index_add(0, idx, a * 1))(leaf(E, C)), ones(N, C)),
        "slice rows 0:E/3 of E x C": lambda: ((lambda a: lambda m: (a * 1)[:E // 3])(leaf(E, C)), ones(E // 3, C)),
        "mse_loss (E x C)": lambda: ((lambda a, t: lambda m: F.mse_loss(a * 1, t))(leaf(E, C), torch.randn(E, C)),
                                     None),
        "parameter used twice (AccumulateGrad)":
            lambda: ((lambda a, w: lambda m: torch.cat([F.linear(a[:E // 2] * 1, w), F.linear(a[E // 2:] * 1, w)]))(
                leaf(E, C), leaf(C, C)), ones(E, C)),
    }
    table = []
    for name, make in cases.items():
        after_forward, after_backward, rows = _trace(make)
        table.append({"case": name, "after_forward_U": _u(after_forward), "after_backward_U": _u(after_backward),
                      "backward_peak_U": _u(max(live for _, ph, live in rows if ph == "backward")),
                      "backward_ops": [op for op, ph, _ in rows if ph == "backward"],
                      "timeline": _compact(rows)})
    return table


# ---------------------------------------------------------------- checkpoint lifetimes

def checkpoint_table():
    """Region body: an MLP block x -> linear -> silu -> linear -> layer_norm,
    C -> C on E rows, saving 4 U + 2 E floats (mean, rstd) per block. The
    input x = leaf * 1 (1 U); the loss is out.pow(2).sum() (saves out, 1 U)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    weights = [torch.randn(C, C, requires_grad=True) for _ in range(8)]

    def mlp(h, k):
        h = F.linear(h, weights[2 * k])
        h = F.silu(h)
        h = F.linear(h, weights[2 * k + 1])
        return F.layer_norm(h, (C,))

    def ck(meter, fn, *args, reentrant=False, context_fn=None):
        def run(*a):
            if meter.phase == "forward":
                return fn(*a)
            with meter.labelled(phase="recompute"):
                return fn(*a)
        extra = {} if context_fn is None else {"context_fn": context_fn}
        return checkpoint(run, *args, use_reentrant=reentrant, preserve_rng_state=False, **extra)

    def two(h):
        return mlp(mlp(h, 0), 1)

    def four(h):
        return mlp(mlp(mlp(mlp(h, 0), 1), 2), 3)

    def chain(z, k):
        """Blocks k..3 in sequence."""
        for j in range(k, 4):
            z = mlp(z, j)
        return z

    cases = {
        "plain: two MLP blocks, no checkpoint": lambda m, h: two(h),
        "one region around both blocks": lambda m, h: ck(m, two, h),
        "two sequential regions, one per block": lambda m, h: ck(m, lambda z: mlp(z, 1), ck(m, lambda z: mlp(z, 0), h)),
        "nested, both non-reentrant: outer(both), inner(block 1)":
            lambda m, h: ck(m, lambda z: ck(m, lambda q: mlp(q, 1), mlp(z, 0)), h),
        "nested, inner reentrant: outer(both) non-reentrant, inner(block 1) reentrant":
            lambda m, h: ck(m, lambda z: ck(m, lambda q: mlp(q, 1), mlp(z, 0), reentrant=True), h),
        "region whose output feeds a second region via a saving op (three blocks, regions 1 and 3)":
            lambda m, h: ck(m, lambda z: mlp(z, 2), mlp(ck(m, lambda z: mlp(z, 0), h), 1)),
        # Four blocks, non-reentrant checkpoints nested 0..3 levels below
        # one region around all four (each level: block j, then the next level).
        "four blocks, plain": lambda m, h: four(h),
        "four blocks, one region around all four": lambda m, h: ck(m, four, h),
        "four blocks, four sequential regions, one per block":
            lambda m, h: ck(m, lambda z: mlp(z, 3), ck(m, lambda z: mlp(z, 2), ck(
                m, lambda z: mlp(z, 1), ck(m, lambda z: mlp(z, 0), h)))),
        "four blocks, nested non-reentrant 1 level: outer(0..3) > inner(1..3)":
            lambda m, h: ck(m, lambda z: ck(m, lambda q: chain(q, 1), mlp(z, 0)), h),
        "four blocks, nested non-reentrant 2 levels: outer(0..3) > (1..3) > (2..3)":
            lambda m, h: ck(m, lambda z: ck(m, lambda q: ck(m, lambda r: chain(r, 2), mlp(q, 1)), mlp(z, 0)), h),
        "four blocks, nested non-reentrant 3 levels: outer(0..3) > (1..3) > (2..3) > (3)":
            lambda m, h: ck(m, lambda z: ck(m, lambda q: ck(m, lambda r: ck(m, lambda t: mlp(t, 3), mlp(r, 2)),
                                                            mlp(q, 1)), mlp(z, 0)), h),
        "four blocks, nested non-reentrant 2 levels, inner regions first: outer(0..3) > (0..2) > (0..1)":
            lambda m, h: ck(m, lambda z: mlp(ck(m, lambda q: mlp(ck(m, lambda r: mlp(mlp(r, 0), 1), q), 2), z), 3), h),
        "four blocks, nested non-reentrant 1 level, inner in the middle: outer(0..3) > (1..2)":
            lambda m, h: ck(m, lambda z: mlp(ck(m, lambda q: mlp(mlp(q, 1), 2), mlp(z, 0)), 3), h),
        # Flat regions that end where the nested ones above end.
        "four blocks, sequential regions (0..2), (3)":
            lambda m, h: ck(m, lambda z: mlp(z, 3), ck(m, lambda z: mlp(mlp(mlp(z, 0), 1), 2), h)),
        "four blocks, sequential regions (0..1), (2), (3)":
            lambda m, h: ck(m, lambda z: mlp(z, 3), ck(m, lambda z: mlp(z, 2), ck(m, lambda z: mlp(mlp(z, 0), 1), h))),

    }
    sac = _selective_policies()
    for label, context_fn in sac.items():
        cases[f"one region around both blocks, selective: {label}"] = (
            lambda cf: lambda m, h: ck(m, two, h, context_fn=cf))(context_fn)
    reference = reference4 = None
    table = []
    for name, body in cases.items():
        leaf = torch.randn(E, C, requires_grad=True, generator=torch.Generator().manual_seed(5))

        def make():
            for w in weights:
                w.grad = None
            leaf.grad = None

            def forward(meter):
                return body(meter, leaf * 1).pow(2).sum()
            return forward, None

        after_forward, after_backward, rows = _trace(make)
        grads = [leaf.grad.clone()] + [w.grad.clone() if w.grad is not None else None for w in weights]
        if reference is None:
            reference = grads
        entry = {"case": name}
        if name.startswith("four blocks"):
            reference4 = reference4 if "plain" not in name else grads
            entry["gradients_equal_plain"] = _all_close(grads, reference4)
        elif "three blocks" not in name:  # the others compute the same function as "plain"
            entry["gradients_equal_plain"] = _all_close(grads, reference)
        table.append({**entry, "after_forward_U": _u(after_forward),
                      "backward_peak_U": _u(max(live for _, ph, live in rows if ph != "forward")),
                      "recompute_ops": sum(ph == "recompute" for _, ph, _ in rows),
                      "timeline": _compact(rows)})
    table.append(edge_block_case())
    return table


def _all_close(grads, reference) -> bool:
    import torch
    return all((a is None and b is None) or (a is not None and b is not None and
                                             torch.allclose(a, b, rtol=1e-5, atol=1e-7))
               for a, b in zip(grads, reference))


def _selective_policies() -> dict:
    """Selective activation checkpointing (torch >= 2.4): context_fn values
    for torch.utils.checkpoint.checkpoint, keyed by what they save; {} where
    this torch has no create_selective_checkpoint_contexts. The region body
    runs F.linear without bias on 2-D inputs, i.e. aten t + mm."""
    import functools

    import torch
    try:
        from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    except ImportError:
        return {}

    def policy(save):
        def decide(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if save(op) else CheckpointPolicy.PREFER_RECOMPUTE
        return functools.partial(create_selective_checkpoint_contexts, decide)

    mm = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}
    return {
        "save aten.mm/addmm outputs, recompute the rest": policy(lambda op: op in mm),
        "save aten.mm/addmm and silu outputs": policy(lambda op: op in mm or op == torch.ops.aten.silu.default),
        "save every op's outputs (MUST_SAVE always)": policy(lambda op: True),
        "save nothing (PREFER_RECOMPUTE always)": policy(lambda op: False),
    }


def edge_block_case():
    """Edge update in 3 blocks (each under a non-reentrant checkpoint): per block
    cat([e[a:b], v.index_select(0, s), v.index_select(0, r)]) -> MLP, blocks
    joined with cat(dim 0). e: E x C (1 U), v: N x C (U/3), used as sender and
    receiver, as in the processor."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    s, r = torch.randint(0, N, (E,)), torch.randint(0, N, (E,))
    w1, w2 = torch.randn(C, 3 * C, requires_grad=True), torch.randn(C, C, requires_grad=True)

    def block(e, v, s_, r_):
        h = torch.cat([e, v.index_select(0, s_), v.index_select(0, r_)], -1)
        h = F.linear(h, w1)
        h = F.silu(h)
        h = F.linear(h, w2)
        return F.layer_norm(h, (C,))

    def make():
        e0, v0 = torch.randn(E, C, requires_grad=True), torch.randn(N, C, requires_grad=True)
        w1.grad = w2.grad = None

        def forward(meter):
            def run(*a):
                if meter.phase == "forward":
                    return block(*a)
                with meter.labelled(phase="recompute"):
                    return block(*a)
            e, v = e0 * 1, v0 * 1
            parts = [checkpoint(run, e[a:b], v, s[a:b], r[a:b], use_reentrant=False, preserve_rng_state=False)
                     for a, b in ((0, 1000), (1000, 2000), (2000, 3000))]
            return torch.cat(parts, 0)
        return forward, torch.ones(E, C)

    after_forward, after_backward, rows = _trace(make)
    return {"case": "edge update in 3 blocks of E/3 edges (e: 1 U, v: U/3, block concat input: 1 U)",
            "after_forward_U": _u(after_forward),
            "backward_peak_U": _u(max(live for _, ph, live in rows if ph != "forward")),
            "recompute_ops": sum(ph == "recompute" for _, ph, _ in rows),
            "timeline": _compact(rows)}


if __name__ == "__main__":
    sys.exit(main())
