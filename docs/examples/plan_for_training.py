#!/usr/bin/python3
"""A PyTorch training script asks actmem for its plan before building the model.

The plan is a dict (the plan document, docs/plan-format.md); the reference
GraphCast of integrations/pytorch reads it and runs the model under its
checkpoints and edge blocks. Here the memory budget is set between the least
memory any plan needs and what training without checkpoints needs, so the plan
must checkpoint; then one training step runs under it, and its loss and
gradients are checked against the same step without checkpoints.

    PYTHONPATH=build/python/package /usr/bin/python3 docs/examples/plan_for_training.py

Needs Debian's python3-torch: without it, exits 77 (skipped) unless
ACTMEM_REQUIRE_TORCH is set.
"""
import os
import pathlib
import sys

import actmem

try:
    import torch
except ImportError:
    print("plan_for_training: torch is not installed (Debian: python3-torch)", file=sys.stderr)
    sys.exit(1 if os.environ.get("ACTMEM_REQUIRE_TORCH") else 77)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "integrations" / "pytorch"))
from graphcast_reference import Description, GraphCast, loss_fn, make_inputs  # noqa: E402
from plan import EDGE_COUNT_FIELD, forward, parse_plan  # noqa: E402

MODEL = {"name": "small-graphcast", "architecture": "graphcast", "grid_nodes": 2000, "mesh_nodes": 500,
         "grid2mesh_edges": 3000, "mesh_edges": 3000, "mesh2grid_edges": 6000, "latent_size": 64,
         "mlp_hidden_layers": 1, "processor_steps": 6, "grid_input_features": 20, "mesh_input_features": 20,
         "edge_features": 4, "output_features": 10}
RUN = {"model": MODEL, "framework": "pytorch", "dtype": "float32", "batch": 1}


def choose_budget() -> int:
    """Halfway between the least memory any plan needs and the no-checkpoint peak."""
    least = actmem.fits(**RUN, memory="80GiB")["min_peak_bytes"]
    plain = actmem.simulate(**RUN, memory="80GiB", plan="none")["peak_bytes"]
    return (least + plain) // 2


def train_step(model: GraphCast, plan_dict: dict | None, seed: int = 0):
    """One step (forward under the plan, MSE loss, backward, SGD update on a
    copy); returns the loss and the gradients."""
    d = model.d
    stages = model.stages()
    edge_counts = {kind: getattr(d, field) for kind, field in EDGE_COUNT_FIELD.items()}
    plan = parse_plan(plan_dict or {"checkpoints": []}, stages, edge_counts, "actmem plan")
    inputs = make_inputs(d, batch=RUN["batch"], seed=seed)
    model.zero_grad(set_to_none=True)
    loss = loss_fn(forward(model, plan, inputs), inputs.target)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    torch.optim.SGD(model.parameters(), lr=0.0).step()  # the trainer's optimizer step (no change: lr 0)
    return loss.item(), grads


def main() -> int:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    budget = choose_budget()
    document = actmem.plan(**RUN, memory=budget)  # a device with exactly this much memory
    predicted = document["predicted"]
    print(f"actmem plan for {MODEL['name']} within {budget} bytes: fits={predicted['fits']}, "
          f"peak {predicted['peak_bytes']} bytes, recompute +{100 * predicted['recompute_overhead']:.1f}% FLOPs")
    print(f"  checkpoints: {document['checkpoints']}")
    print(f"  edge_blocks: {document['edge_blocks']}")
    if not predicted["fits"] or not document["checkpoints"]:
        print("plan_for_training: expected a fitting plan with checkpoints", file=sys.stderr)
        return 1

    # The model is built from the description the plan carries.
    model = GraphCast(Description.from_json(document["model"], "plan"))
    loss, grads = train_step(model, document)
    reference_loss, reference_grads = train_step(model, None)
    same = loss == reference_loss and all(torch.allclose(a, b, rtol=1e-5, atol=1e-6)
                                          for a, b in zip(grads, reference_grads))
    print(f"one training step under the plan: loss {loss:.6f}; "
          f"{'same' if same else 'DIFFERENT'} loss and gradients as without checkpoints")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
