"""A child Python process that runs fuzz targets under limits, so that a hang, a crash or a memory blow-up is
a test failure and not a stuck or killed test run.

The child (``python -c 'from tests.support.sandbox import serve; serve()'``) imports
:mod:`tests.support.fuzz_targets`, then sets ``RLIMIT_AS`` (address space: an allocation past it is a
``MemoryError``) and ``RLIMIT_CPU`` (a backstop for the whole child), and answers calls read from its stdin:
length-prefixed pickles of ``(target name, args)``. The parent waits for each answer at most ``timeout``
seconds of wall-clock time; past that it kills the child (a hang), and a child that dies answers nothing (a
crash). Either way the next call starts a fresh child."""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["Sandbox", "SandboxFailure", "TargetRaised", "serve"]

_ROOT = Path(__file__).resolve().parents[2]
_HEADER = struct.Struct("<Q")


class SandboxFailure(AssertionError):
    """The target hung (no answer in time) or the child died (a crash, or killed for memory)."""


class TargetRaised(Exception):
    """The target raised: ``kind`` is the exception's class name, ``message`` its text, ``trace`` the child's
    traceback."""

    def __init__(self, kind: str, message: str, trace: str) -> None:
        super().__init__(f"{kind}: {message}\n{trace}")
        self.kind, self.message, self.trace = kind, message, trace


def _send(stream: BinaryIO, value: object) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _receive(stream: BinaryIO) -> object:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError
    return pickle.loads(payload)


class Sandbox:
    """Runs ``tests.support.fuzz_targets`` functions in a limited child; counts what it was fed."""

    def __init__(self, *, memory_bytes: int, cpu_seconds: int = 900) -> None:
        self.memory_bytes, self.cpu_seconds = memory_bytes, cpu_seconds
        self._child: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        environ = dict(
            os.environ, FUZZ_MEMORY_BYTES=str(self.memory_bytes), FUZZ_CPU_SECONDS=str(self.cpu_seconds)
        )
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), environ.get("PYTHONPATH", "")]))
        child = subprocess.Popen(
            [sys.executable, "-c", "from tests.support.sandbox import serve; serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=_ROOT,
            env=environ,
        )
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 120)
        if not ready or _receive(child.stdout) != "ready":  # type: ignore[arg-type]
            child.kill()
            raise SandboxFailure("the fuzzing sandbox did not start")
        return child

    def call(self, target: str, *args: Any, timeout: float) -> Any:
        """``fuzz_targets.<target>(*args)`` in the child; its return value, or :class:`TargetRaised`, or
        :class:`SandboxFailure` when it took longer than ``timeout`` seconds or the child died."""
        if self._child is None or self._child.poll() is not None:
            self._child = self._start()
        child = self._child
        assert child.stdin is not None and child.stdout is not None
        try:
            _send(child.stdin, (target, args))  # type: ignore[arg-type]
        except BrokenPipeError:
            self._child = None
            raise SandboxFailure(
                f"{target}: the sandbox died before the call (exit {child.wait()})"
            ) from None
        ready, _, _ = select.select([child.stdout], [], [], timeout)
        if not ready:
            self.close()
            raise SandboxFailure(f"{target}: no answer within {timeout:g} s (a hang)")
        try:
            kind, value = _receive(child.stdout)  # type: ignore[arg-type, misc]
        except EOFError:
            code = child.wait()
            self._child = None
            how = f"killed by signal {-code}" if code < 0 else f"exit {code}"
            raise SandboxFailure(f"{target}: the sandbox died ({how}): a crash, or the CPU limit") from None
        if kind == "raised":
            raise TargetRaised(*value)
        return value

    def close(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child.wait()
            self._child = None


def serve() -> None:
    """The child's loop (see the module docstring)."""
    from tests.support import fuzz_targets

    fuzz_targets.warm_up()  # the normalisation table and lazy imports, before the address space is limited
    memory = int(os.environ["FUZZ_MEMORY_BYTES"])
    cpu = int(os.environ["FUZZ_CPU_SECONDS"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's to handle
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the answers
    _send(answers, "ready")
    while True:
        try:
            target, args = _receive(requests)  # type: ignore[misc]
        except EOFError:
            return
        try:
            _send(answers, ("ok", getattr(fuzz_targets, target)(*args)))
        except BaseException as error:  # noqa: BLE001 - every failure, MemoryError included, goes to the parent
            kind, message, trace = type(error).__name__, str(error)[:2000], traceback.format_exc(limit=-8)
            del error  # its frames hold the target's inputs and outputs
            _send(answers, ("raised", (kind, message, trace)))
