"""Runs the reference PyTorch integration's pytest suite for CTest.

Exit 77 (skipped) when Debian's python3-torch is missing, unless
ACTMEM_REQUIRE_TORCH is set; pytest's own "no tests ran" (5) is a failure.
"""
import os
import sys

try:
    import torch  # noqa: F401
    import pytest
except ImportError as missing:
    if os.environ.get("ACTMEM_REQUIRE_TORCH"):
        print(f"pytorch_reference: {missing}; python3-torch and python3-pytest are required", file=sys.stderr)
        sys.exit(1)
    print(f"pytorch_reference: skipped ({missing})")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[1]]))
