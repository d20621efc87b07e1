"""Tests of the reference GraphCast and plan application.
Run: /usr/bin/python3 -m pytest integrations/pytorch -q"""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.utils.checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from graphcast_reference import Description, GraphCast, block_bounds, loss_fn, make_inputs  # noqa: E402
from plan import Plan, PlanError, Region, builtin_plan, forward, parse_plan  # noqa: E402

TINY = Description(grid_nodes=40, mesh_nodes=12, grid2mesh_edges=50, mesh_edges=36, mesh2grid_edges=80,
                   latent_size=8, mlp_hidden_layers=1, processor_steps=4, grid_input_features=5,
                   mesh_input_features=3, edge_features=4, output_features=3)
EDGES = {"encoder": TINY.grid2mesh_edges, "processor": TINY.mesh_edges, "decoder": TINY.mesh2grid_edges}
TORCH_MAJOR = int(torch.__version__.split(".")[0])
STAGES = ["encoder", "mesh_edge_embed", "processor.0", "processor.1", "processor.2", "processor.3", "decoder"]


def gradients(plan: Plan, batch: int = 1):
    torch.manual_seed(0)
    model = GraphCast(TINY).double()
    x = make_inputs(TINY, batch, seed=1)
    for name in ("grid_x", "mesh_x", "g2m_x", "mesh_x_e", "m2g_x", "target"):
        setattr(x, name, getattr(x, name).double())
    loss = loss_fn(forward(model, plan, x), x.target)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.fixture(scope="module")
def reference():
    return {b: gradients(Plan(STAGES), b) for b in (1, 2)}


def assert_same_gradients(plan, reference, batch=1):
    loss, grads = gradients(plan, batch)
    ref_loss, ref_grads = reference[batch]
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    assert grads.keys() == ref_grads.keys()
    for name, g in grads.items():
        torch.testing.assert_close(g, ref_grads[name], rtol=1e-9, atol=1e-12, msg=name)


@pytest.mark.parametrize("name", ["none", "full", "every:2", "every:3", "deepmind"])
def test_builtin_plans_give_the_unplanned_gradients(name, reference):
    assert_same_gradients(builtin_plan(name, STAGES), reference)


@pytest.mark.parametrize("blocks", [1, 3, 7])
def test_edge_blocks_give_the_unplanned_gradients(blocks, reference):
    plan = Plan(STAGES, (), {"encoder": blocks, "processor.1": blocks, "decoder": blocks})
    assert_same_gradients(plan, reference)


@pytest.mark.parametrize("blocks", [1, 3, 7])
def test_edge_blocks_inside_regions_give_the_unplanned_gradients(blocks, reference):
    plan = builtin_plan("deepmind", STAGES, edge_blocks=blocks)
    plan.edge_blocks["processor.1"] = blocks
    assert_same_gradients(plan, reference)


def test_nested_regions_give_the_unplanned_gradients(reference):
    obj = {"checkpoints": [
        {"from": "encoder", "to": "processor.1", "inner": [
            {"from": "encoder", "to": "encoder"},  # no inputs that require grad
            {"from": "processor.0", "to": "processor.1", "inner": [{"from": "processor.1", "to": "processor.1"}]}]},
        {"from": "processor.2", "to": "decoder", "inner": [{"from": "processor.3", "to": "decoder"}]}],
        "edge_blocks": {"encoder": 3, "processor.1": 2, "decoder": 7}}
    assert_same_gradients(parse_plan(obj, STAGES, EDGES), reference)


def test_batch_two_with_plans(reference):
    assert_same_gradients(builtin_plan("deepmind", STAGES, edge_blocks=3), reference, batch=2)


def test_block_bounds_are_contiguous_and_differ_by_at_most_one():
    for edges in (7, 10, 50, 101):
        for blocks in range(1, min(edges, 12) + 1):
            bounds = block_bounds(edges, blocks)
            sizes = [b - a for a, b in bounds]
            assert bounds[0][0] == 0 and bounds[-1][1] == edges
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
            assert max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True)  # the first edges % blocks are one larger
    assert block_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    with pytest.raises(ValueError):
        block_bounds(5, 6)


def test_builtin_plan_shapes():
    assert builtin_plan("every:3", STAGES).regions == (Region(2, 4), Region(5, 5))
    dm = builtin_plan("deepmind", STAGES)
    assert dm.regions == (Region(0, 0), Region(2, 4), Region(5, 5), Region(6, 6))
    assert dm.edge_blocks == {"encoder": 4, "decoder": 4}
    assert builtin_plan("full", STAGES).regions == tuple(Region(i, i) for i in range(7))


@pytest.mark.parametrize("obj, message", [
    ({"checkpoints": [{"from": "encoder", "to": "processor.9"}]},
     "plan: field 'checkpoints[0].to': unknown stage 'processor.9' (model stages: encoder .. decoder)"),
    ({"edge_blocks": {"procesor.1": 2}},
     "plan: field 'edge_blocks.procesor.1': unknown stage 'procesor.1' (model stages: encoder .. decoder)"),
    ({"edge_blocks": {"mesh_edge_embed": 2}},
     "plan: field 'edge_blocks.mesh_edge_embed': stage mesh_edge_embed has no edge update"),
    ({"edge_blocks": {"encoder": 51}},
     "plan: field 'edge_blocks.encoder': expected an integer in 1..50, got 51"),
    ({"checkpoints": [{"from": "processor.1", "to": "processor.0"}]},
     "plan: field 'checkpoints[0]': 'from' processor.1 comes after 'to' processor.0"),
    ({"checkpoints": [{"from": "encoder", "to": "processor.1"}, {"from": "processor.1", "to": "decoder"}]},
     "plan: field 'checkpoints': regions encoder..processor.1 and processor.1..decoder overlap"),
    ({"checkpoints": [{"from": "encoder", "to": "processor.0",
                       "inner": [{"from": "processor.0", "to": "processor.1"}]}]},
     "plan: field 'checkpoints[0].inner[0]': region processor.0..processor.1 is not inside its enclosing region "
     "encoder..processor.0"),
    ({"stages": ["encoder", "decoder"]},
     "plan: field 'stages': plan was made for ['encoder', 'decoder'], model has " + str(STAGES)),
])
def test_bad_plans_are_rejected_with_the_field_named(obj, message):
    with pytest.raises(PlanError) as err:
        parse_plan(obj, STAGES, EDGES)
    assert str(err.value) == message


def test_unknown_builtin_is_rejected():
    with pytest.raises(PlanError, match="unknown plan 'every3'"):
        builtin_plan("every3", STAGES)


# ---------------------------------------------------------------- measure.py

MEASURE = [sys.executable, os.path.join(HERE, "measure.py")]
SMALL = dict(TINY.__dict__, grid_nodes=400, mesh_nodes=100, grid2mesh_edges=600, mesh_edges=600,
             mesh2grid_edges=1200, latent_size=32)


def run_measure(tmp_path, *args):
    model = tmp_path / "model.json"
    model.write_text(json.dumps(SMALL))
    return subprocess.run(MEASURE + ["--model", str(model), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("measure")
    outer = {"from": "processor.0", "to": "processor.3"}
    files = {"outer": {"checkpoints": [outer]},
             "nested": {"checkpoints": [dict(outer, inner=[{"from": "processor.1", "to": "processor.2"}])]}}
    out = {}
    for plan in ("none", "full", "deepmind", "outer", "nested"):
        spec = plan
        if plan in files:
            spec = str(tmp / f"{plan}.json")
            (tmp / f"{plan}.json").write_text(json.dumps(files[plan]))
        r = run_measure(tmp, "--plan", spec, "--timeline", str(tmp / f"{plan}.csv"))
        assert r.returncode == 0, r.stderr
        out[plan] = json.loads(r.stdout), (tmp / f"{plan}.csv").read_text().splitlines()
    return out


def test_measure_reports_sane_numbers(measured):
    none, _ = measured["none"]
    params = none["parameter_bytes"]
    for plan, (report, timeline) in measured.items():
        assert report["calibrated"], plan
        act, peak = report["activation_bytes_after_forward"], report["peak_dynamic_bytes"]
        assert 0 < act <= peak, plan
        # After backward only the parameter gradients remain.
        assert report["bytes_after_backward"] == pytest.approx(params, rel=0.02), plan
        assert timeline[0] == "index,op,phase,stage,live_bytes,raw_live_bytes"
        assert len(timeline) - 1 == sum(report["ops"].values())
    full, deepmind = measured["full"][0], measured["deepmind"][0]
    assert full["activation_bytes_after_forward"] < none["activation_bytes_after_forward"] / 4
    assert deepmind["activation_bytes_after_forward"] < none["activation_bytes_after_forward"] / 4
    assert full["ops"]["recompute"] > 0 and none["ops"]["recompute"] == 0


def test_nested_region_keeps_only_the_outer_inputs(measured):
    # A nested non-reentrant checkpoint would also keep the inner region's
    # inputs (v_m and e_m before processor.1) after the forward pass.
    outer, nested = measured["outer"][0], measured["nested"][0]
    latents = (SMALL["mesh_nodes"] + SMALL["mesh_edges"]) * SMALL["latent_size"] * 4
    diff = nested["activation_bytes_after_forward"] - outer["activation_bytes_after_forward"]
    assert abs(diff) < latents / 10


def test_measure_rejects_an_unknown_stage(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"checkpoints": [{"from": "encoder", "to": "processor.7"}]}))
    r = run_measure(tmp_path, "--plan", str(plan))
    assert r.returncode == 2
    assert r.stderr.strip() == (f"measure.py: error: {plan}: field 'checkpoints[0].to': unknown stage "
                                "'processor.7' (model stages: encoder .. decoder)")


# ---------------------------------------------------------------- measure_saved.py

def test_measure_saved_backs_the_documented_rules(tmp_path):
    out = tmp_path / "saved.json"
    r = subprocess.run([sys.executable, os.path.join(HERE, "measure_saved.py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    saved = {e["op"]: [s["is"] for s in e["saved"]] for e in report["saved"]}
    assert saved["index_add on zeros"] == ["idx", "src"]  # the messages stay alive for backward
    assert saved["cat"] == [] and saved["add"] == [] and saved["index_select"] == ["idx"]
    assert saved["silu"] == ["x"]
    assert len(saved["layer_norm, 2-D"]) == 5
    loss = next(e for e in report["saved"] if e["op"] == "mse_loss")
    assert loss["output_storage_bytes"] == 7 * 5 * 4  # the 0-d loss holds an N x Cin buffer
    ck = {e["case"].split(":")[0]: e for e in report["checkpoint"]}
    assert all(e.get("gradients_equal_plain", True) for e in report["checkpoint"])
    assert ck["one region around both blocks"]["after_forward_U"] == pytest.approx(2.0, abs=0.05)
    # Rule 20: 1.13's nested non-reentrant checkpoint keeps its inputs; 2.x's keeps nothing.
    nested = 3.0 if TORCH_MAJOR < 2 else 2.0
    assert ck["nested, both non-reentrant"]["after_forward_U"] == pytest.approx(nested, abs=0.05)
    assert ck["nested, inner reentrant"]["after_forward_U"] == pytest.approx(2.0, abs=0.05)
    four = {e["case"]: e for e in report["checkpoint"] if e["case"].startswith("four blocks")}
    if TORCH_MAJOR >= 2:
        # Nested non-reentrant regions, any depth (docs/pytorch-memory-profile.md,
        # "PyTorch 2.10 against 1.13"): the outer region's inputs after forward;
        # backward split at each nested region's end only.
        outer = four["four blocks, one region around all four"]
        for depth in ("1 level", "2 levels", "3 levels"):
            case = next(e for k, e in four.items() if k.startswith(f"four blocks, nested non-reentrant {depth}: "))
            assert case["after_forward_U"] == pytest.approx(outer["after_forward_U"], abs=0.03)
            assert case["backward_peak_U"] == pytest.approx(outer["backward_peak_U"], abs=0.03)
        middle = next(e for k, e in four.items() if "inner in the middle" in k)
        first = next(e for k, e in four.items() if "inner regions first" in k)
        assert middle["backward_peak_U"] == pytest.approx(four["four blocks, sequential regions (0..2), (3)"]
                                                          ["backward_peak_U"], abs=0.03)
        assert first["backward_peak_U"] == pytest.approx(four["four blocks, sequential regions (0..1), (2), (3)"]
                                                         ["backward_peak_U"], abs=0.03)


@pytest.mark.skipif(TORCH_MAJOR < 2 or not hasattr(torch.utils.checkpoint, "create_selective_checkpoint_contexts"),
                    reason="selective checkpointing and CPU bfloat16 autocast need torch >= 2.4")
def test_measure_saved_autocast_and_selective_rules(tmp_path):
    out = tmp_path / "autocast.json"
    r = subprocess.run([sys.executable, os.path.join(HERE, "measure_saved.py"), "--autocast", "bfloat16",
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    saved = {e["op"]: e for e in report["saved"]}
    linear = [(s["is"], s["dtype"]) for s in saved["linear, 2-D input"]["saved"]]
    assert linear == [("new tensor: aten._to_copy.default output 0 (a float32 -> bfloat16 cast of x)", "bfloat16"),
                      ("new tensor: aten._to_copy.default output 0 (a float32 -> bfloat16 cast of w)", "bfloat16")]
    mlp = saved["MLP: linear, silu, linear, layer_norm"]
    assert mlp["output_dtype"] == "bfloat16"  # LayerNorm runs in its input's dtype
    stats = [s["dtype"] for s in mlp["saved"] if "native_layer_norm" in s["is"]]
    assert stats == ["float32", "float32"]
    loss = [(s["is"].split(" (")[0], s["dtype"]) for s in saved["mse_loss of a linear's output"]["saved"]]
    assert ("new tensor: aten._to_copy.default output 0", "float32") in loss  # the float32 copy of pred
    cache = {e["case"]: e for e in report["autocast_weight_cache"]}
    twice, twice_uncached = (cache[f"F.linear with W used 2x, cache_enabled={c}"] for c in (True, False))
    assert twice["after_leaving_autocast_W4"] == pytest.approx(0.5, abs=0.02)  # one cast, cached
    assert twice_uncached["after_leaving_autocast_W4"] == pytest.approx(1.0, abs=0.02)
    held = cache["F.linear with W under a checkpoint, used once, cache_enabled=True"]
    assert held["forward_inside_autocast_W4"] == pytest.approx(0.5, abs=0.02)
    assert held["after_leaving_autocast_W4"] == pytest.approx(0.0, abs=0.02)
    # Selective checkpointing: the region keeps its inputs plus the policy's outputs (4 mm outputs of 0.5 U).
    ck = {e["case"]: e for e in report["checkpoint"]}
    region = ck["one region around both blocks"]
    mm = ck["one region around both blocks, selective: save aten.mm/addmm outputs, recompute the rest"]
    assert mm["after_forward_U"] == pytest.approx(region["after_forward_U"] + 2.0, abs=0.03)
    assert mm["backward_peak_U"] == pytest.approx(region["backward_peak_U"], abs=0.03)
    assert all(e.get("gradients_equal_plain", True) for e in report["checkpoint"])
