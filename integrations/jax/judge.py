#!/usr/bin/env python3
"""actmem-jax judge: XLA's own memory figures for one training step of the
reference JAX GraphCast (graphcast_jax.py) under an actmem plan (plan.py).

The step is jitted whole (parameters and optimizer state donated) and
compiled for a target without materialising anything: every argument is a
jax.ShapeDtypeStruct on one device of the target.
  * tpu-v4: a deviceless TPU v4 (megacore) from jax.experimental.topologies;
    XLA:TPU refuses programs that do not fit its HBM (RESOURCE_EXHAUSTED),
    and that refusal is the verdict.
  * cpu: XLA:CPU (figures only; host memory is not judged).
From compiled.memory_analysis(): argument, output, alias, temp and generated
code sizes, and peak = temp + argument + output - alias. Beside them, when
build/cli/actmem exists, actmem's own prediction for the same model, run and
plan (`actmem simulate --framework jax --device tpu-v4`).

Usage:
  judge.py [--plan FILE | --plan-spec SPEC] [--model NAME|FILE] [--dtype D] [--batch B]
           [--rollout T] [--optimizer O] [--step-checkpoint] [--targets-on-host]
           [--target tpu-v4,cpu] [--json]
Exit: 0 every case fits (or compiled, for cpu), 1 some case does not fit, 2 bad input or a compile
that XLA itself fails (no verdict).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PRESETS = os.path.join(ROOT, "models", "presets")
ACTMEM = os.environ.get("ACTMEM_BIN", os.path.join(ROOT, "build", "cli", "actmem"))
TARGETS = ("tpu-v4", "cpu")
UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}  # XLA's "G" is GiB (measured)

# Set before JAX loads: compile only, on the CPU backend and a deviceless TPU
# topology; never claim a real accelerator; keep libtpu's start-up quiet.
ENVIRONMENT = {
    "JAX_PLATFORMS": "cpu",
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_ACCELERATOR_TYPE": "v4-8",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "true",
    "TF_CPP_MIN_LOG_LEVEL": "3",
}
for _key, _value in ENVIRONMENT.items():
    os.environ.setdefault(_key, _value)
sys.path.insert(0, HERE)
try:
    import jax
    from jax.experimental import topologies

    from graphcast_jax import DONATED, Description, InputError, Run, argument_shapes, make_train_step
    from plan import Plan, network, parse_plan, read_json
    MISSING = None
except ModuleNotFoundError as _e:
    MISSING = _e.name
    InputError = ValueError


class UsageError(Exception):
    """A one-line error for `actmem-jax: error: ...`, exit 2."""


def require_packages(targets):
    """UsageError naming the first missing package the targets need."""
    missing = MISSING or ("libtpu" if "tpu-v4" in targets and importlib.util.find_spec("libtpu") is None else None)
    if missing:
        raise UsageError(f"Python package '{missing.split('.')[0]}' is not installed for {sys.executable}: "
                         f"run scripts/install-jax.sh and use .venv-jax/bin/python")


# ---------------------------------------------------------------- inputs

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def parse_args(argv):
    p = Parser(prog="judge.py", description=__doc__.split("\n\n")[0])
    plan = p.add_mutually_exclusive_group()
    plan.add_argument("--plan", metavar="FILE", help="plan file (whole, or partial: checkpoints, edge_blocks, "
                      "stages, step_checkpoint)")
    plan.add_argument("--plan-spec", metavar="SPEC", help="a plan actmem generates: none, full, every:K, "
                      "deepmind, deepmind:B (default: none)")
    p.add_argument("--model", help="preset name or model JSON file (default: the plan's model, else graphcast)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), help="activation dtype (default: the plan's, "
                   "else bfloat16)")
    p.add_argument("--batch", type=positive_int, help="samples per device (default: the plan's, else 1)")
    p.add_argument("--rollout", type=positive_int, help="autoregressive steps (default: the plan's, else 1)")
    p.add_argument("--optimizer", choices=("adam", "sgd"), help="default: the plan's, else adam")
    p.add_argument("--step-checkpoint", action="store_true", help="each rollout step under jax.checkpoint "
                   "(DeepMind's gradient_checkpointing; rollout > 1)")
    p.add_argument("--targets-on-host", action="store_true",
                   help="the rollout's targets in host memory (memory kind pinned_host), each step moving its "
                   "own to the device: an experiment actmem does not model (docs/validation-jax.md, rollout 12)")
    p.add_argument("--target", default="tpu-v4", help="comma-separated: tpu-v4, cpu (default: tpu-v4)")
    p.add_argument("--json", action="store_true", help="one JSON object per target on stdout")
    p.add_argument("--no-actmem", action="store_true", help="skip actmem's prediction")
    args = p.parse_args(argv)
    args.targets = args.target.split(",")
    for t in args.targets:
        if t not in TARGETS:
            raise UsageError(f"--target: expected tpu-v4 or cpu (comma-separated), got '{t}'")
    if args.plan_spec and args.no_actmem:
        raise UsageError("--plan-spec: actmem makes the plan; it cannot go with --no-actmem")
    return args


def require_targets_on_device(args, tool: str):
    """For the tools that take judge.py's arguments but build the step's
    arguments themselves, all on the device: --targets-on-host is refused,
    not ignored."""
    if args.targets_on_host:
        raise UsageError(f"--targets-on-host: {tool} holds every argument on the device; only judge.py can "
                         "place the targets in host memory")


def require_plan_on_device(case: "Case", tool: str):
    """The same for a plan whose host_offload puts the targets and the step
    checkpoints' kept inputs in host memory."""
    if case.plan.host_offload:
        raise UsageError(f"{case.plan_name}: /host_offload: {tool} holds every argument on the device; only "
                         "judge.py compiles a plan with host offload")


@dataclass
class Case:
    """What to judge: the model, run and plan, and actmem's prediction (or None)."""
    model_name: str
    model_arg: str | None  # what actmem's --model takes for it (preset or file), None: write model_obj
    model_obj: dict
    description: "Description"
    run: "Run"
    plan_name: str
    plan: "Plan"
    predicted: dict | None = None
    targets_on_host: bool = False  # data.targets in host memory (judge.py --targets-on-host, or the plan's host_offload)


def make_case(args) -> Case:
    plan_obj = read_json(args.plan) if args.plan else {}
    if args.model or "model" not in plan_obj:
        model_obj, name, arg = load_model(args.model or "graphcast")
        description = Description.from_json(model_obj, arg)
    else:
        model_obj, arg = plan_obj["model"], None
        name = model_obj.get("name", args.plan) if isinstance(model_obj, dict) else args.plan
        description = Description.from_json(model_obj, args.plan, "/model")
    base = Run.from_json(plan_obj["run"], args.plan, "/run") if "run" in plan_obj else Run()
    run = Run(args.dtype or base.dtype, args.batch or base.batch, args.rollout or base.rollout,
              args.optimizer or base.optimizer)
    case = Case(name, arg, model_obj, description, run, args.plan or args.plan_spec or "none", None)
    if not args.plan:  # actmem makes the plan, and predicts it in the same run
        case.predicted = actmem_simulate(case, case.plan_name)
        plan_obj, source = case.predicted["plan"], f"actmem simulate --plan {case.plan_name}"
    plan = parse_plan(plan_obj, description, args.plan or source)
    case.plan = Plan(plan.stages, plan.regions, plan.edge_blocks, plan.step_checkpoint or args.step_checkpoint,
                     plan.host_offload)
    case.targets_on_host = args.targets_on_host or plan.host_offload
    if args.targets_on_host and not plan.host_offload:
        # no actmem plan puts the targets alone in host memory: no prediction to set beside XLA's
        case.predicted = None
    # actmem predicts the plan compiled (a step checkpoint given on the command line included).
    elif (args.plan or case.plan.step_checkpoint) and not args.no_actmem and os.access(ACTMEM, os.X_OK):
        case.predicted = actmem_simulate(case, case.plan.to_json())
    return case


def load_model(spec: str) -> tuple[dict, str, str]:
    """(model object, its name, actmem's --model for it) for a preset name or a file."""
    preset = os.path.join(PRESETS, spec + ".json")
    if os.sep not in spec and os.path.isfile(preset):
        return read_json(preset), spec, spec
    if not os.path.isfile(spec):
        names = sorted(f[:-5] for f in os.listdir(PRESETS) if f.endswith(".json"))
        raise UsageError(f"--model: '{spec}' is neither a preset ({', '.join(names)}) nor a readable file")
    obj = read_json(spec)
    return obj, obj.get("name", os.path.splitext(os.path.basename(spec))[0]), spec


def actmem_simulate(case: Case, plan) -> dict:
    """`actmem simulate --json` for the case's model and run (framework jax,
    device tpu-v4) under `plan`: a name actmem knows, or a plan object."""
    if not os.access(ACTMEM, os.X_OK):
        raise UsageError(f"{ACTMEM} not found: build actmem or set ACTMEM_BIN (--plan FILE --no-actmem needs neither)")
    r = case.run
    with tempfile.TemporaryDirectory(prefix="actmem-jax-") as tmp:
        def file_of(obj, name):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                json.dump(obj, f)
            return path

        command = [ACTMEM, "simulate", "--json", "--framework", "jax", "--device", "tpu-v4",
                   "--model", case.model_arg or file_of(case.model_obj, "model.json"),
                   "--plan", plan if isinstance(plan, str) else file_of(plan, "plan.json"),
                   "--dtype", r.dtype, "--batch", str(r.batch), "--rollout", str(r.rollout), "--optimizer", r.optimizer]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: the plan does not fit, a prediction all the same
        raise UsageError(done.stderr.strip().removeprefix("actmem: error: ") or f"actmem exited {done.returncode}")
    return json.loads(done.stdout)


# ---------------------------------------------------------------- compiling

def target_device(target: str):
    if target == "cpu":
        return jax.devices("cpu")[0]
    topology = topologies.get_topology_desc(platform="tpu", topology_name="v4:2x2x1", chip_config_name="megacore",
                                            chips_per_host_bounds=(2, 2, 1), num_slices=1)
    return topology.devices[0]


def abstract_arguments(case: Case, device) -> tuple:
    """The step's arguments on `device`; the targets in its host memory when the case says so."""
    sharding = jax.sharding.SingleDeviceSharding(device)
    host = jax.sharding.SingleDeviceSharding(device, memory_kind="pinned_host")

    def place(shapes, where):
        return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=where), shapes)

    params, opt_state, data, consts = argument_shapes(case.description, case.run)
    data = data._replace(frames=place(data.frames, sharding), forcings=place(data.forcings, sharding),
                         targets=place(data.targets, host if case.targets_on_host else sharding))
    return place(params, sharding), place(opt_state, sharding), data, place(consts, sharding)


def parse_size(number: str, unit: str) -> int:
    return round(float(number) * UNITS[unit])


OOM_PATTERNS = (
    re.compile(r"required for HLO temporaries \(([\d.]+)([KMGT]?)\) exceeds available HBM \(([\d.]+)([KMGT]?)\)"),
    re.compile(r"Used ([\d.]+)([KMGT]?) of ([\d.]+)([KMGT]?) hbm"),
)


def out_of_memory(message: str) -> tuple[int, int] | None:
    """(required, available) bytes from XLA:TPU's out-of-memory error, else None."""
    if "RESOURCE_EXHAUSTED" not in message:
        return None
    for pattern in OOM_PATTERNS:
        m = pattern.search(message)
        if m:
            return parse_size(m[1], m[2]), parse_size(m[3], m[4])
    return None


# XLA:TPU's rematerialisation pass runs early in a compile (seconds, where
# the whole compile of a program that fits takes minutes) and logs, in
# libtpu's INFO log, the limit it aims at (95% of the HBM, less the
# arguments that no output aliases, less the code overlays) and the peak of
# the program's HLO temporaries before and after it ("rematerialization hbm
# reduction:  36.94G => 29.21G"); when it cannot get under the limit, also
# the least it reached, in bytes ("Can't reduce memory use below ... only
# reduced to X (N bytes), down from Y (M bytes) originally").
REMAT_LIMIT_LOG = re.compile(r"rematerialization limit \S+ = 95% hbm \(([\d.]+)([KMGT]?)\) - \(arguments "
                             r"\(([\d.]+)([KMGT]?)\) - aliased_output\(([\d.]+)([KMGT]?)\)\) - overlays "
                             r"\(([\d.]+)([KMGT]?)\)")
REMAT_REDUCTION_LOG = re.compile(r"rematerialization hbm reduction:\s+([\d.]+)([KMGT]?) => ([\d.]+)([KMGT]?)")
REMAT_FLOOR_LOG = re.compile(r"Can't reduce memory use below .*? by rematerialization; only reduced to \S+ "
                             r"\((\d+) bytes\), down from \S+ \((\d+) bytes\) originally")


HLO_PASSES_DONE_LOG = re.compile(r"HLO_PASSES stage duration")
PROBE_HBM_MIB = 16  # no program fits: XLA states the peak as written to the byte


def hlo_passes_log(argv: list[str], hbm_mib: int | None = None, timeout: float = 1800,
                   vmodule: str | None = None, script: str = __file__) -> str:
    """libtpu's INFO log of compiling the step that `argv` (`script`'s
    arguments: judge.py's by default) asks for, for TPU v4 with `hbm_mib` of
    HBM (None: the chip's), up to the end of XLA's HLO passes: the script
    runs in a child with its own log directory and is stopped there (seconds
    to minutes; the whole compile takes longer). `vmodule`: libtpu's
    TPU_VMODULE, for more of a pass's log."""
    start = time.perf_counter()
    env = dict(os.environ, TPU_LOG_DIR="", TPU_MIN_LOG_LEVEL="0")
    if vmodule:
        env["TPU_VMODULE"] = vmodule
    if hbm_mib is not None:
        env["LIBTPU_INIT_ARGS"] = f"{os.environ.get('LIBTPU_INIT_ARGS', '')} --xla_tpu_max_hbm_size_mib={hbm_mib}".strip()
    with tempfile.TemporaryDirectory(prefix="actmem-remat-probe-") as logs:
        env["TPU_LOG_DIR"] = logs

        def log() -> str:
            return "".join(open(os.path.join(logs, f), errors="replace").read()
                           for f in sorted(os.listdir(logs)) if ".INFO." in f)

        child = subprocess.Popen([sys.executable, os.path.abspath(script), *argv, "--target", "tpu-v4", "--json"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        while child.poll() is None and time.perf_counter() - start < timeout:
            time.sleep(0.5)
            if HLO_PASSES_DONE_LOG.search(log()):
                break
        if child.poll() is None:
            child.kill()
        stderr = child.communicate()[1]
        text = log()
    if not HLO_PASSES_DONE_LOG.search(text):
        detail = stderr.strip().splitlines()[-1:] or [f"exit {child.returncode}"]
        raise UsageError(f"XLA:TPU's HLO passes did not finish ({detail[0]})")
    return text


def remat_probe(argv: list[str], hbm_mib: int | None = None, timeout: float = 1800,
                script: str = __file__) -> dict:
    """XLA:TPU's own figures for the step that `argv` (`script`'s arguments,
    judge.py's by default) asks for, from its rematerialisation pass on TPU
    v4 with `hbm_mib` of HBM (libtpu's --xla_tpu_max_hbm_size_mib; None: the
    chip's):
      as_written_bytes   the temporaries' peak as written, what actmem's cost
                         model describes (None if the program was under the
                         limit: the pass then logs nothing)
      after_remat_bytes  after XLA rematerialised to get under its limit
      remat_limit_bytes  that limit; remat_fits: whether it got there
      arguments_bytes, aliased_output_bytes, overlays_bytes: what the limit
                         subtracts from 95% of the HBM
    read off hlo_passes_log(). With hbm_mib=PROBE_HBM_MIB nothing fits, so
    the figures as written come to the byte."""
    start = time.perf_counter()
    text = hlo_passes_log(argv, hbm_mib, timeout, script=script)
    limit, reduction = REMAT_LIMIT_LOG.search(text), REMAT_REDUCTION_LOG.search(text)
    floor = REMAT_FLOOR_LOG.search(text)
    out = {"hbm_mib": hbm_mib, "as_written_bytes": None, "after_remat_bytes": None, "remat_limit_bytes": None,
           "remat_fits": True, "arguments_bytes": None, "aliased_output_bytes": None, "overlays_bytes": None,
           "probe_seconds": round(time.perf_counter() - start, 1)}
    if limit and reduction:
        arguments, aliased, overlays = (parse_size(limit[i], limit[i + 1]) for i in (3, 5, 7))
        before, after = parse_size(reduction[1], reduction[2]), parse_size(reduction[3], reduction[4])
        if floor:  # the same figures, to the byte
            after, before = int(floor[1]), int(floor[2])
        out.update(as_written_bytes=before, after_remat_bytes=after, remat_fits=floor is None,
                   remat_limit_bytes=parse_size(limit[1], limit[2]) - (arguments - aliased) - overlays,
                   arguments_bytes=arguments, aliased_output_bytes=aliased, overlays_bytes=overlays)
    return out


_available: dict[str, int] = {}


def available_hbm(device) -> int:
    """XLA:TPU's HBM for programs, from the refusal of a program that cannot fit (1 TiB)."""
    if "tpu" not in _available:
        x = jax.ShapeDtypeStruct((2**28, 2**10), jax.numpy.float32,
                                 sharding=jax.sharding.SingleDeviceSharding(device))
        try:
            jax.jit(lambda a: a + 1).lower(x).compile()
            raise RuntimeError("a 1 TiB program compiled for TPU v4: cannot learn the available HBM")
        except jax.errors.JaxRuntimeError as e:
            _available["tpu"] = out_of_memory(str(e))[1]
    return _available["tpu"]


def judge(case: Case, target: str) -> dict:
    """Compiles the training step for `target`; XLA's figures or its refusal."""
    device = target_device(target)
    step = make_train_step(case.description, case.run, network(case.plan), case.plan.step_checkpoint,
                           case.targets_on_host, case.plan.host_offload)
    start, cpu_start = time.perf_counter(), time.process_time()
    lowered = jax.jit(step, donate_argnums=DONATED).lower(*abstract_arguments(case, device))
    lowered_at = time.perf_counter()
    result = {"target": target, "device": device.device_kind, "model": case.model_name, "plan": case.plan_name,
              "dtype": case.run.dtype, "batch": case.run.batch, "rollout": case.run.rollout,
              "optimizer": case.run.optimizer, "step_checkpoint": case.plan.step_checkpoint,
              "targets_on_host": case.targets_on_host}
    try:
        stats = lowered.compile().memory_analysis()
        oom = None
    except jax.errors.JaxRuntimeError as e:
        oom = out_of_memory(str(e))
        if oom is None:  # not a verdict: XLA itself failed (an internal RET_CHECK, say)
            raise UsageError(f"{target}: XLA could not compile the step: {str(e).strip().splitlines()[0]}") from None
        stats, message = None, str(e)
    result["lower_seconds"] = round(lowered_at - start, 2)
    result["compile_seconds"] = round(time.perf_counter() - lowered_at, 2)
    result["cpu_seconds"] = round(time.process_time() - cpu_start, 2)  # all threads, lowering and compiling
    result.update(memory_fields(stats))
    if target == "cpu":
        result.update(fits=None, available_bytes=None, required_bytes=None, oom_message=None)
    elif oom is None:
        result.update(fits=True, available_bytes=available_hbm(device), required_bytes=None, oom_message=None)
    else:
        result.update(fits=False, available_bytes=oom[1], required_bytes=oom[0],
                      oom_message=message.strip().splitlines()[0])
    result["actmem"] = prediction_fields(case.predicted)
    return result


def memory_fields(stats) -> dict:
    keys = ("argument", "output", "alias", "temp", "generated_code")
    if stats is None:
        return {f"{k}_bytes": None for k in keys + ("peak", "host_argument", "host_temp")}
    out = {f"{k}_bytes": getattr(stats, f"{k}_size_in_bytes") for k in keys}
    # not in the peak: host memory (the targets, and what a plan's host_offload stacks there)
    out["host_argument_bytes"] = getattr(stats, "host_argument_size_in_bytes", 0)
    out["host_temp_bytes"] = getattr(stats, "host_temp_size_in_bytes", 0)
    out["peak_bytes"] = out["temp_bytes"] + out["argument_bytes"] + out["output_bytes"] - out["alias_bytes"]
    peak = getattr(stats, "peak_memory_in_bytes", None)
    if peak is not None:
        out["peak_memory_in_bytes"] = peak
    return out


def prediction_fields(predicted: dict | None) -> dict | None:
    if predicted is None:
        return None
    return {"peak_bytes": predicted["peak_bytes"], "peak_dynamic_bytes": predicted["peak_dynamic_bytes"],
            "reserved_bytes": predicted["breakdown"]["reserved"], "fits": predicted["fits"]}


def gib(n) -> str:
    return "-" if n is None else f"{n / 2**30:.2f}"


def readable(r: dict) -> str:
    head = (f"{r['target']}: {r['model']} plan {r['plan']}{' +step-checkpoint' if r['step_checkpoint'] else ''}, "
            f"{r['dtype']} batch {r['batch']} "
            f"rollout {r['rollout']} {r['optimizer']}: ")
    if r["fits"] is False:
        verdict = f"DOES NOT FIT: needs {gib(r['required_bytes'])} GiB of {gib(r['available_bytes'])} GiB HBM"
    else:
        verdict = (f"{'fits, ' if r['fits'] else ''}XLA peak {gib(r['peak_bytes'])} GiB "
                   f"(argument {gib(r['argument_bytes'])}, output {gib(r['output_bytes'])}, "
                   f"alias {gib(r['alias_bytes'])}, temp {gib(r['temp_bytes'])})")
        if r["available_bytes"]:
            verdict += f" of {gib(r['available_bytes'])} GiB HBM"
    a = r["actmem"]
    predicted = "" if a is None else (f"; actmem {gib(a['peak_bytes'])} GiB "
                                      f"({gib(a['peak_bytes'] - a['reserved_bytes'])} without its reserve)")
    return f"{head}{verdict}{predicted}; compiled in {r['lower_seconds'] + r['compile_seconds']:.1f} s"


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        require_packages(args.targets)
        case = make_case(args)
    except (UsageError, InputError) as e:
        print(f"actmem-jax: error: {e}", file=sys.stderr)
        return 2
    fits = True
    for target in args.targets:
        try:
            r = judge(case, target)
        except UsageError as e:
            print(f"actmem-jax: error: {e}", file=sys.stderr)
            return 2
        fits &= r["fits"] is not False
        print(json.dumps(r) if args.json else readable(r), flush=True)
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
