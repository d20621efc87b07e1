"""The Python module `actmem` (python/src, docs/api.md).

Run by CTest (python.api) with PYTHONPATH at the built module:
    PYTHONPATH=build/python/package /usr/bin/python3 -m pytest python/tests -q
"""
import json
import pathlib
from concurrent.futures import ThreadPoolExecutor

import pytest

import actmem

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Small enough that every call takes milliseconds (tests/test_models.h).
TINY = {"name": "tiny", "architecture": "graphcast", "grid_nodes": 2000, "mesh_nodes": 500,
        "grid2mesh_edges": 3000, "mesh_edges": 3000, "mesh2grid_edges": 6000, "latent_size": 64,
        "mlp_hidden_layers": 1, "processor_steps": 6, "grid_input_features": 20, "mesh_input_features": 20,
        "edge_features": 4, "output_features": 10}
RUN = {"model": TINY, "device": "a100-40gb", "framework": "pytorch"}


def plain(value):
    """True if value holds only dict (str keys), list, int, float, str, bool and None."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def test_catalogs_list_presets_and_devices_as_plain_values():
    assert actmem.models() == ["graphcast", "graphcast-small", "graphcast-operational"]
    devices = actmem.devices()
    assert plain(devices)
    tpu = next(d for d in devices if d["id"] == "tpu-v4")
    assert tpu == actmem.device("tpu-v4")
    assert tpu["memory_bytes"] == 32 * 2**30
    model = actmem.model("graphcast")
    assert model["latent_size"] == 512 and model["processor_steps"] == 16
    assert len(model["fingerprint"]) == 16 and model["parameter_count"] > 0
    assert actmem.__version__.count(".") == 2


def test_fits_answers_with_the_plan_and_the_least_memory():
    a = actmem.fits(**RUN)
    assert plain(a)
    assert a["fits"] is True
    assert a["min_peak_bytes"] <= a["peak_bytes"] <= a["budget_bytes"]
    assert a["budget_bytes"] == actmem.device("a100-40gb")["memory_bytes"]
    assert a["peak_bytes"] == a["report"]["peak_bytes"]
    assert set(a["plan"]) == {"stages", "checkpoints", "edge_blocks"}
    assert a["plan"]["stages"][:2] == ["encoder", "mesh_edge_embed"]
    # The plan is what simulate() of it predicts.
    assert actmem.simulate(**RUN, plan=a["plan"])["peak_bytes"] == a["peak_bytes"]


def test_not_fitting_is_a_result_with_the_least_memory_plan():
    least = actmem.fits(**RUN)["min_peak_bytes"]
    a = actmem.fits(**RUN, budget=least - 1)
    assert a["fits"] is False and a["report"]["fits"] is False
    assert a["peak_bytes"] == least
    assert actmem.fits(**RUN, budget=least)["fits"] is True


def test_nested_regions_widen_the_plan_space():
    # graphcast-small at rollout 1: the least memory is 2.58 GiB with flat
    # plans, 2.40 GiB with regions nested inside regions.
    flat = actmem.fits("graphcast-small", "tpu-v4", budget="1GiB")
    nested = actmem.fits("graphcast-small", "tpu-v4", budget="1GiB", nested_regions=True)
    assert nested["min_peak_bytes"] < flat["min_peak_bytes"]
    assert any(region.get("inner") for region in nested["plan"]["checkpoints"])
    report = actmem.simulate("graphcast-small", "tpu-v4", budget="1GiB", plan=nested["plan"])
    assert report["peak_bytes"] == nested["min_peak_bytes"]


def test_budgets_and_memory_accept_bytes_or_sizes():
    assert actmem.fits(**RUN, budget="30GiB")["budget_bytes"] == 30 * 2**30
    assert actmem.fits(**RUN, budget=30 * 2**30)["budget_bytes"] == 30 * 2**30
    by_memory = actmem.fits(model=TINY, memory="24GiB", framework="pytorch")
    assert by_memory["device"] == "custom" and by_memory["budget_bytes"] == 24 * 2**30


def test_plan_is_the_plan_document_and_simulate_reads_it_back():
    schema = pytest.importorskip("jsonschema")
    document = actmem.plan(**RUN)
    assert plain(document)
    with open(ROOT / "docs" / "plan.schema.json") as f:
        schema.validate(document, json.load(f))
    assert document["format"] == "actmem.plan" and document["version"] == 1
    assert document["predicted"]["fits"] is True
    again = actmem.simulate(**RUN, plan=document)
    assert again["peak_bytes"] == document["predicted"]["peak_bytes"]
    assert again["plan"]["checkpoints"] == document["checkpoints"]
    # Through a file too, as trainers receive it.
    assert json.loads(json.dumps(document)) == document


def test_simulate_builtin_plans_and_timeline():
    none = actmem.simulate(**RUN, plan="none")
    deepmind = actmem.simulate(**RUN, plan="deepmind:4", timeline=True)
    assert deepmind["peak_bytes"] < none["peak_bytes"]
    assert deepmind["recompute_flops"] > 0 == none["recompute_flops"]
    assert "timeline" not in none
    assert max(p["total_bytes"] for p in deepmind["timeline"]) == deepmind["peak_bytes"]
    assert deepmind["plan"]["edge_blocks"] == {"encoder": 4, "decoder": 4}


def test_pareto_trades_memory_for_time():
    front = actmem.pareto(**RUN)
    assert plain(front) and len(front) >= 2
    peaks = [p["report"]["peak_bytes"] for p in front]
    times = [p["report"]["step_time_s"] for p in front]
    assert peaks == sorted(peaks) and len(set(peaks)) == len(peaks)
    assert times == sorted(times, reverse=True)


# (keywords, the whole message of the error)
ERRORS = [
    ({"model": dict(TINY, grid_nodes=-5)}, "model: /grid_nodes: expected a positive integer, got -5"),
    ({"model": dict(TINY, latent_sise=64)}, "model: /latent_sise: unknown field (did you mean 'latent_size'?)"),
    ({"model": 42}, "model: expected a preset name, a model file or a dict, got a value of type int"),
    ({"model": "graphcats"}, "model: 'graphcats' is neither a preset (graphcast, graphcast-small, "
                             "graphcast-operational) nor a readable file (did you mean 'graphcast'?)"),
    ({"device": "tpu-v9"}, "device: 'tpu-v9' is neither a catalog device nor a readable file "
                           "(did you mean 'tpu-v4'?); see 'actmem devices'"),
    ({"device": {"id": "x", "memory_bytes": 0}}, "device: /memory_bytes: expected a positive integer, got 0"),
    ({"memory": 0}, "memory: expected a positive number of bytes up to 2^62, got 0"),
    ({"budget": "lots"}, "budget: expected a positive byte size such as 32GiB, 30GB or 512MiB, got 'lots'"),
    ({"batch": 0}, "batch: expected an integer from 1 to 65536, got 0"),
    ({"rollout": 5000}, "rollout: expected an integer from 1 to 1024, got 5000"),
    ({"dtype": "fp8"}, "dtype: expected one of float32, bfloat16, got 'fp8'"),
    ({"framework": "tensorflow"}, "framework: expected one of pytorch, jax, got 'tensorflow'"),
    ({"plan": "evry:3"},
     "plan: 'evry:3' is not a plan file or a built-in plan (none, full, every:K, deepmind, deepmind:B)"),
    ({"plan": {"checkpoints": [{"from": "processor.99", "to": "decoder"}]}},
     "plan: /checkpoints/0/from: unknown stage 'processor.99' (did you mean 'processor.0'?); "
     "stages are encoder, mesh_edge_embed, processor.0..processor.5, decoder"),
    ({"plan": {"checkpoints": [], "edge_blocks": {"encoder": 10**6}}},
     "plan: /edge_blocks/encoder: expected a positive integer of at most 1024 (actmem's limit on edge blocks), "
     "got 1000000"),
    ({"plan": {"checkpoints": {1, 2}}},
     "plan: /checkpoints: expected None, bool, int, float, str, list or dict, got a value of type set"),
]


@pytest.mark.parametrize("keywords,message", ERRORS, ids=[f"{m.split(':')[0]}-{i}" for i, (_, m) in enumerate(ERRORS)])
def test_bad_input_raises_value_error_naming_the_field(keywords, message):
    arguments = dict(RUN, **keywords)
    function = actmem.simulate if "plan" in keywords else actmem.fits
    with pytest.raises(ValueError) as raised:
        function(**arguments)
    assert isinstance(raised.value, actmem.InputError)
    e = raised.value
    assert str(e) == message
    assert str(e) == ": ".join(part for part in (e.source, e.field, e.message) if part)


def test_a_plan_for_another_model_is_refused():
    document = actmem.plan(**RUN)
    with pytest.raises(actmem.InputError) as raised:
        actmem.simulate(**dict(RUN, model=dict(TINY, processor_steps=5)), plan=document)
    assert (raised.value.source, raised.value.field) == ("plan", "/model/fingerprint")


def test_calls_from_many_threads_give_the_serial_answers():
    budgets = [None, "1GiB", "200MiB", "120MiB", "60MiB"]
    calls = [(actmem.fits, b) for b in budgets] + [(actmem.pareto, None), (actmem.simulate, "100MiB")]
    serial = [f(**RUN, budget=b) for f, b in calls]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(lambda c: c[0](**RUN, budget=c[1]), calls + calls)) == serial + serial
