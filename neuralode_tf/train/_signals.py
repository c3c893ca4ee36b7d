"""Stopping a training run at a step boundary on SIGTERM (cluster preemption) or SIGINT (Ctrl-C)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

__all__ = ["TrainingInterrupted", "StopRequest", "stop_requests"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(Exception):
    """A run stopped by SIGINT or SIGTERM at a step boundary, after writing its checkpoint; ``resume=True``
    (``--resume``) continues it.

    Attributes:
        signal: The signal's number.
        step: The number of steps the checkpoint holds.
        checkpoint: Its path.
        exit_code: ``128 + signal`` (130 for SIGINT, 143 for SIGTERM), the shell's convention, which the CLI exits with.
    """

    def __init__(self, signum: int, step: int, checkpoint: Path):
        super().__init__(
            f"stopped by {signal.Signals(signum).name} after step {step}; {checkpoint} holds it: continue with --resume"
        )
        self.signal, self.step, self.checkpoint = signum, step, checkpoint
        self.exit_code = 128 + signum


@dataclass
class StopRequest:
    """The first SIGINT or SIGTERM received under :func:`stop_requests` (``None``: none yet)."""

    signal: int | None = None


@contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """While active, the first SIGINT or SIGTERM is recorded in the yielded :class:`StopRequest` instead of acting.

    The previous handlers are put back as soon as one is recorded, so a second signal acts as it would without this
    (a second Ctrl-C raises ``KeyboardInterrupt`` at once, a second SIGTERM terminates), and on exit in any case.
    A signal the process ignores stays ignored; outside the main thread, where Python cannot install handlers,
    nothing is installed.
    """
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {number: signal.getsignal(number) for number in _STOP_SIGNALS}
    caught = [number for number, handler in previous.items() if handler is not signal.SIG_IGN]

    def restore() -> None:
        for number in caught:
            handler = previous[number]
            signal.signal(number, signal.SIG_DFL if handler is None else handler)

    def record(signum: int, frame: FrameType | None) -> None:
        request.signal = signum
        restore()

    for number in caught:
        signal.signal(number, record)
    try:
        yield request
    finally:
        restore()
