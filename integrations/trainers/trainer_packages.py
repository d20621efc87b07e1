"""The trainers' packages, pinned by scripts/install-torch.sh, checked before use.

A missing or broken package is one line naming it and the version wanted,
never a traceback:

    actmem: error: nvidia-physicsnemo 2.2.2: not installed (run scripts/install-torch.sh)
"""
import importlib
import importlib.metadata
import sys

# distribution -> (version scripts/install-torch.sh pins, module to import)
PINNED = {
    "torch": ("2.10.0", "torch"),
    "nvidia-physicsnemo": ("2.2.2", "physicsnemo.models.graphcast.graph_cast_net"),
    "anemoi-models": ("0.19.0", "anemoi.models.layers.mapper"),
    "torch-geometric": ("2.8.1", "torch_geometric"),
    "torch-sparse": ("0.6.18", "torch_sparse"),
    "torch-scatter": ("2.1.2", "torch_scatter"),
    "omegaconf": ("2.3.1", "omegaconf"),
}


class TrainerPackageError(Exception):
    """A trainer package is missing, of another version, or fails to import."""


def problem(distribution):
    """None when the pinned distribution is installed and imports, else why not (one line)."""
    wanted, module = PINNED[distribution]
    try:
        found = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return f"{distribution} {wanted}: not installed (run scripts/install-torch.sh)"
    if found.split("+")[0] != wanted:
        return f"{distribution} {wanted}: found {found} (run scripts/install-torch.sh)"
    try:
        importlib.import_module(module)
    except Exception as error:  # any failure to import is the package's, named in one line
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"{distribution} {wanted}: import {module} failed: {first}"
    return None


def require(*distributions):
    """Raises TrainerPackageError with one line per broken distribution."""
    problems = [p for p in map(problem, distributions) if p]
    if problems:
        raise TrainerPackageError("; ".join(problems))


def main(argv):
    """`python trainer_packages.py [DIST ...]`: exit 0 when all import, else 2 with one line."""
    try:
        require(*(argv or PINNED))
    except TrainerPackageError as error:
        print(f"actmem: error: {error}", file=sys.stderr)
        return 2
    except KeyError as error:
        print(f"actmem: error: {error.args[0]}: not a trainer package (expected one of {', '.join(PINNED)})",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
