"""The Python module `actmem` (python/src, docs/api.md).

Run by CTest (python.api) with PYTHONPATH at the built module:
    PYTHONPATH=build/python/package /usr/bin/python3 -m pytest python/tests -q
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap
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


def test_rules_list_the_memory_rules_and_rules_off_predicts_without_one():
    rules = actmem.rules()
    assert plain(rules) and len(rules) >= 40
    carry = next(r for r in rules if r["name"] == "xla.scan.holds_first_carry")
    assert carry["framework"] == "jax" and carry["journal"] == "J20" and carry["applies"] == "always"
    step = {"checkpoints": [], "step_checkpoint": True}
    run = dict(model=TINY, device="tpu-v4", framework="jax", rollout=2, plan=step)
    on = actmem.simulate(**run)["peak_bytes"]
    assert actmem.simulate(**run, rules_off=["xla.scan.holds_first_carry"])["peak_bytes"] < on
    assert actmem.simulate(**run, rules_off=("torch.slices_are_views",))["peak_bytes"] == on  # not a JAX rule
    document = actmem.plan(model=TINY, device="tpu-v4", rollout=2, rules_off=["xla.scan.holds_first_carry"])
    assert document["run"]["rules_off"] == ["xla.scan.holds_first_carry"]
    assert "rules_off" not in actmem.plan(model=TINY, device="tpu-v4", rollout=2)["run"]
    with pytest.raises(actmem.InputError, match=r"rules_off: unknown rule 'xla.scan.holds_frist_carry' "
                                                r"\(did you mean 'xla.scan.holds_first_carry'\?\)"):
        actmem.fits(model=TINY, rules_off=["xla.scan.holds_frist_carry"])
    with pytest.raises(actmem.InputError, match="rules_off: expected a list of rule names"):
        actmem.fits(model=TINY, rules_off="xla.scan.holds_first_carry")


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


def test_simulate_notes_say_where_a_run_was_measured_off_by_more_than_usual():
    # The notes `actmem simulate` prints (docs/api.md): JAX read for a GPU, a
    # JAX rollout without step checkpoints; none for a validated run.
    assert actmem.simulate("graphcast-small", "tpu-v4")["notes"] == []
    [gpu] = actmem.simulate("graphcast-small", "h200-141gb")["notes"]
    assert gpu.startswith("actmem's JAX profile is XLA:TPU's")
    [rollout] = actmem.simulate("graphcast-small", "tpu-v4", rollout=2, plan="none")["notes"]
    assert "XLA orders such a program depth-first" in rollout


def test_autocast_picks_whose_lists_a_pytorch_bfloat16_step_follows():
    # CUDA's autocast runs LayerNorm in float32, so every latent is float32:
    # a region keeps what it keeps in float32; CPU's keeps them in bfloat16.
    run = dict(model=TINY, device="a100-80gb", framework="pytorch", plan="full")
    cuda = actmem.simulate(**run, dtype="bfloat16")
    assert cuda == actmem.simulate(**run, dtype="bfloat16", autocast="cuda")
    cpu = actmem.simulate(**run, dtype="bfloat16", autocast="cpu")
    float32 = actmem.simulate(**run, dtype="float32")
    assert cuda["activation_bytes_after_forward"] == float32["activation_bytes_after_forward"]
    assert cpu["activation_bytes_after_forward"] < cuda["activation_bytes_after_forward"]
    # Plan documents say which (docs/plan-format.md), and read back the same.
    document = actmem.plan(model=TINY, device="a100-80gb", framework="pytorch", autocast="cpu")
    assert document["run"]["autocast"] == "cpu"
    assert actmem.simulate(model=TINY, device="a100-80gb", framework="pytorch", autocast="cpu",
                           plan=document)["peak_bytes"] == document["predicted"]["peak_bytes"]


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
    ({"autocast": "tpu"}, "autocast: expected one of cuda, cpu, got 'tpu' (did you mean 'cpu'?)"),
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


# Hostile input (docs/reliability.md): every problem is an actmem.InputError
# naming the keyword, never RuntimeError, the binding's TypeError, a crash
# or an abort.
HOSTILE = [
    ({"batch": 2**70}, ("batch", "", "expected an integer within 64 bits, got a larger one")),
    ({"batch": "2"}, ("batch", "", "expected an int, got a value of type str")),
    ({"rollout": 2.0}, ("rollout", "", "expected an int, got a value of type float")),
    ({"dtype": 5}, ("dtype", "", "expected a string, got a value of type int")),
    ({"nested_regions": 1}, ("nested_regions", "", "expected True or False, got a value of type int")),
    ({"budget": 2**200}, ("budget", "", "expected an integer within 64 bits, got a larger one")),
    ({"budget": "1TiB"}, ("budget", "", "expected a budget from 1 B to the memory of a100-40gb (40.00 GiB), got "
                                        "1024.00 GiB; a budget can only lower the memory a plan may use (describe "
                                        "a device with more memory instead)")),
    ({"model": "\ud800"}, ("model", "", "expected a string of valid Unicode, got one with lone surrogates")),
    ({"model": dict(TINY, processor_steps=256)}, ("model", "/processor_steps",
                                                  "expected a positive integer of at most 16, got 256")),
    ({"model": "graphcast", "batch": 65536, "rollout": 1024, "dtype": "float32"},
     ("batch", "", "the training step is too large to plan: the tensors of model 'graphcast' at batch 65536, "
                   "rollout 1024, float32 exceed 2^56 bytes (64 PiB); reduce the batch or the rollout")),
    ({"device": dict(actmem.device("a100-40gb"), bandwidth_bytes_per_s=5e-324)},
     ("device", "/bandwidth_bytes_per_s", "expected a number from 1e+06 to 1e+21, got 5e-324")),
]


@pytest.mark.parametrize("keywords,expected", HOSTILE, ids=[e[0] for _, e in HOSTILE])
def test_hostile_keywords_raise_input_error(keywords, expected):
    with pytest.raises(actmem.InputError) as raised:
        actmem.fits(**dict(RUN, **keywords))
    assert (raised.value.source, raised.value.field, raised.value.message) == expected


def test_integers_with_index_are_ints():
    class Two:
        def __index__(self):
            return 2
    assert actmem.fits(**dict(RUN, batch=Two()))["report"] == actmem.fits(**dict(RUN, batch=2))["report"]


def test_values_that_contain_themselves_are_refused_not_followed():
    # Was a stack overflow that took the interpreter down.
    model = dict(TINY)
    model["name"] = [model]
    with pytest.raises(actmem.InputError, match="nested at most 64 levels deep"):
        actmem.fits(**dict(RUN, model=model))
    plan = {"checkpoints": []}
    plan["checkpoints"].append(plan)
    with pytest.raises(actmem.InputError, match="does a list or dict contain itself"):
        actmem.simulate(**RUN, plan=plan)


def test_a_list_subclass_is_read_from_its_storage():
    class Endless(list):
        def __iter__(self):
            while True:
                yield {"from": "encoder", "to": "encoder"}
    report = actmem.simulate(**RUN, plan={"checkpoints": Endless([{"from": "encoder", "to": "encoder"}])})
    assert report["plan"]["checkpoints"] == [{"from": "encoder", "to": "encoder"}]


def test_what_the_module_returns_it_accepts_back():
    # model() added parameter_count, which model= refused.
    model = actmem.model(TINY)
    assert actmem.fits(**dict(RUN, model=model))["peak_bytes"] == actmem.fits(**RUN)["peak_bytes"]
    with pytest.raises(actmem.InputError, match="/parameter_count: expected"):
        actmem.fits(**dict(RUN, model=dict(model, parameter_count=1)))
    device = actmem.device("a100-40gb")
    assert actmem.fits(**dict(RUN, device=device))["budget_bytes"] == device["memory_bytes"]
    answer = actmem.fits(**RUN)
    assert actmem.simulate(**RUN, plan=answer["plan"])["peak_bytes"] == answer["peak_bytes"]
    for point in actmem.pareto(**RUN):
        assert actmem.simulate(**RUN, plan=point["plan"])["peak_bytes"] == point["report"]["peak_bytes"]


def test_a_timeline_beyond_the_limit_is_an_input_error():
    # Was an uncaught std::bad_alloc that aborted the interpreter.
    plan = {"checkpoints": [], "edge_blocks": {"encoder": 1024, "decoder": 1024}}
    with pytest.raises(actmem.InputError) as raised:
        actmem.simulate(**RUN, rollout=12, plan=plan, timeline=True)
    assert raised.value.source == "timeline"
    assert actmem.simulate(**RUN, rollout=12, plan=plan)["peak_bytes"] > 0


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""), reason="AddressSanitizer needs unlimited address space")
def test_running_out_of_memory_is_a_memory_error_not_an_abort():
    # The old module aborted the interpreter (std::bad_alloc in a destructor).
    script = textwrap.dedent("""
        import json, resource, sys
        import actmem
        tiny = json.loads(sys.argv[1])
        # Load everything first, the timeline's code path included: the
        # loader allocates a module's thread-local data when it is first
        # touched, and aborts (not a MemoryError) if it cannot.
        # PyTorch: a timeline row per op of every block (under JAX bfloat16
        # a blocked backward is one or two rows, docs/journal.md J17);
        # float32, whose blocks have no LayerNorm casts: within the row limit.
        run = dict(framework="pytorch", dtype="float32")
        actmem.simulate(tiny, "a100-80gb", rollout=2, plan="deepmind:1024", **run)
        actmem.simulate(tiny, "a100-80gb", plan="none", timeline=True, **run)
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + 150 * 2**20, resource.RLIM_INFINITY))
        try:
            actmem.simulate(tiny, "a100-80gb", rollout=2, plan="deepmind:1024", timeline=True, **run)
        except MemoryError:
            print("MemoryError")
        """)
    done = subprocess.run([sys.executable, "-c", script, json.dumps(TINY)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "MemoryError"), done.stderr[-2000:]


def test_hostile_files_are_input_errors(tmp_path):
    # 1e400 and a non-string fingerprint were RuntimeError; deep nesting a crash.
    e400 = tmp_path / "e400.json"
    e400.write_text(json.dumps(TINY).replace('"latent_size": 64', '"latent_size": 1e400'))
    with pytest.raises(actmem.InputError) as raised:
        actmem.fits(**dict(RUN, model=str(e400)))
    assert (raised.value.field, raised.value.message) == ("/latent_size", "number out of range: 1e400")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    for keywords in ({"model": str(deep)}, {"device": str(deep)}):
        with pytest.raises(actmem.InputError, match="nested more than 64 levels deep"):
            actmem.fits(**dict(RUN, **keywords))
    with pytest.raises(actmem.InputError, match="nested more than 64 levels deep"):
        actmem.simulate(**RUN, plan=str(deep))
    with pytest.raises(actmem.InputError) as raised:
        actmem.simulate(**RUN, plan={"model": dict(TINY, fingerprint=5), "checkpoints": []})
    assert (raised.value.field, raised.value.message) == ("/model/fingerprint", "expected a string, got 5")


def test_error_messages_are_one_line_of_bounded_length():
    with pytest.raises(actmem.InputError) as raised:
        actmem.fits(**dict(RUN, dtype="x\n\x1b" * 100000))
    text = str(raised.value)
    assert "\n" not in text and "\x1b" not in text and len(text) < 5000


def doubling(levels):
    """A value of `levels` nested lists, each holding the one below twice: small, but 2**levels values expanded."""
    value = [1]
    for _ in range(levels):
        value = [value, value]
    return value


@pytest.mark.parametrize("place", ["plan stages", "model description", "device"])
def test_shared_sub_lists_count_each_time_they_are_reached(place):
    # Was std::bad_alloc (SIGABRT) after 14 s and 3.8 GB: the conversion
    # expanded 2**30 values. Now refused after kMaxJsonValues, in milliseconds.
    shared = doubling(30)
    call = {
        "plan stages": lambda: actmem.simulate(**RUN, plan={"checkpoints": [], "stages": shared}),
        "model description": lambda: actmem.fits(**dict(RUN, model=dict(TINY, description=shared))),
        "device": lambda: actmem.fits(**dict(RUN, device=dict(actmem.device("a100-40gb"), source=shared))),
    }[place]
    with pytest.raises(actmem.InputError) as raised:
        call()
    assert raised.value.message == "expected at most 65536 values in all (lists and dicts count each time they are reached)"
    # Within the bound a shared list is read as often as it is reached.
    with pytest.raises(actmem.InputError, match="/description: expected a string"):
        actmem.fits(**dict(RUN, model=dict(TINY, description=doubling(10))))


ARGUMENT_MISTAKES = [
    (lambda: actmem.fits("graphcast", "tpu-v4", 1),
     "fits: takes at most 2 positional arguments (model, device), got 3"),
    (lambda: actmem.fits(**RUN, bach=2),
     "fits: unexpected keyword argument 'bach' (did you mean 'batch'?); it takes model, device, memory, budget, batch, "
     "rollout, dtype, framework, optimizer, autocast, rules_off, nested_regions"),
    (lambda: actmem.simulate(TINY, model=TINY), "simulate: got two values for 'model' (by position and by keyword)"),
    (lambda: actmem.device(), "device: missing the argument 'device'"),
    (lambda: actmem.models(1), "models: takes no positional arguments, got 1"),
    (lambda: actmem.pareto(TINY, "a100-40gb", "pytorch"),
     "pareto: takes at most 2 positional arguments (model, device), got 3"),
]


@pytest.mark.parametrize("call,message", ARGUMENT_MISTAKES, ids=[m.split(":")[0] + str(i) for i, (_, m)
                                                                 in enumerate(ARGUMENT_MISTAKES)])
def test_argument_mistakes_are_input_errors_naming_the_function(call, message):
    # Were pybind11's TypeError with a dump of the signature.
    with pytest.raises(actmem.InputError) as raised:
        call()
    assert str(raised.value) == message


def test_signatures_are_in_the_docstrings():
    assert actmem.fits.__doc__.splitlines()[2] == (
        "fits(model='graphcast', device='tpu-v4', *, memory=None, budget=None, batch=1, rollout=1, dtype='bfloat16', "
        "framework='jax', optimizer='adam', autocast='cuda', rules_off=None, nested_regions=False)")


def test_a_path_holding_a_nul_byte_names_no_file(tmp_path):
    # Was cut at the NUL: "tiny.json\0anything" loaded tiny.json.
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    assert actmem.model(str(path))["name"] == "tiny"
    for keywords in ({"model": str(path) + "\0anything"}, {"device": str(path) + "\0x"}):
        with pytest.raises(actmem.InputError, match="neither"):
            actmem.fits(**dict(RUN, **keywords))
    with pytest.raises(actmem.InputError, match="is not a plan file"):
        actmem.simulate(**RUN, plan=str(path) + "\0x")
