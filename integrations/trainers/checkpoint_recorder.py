"""Records which functions a trainer's code runs under torch.utils.checkpoint.

Both trainers import `checkpoint` into one module of theirs
(physicsnemo.nn.module.gnn_layers.utils, anemoi.models.layers.utils) and call
it from there; `recording(module)` swaps that name for a wrapper that notes
each call, nested as the calls nest, and then calls the real checkpoint. The
trainer's own code decides what runs under which checkpoint: the recorder only
watches. A model may keep the wrapper (PhysicsNeMo stores its checkpoint
function when configured); it records only inside the `with` block, so run
the forward pass there and the backward pass (whose recomputations call
nested checkpoints again) after it.
"""
import contextlib
from dataclasses import dataclass, field


@dataclass
class CheckpointCall:
    function: object            # the callable given to checkpoint()
    args: tuple                 # its positional arguments
    inner: list = field(default_factory=list)  # calls made while it ran

    @property
    def name(self):
        return getattr(self.function, "__qualname__", repr(self.function))


@contextlib.contextmanager
def recording(module):
    """Yields the list of top-level CheckpointCalls made through `module.checkpoint`."""
    real = module.checkpoint
    top, stack, active = [], [], [True]

    def wrapper(function, *args, **kwargs):
        if not active[0]:
            return real(function, *args, **kwargs)
        call = CheckpointCall(function, args)
        (stack[-1].inner if stack else top).append(call)
        stack.append(call)
        try:
            return real(function, *args, **kwargs)
        finally:
            stack.pop()

    module.checkpoint = wrapper
    try:
        yield top
    finally:
        active[0] = False
        module.checkpoint = real
