"""Live bytes sampled after every aten op (forward, backward, recompute alike).

OpMeter is a TorchDispatchMode. The autograd engine runs CPU backward on the
calling thread, so backward ops and checkpoint recomputation pass through it
too. Each sample is taken right after an op returns, while the op's inputs and
outputs are all alive. Temporaries allocated and freed inside one kernel are
not seen.
"""
from __future__ import annotations

import contextlib

from torch.utils._python_dispatch import TorchDispatchMode

from mallinfo import live_bytes


class OpMeter(TorchDispatchMode):
    """Samples live_bytes() - base after every op. `phase` and `stage` are
    labels set by the caller (see labelled). With record=True it keeps one row
    per op: (op, phase, stage, bytes above base)."""

    def __init__(self, base: int, record: bool = False, capacity: int = 1 << 16):
        super().__init__()
        self.base = base
        self.phase = "forward"
        self.stage = ""
        self.peak = 0
        self.peak_at = None  # (op index, op, phase, stage)
        self.count = 0
        # Preallocated so that growing the list does not malloc while measuring.
        self.rows = [None] * capacity if record else None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        live = live_bytes() - self.base
        if live > self.peak:
            self.peak = live
            self.peak_at = (self.count, func, self.phase, self.stage)
        if self.rows is not None:
            row = (func, self.phase, self.stage, live)
            if self.count < len(self.rows):
                self.rows[self.count] = row
            else:
                self.rows.append(row)
        self.count += 1
        return out

    def recorded(self) -> list:
        return [] if self.rows is None else self.rows[:self.count]

    @contextlib.contextmanager
    def labelled(self, phase: str | None = None, stage: str | None = None):
        """Sets phase and/or stage for the ops run inside; restores them after."""
        saved = self.phase, self.stage
        self.phase = self.phase if phase is None else phase
        self.stage = self.stage if stage is None else stage
        try:
            yield
        finally:
            self.phase, self.stage = saved
