"""A repetition's resources: entered in a fixed order of kinds, always left in reverse.

    with Stack(log) as stack:
        stack.enter("host", "settings", noise.host_settings(...))   # THP, governor: set, restored on leaving
        fs = stack.enter("filesystem", "ext4", storage.filesystem(...))
        db = stack.enter("server", "innodb", database.running(...))
        stack.close("server")        # a cold start: the servers, and all entered after them, stop
        db = stack.enter("server", "innodb", database.running(...))

A cell may hold several of a kind (servers of a topology, say); `of(kind)`
gives them in the order entered. Every process they start lives in the
repetition's cgroup (runtime.owned), so leaving the stack and then the cgroup
leaves nothing behind.
"""
from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field

KINDS = ("host", "filesystem", "network", "server", "service", "monitor", "event", "workload")


@dataclass
class Held:
    kind: str
    name: str
    value: object
    exit: ExitStack = field(repr=False)


class Stack:
    """The resources a repetition holds, left in reverse order of entry, also when a body raises."""

    def __init__(self, log=None):
        self.log = log
        self.held: list[Held] = []

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc) -> None:
        self.close(exc=exc)

    def enter(self, kind: str, name: str, resource: AbstractContextManager):
        """Acquire resource (a context manager) as the newest of the stack; returns what it yields. A kind
        comes after every kind already held: a server after its filesystem, monitors after the servers."""
        if kind not in KINDS:
            raise ValueError(f"resource kind {kind!r} is not one of {', '.join(KINDS)}")
        if self.held and KINDS.index(kind) < KINDS.index(self.held[-1].kind):
            raise RuntimeError(f"{kind} {name!r} cannot be entered after {self.held[-1].kind} "
                               f"{self.held[-1].name!r}: a repetition enters {' → '.join(KINDS)}")
        exit = ExitStack()
        with ExitStack() as guard:  # a resource that fails to start is not held
            guard.push(exit)
            value = exit.enter_context(resource)
            guard.pop_all()
        self.held.append(Held(kind, name, value, exit))
        return value

    def of(self, kind: str) -> list:
        return [h.value for h in self.held if h.kind == kind]

    def close(self, kind: str | None = None, exc=(None, None, None)) -> None:
        """Leave every resource (or those of kind and all entered after the first of them), newest first,
        each told of the exception in flight (exc). Every one is left even when one fails to; a failure
        is raised afterwards, or noted on the exception in flight."""
        first = 0 if kind is None else next((i for i, h in enumerate(self.held) if h.kind == kind), len(self.held))
        error = None
        while len(self.held) > first:
            held = self.held.pop()
            try:
                held.exit.__exit__(*exc)
            except BaseException as e:  # noqa: BLE001 - keep releasing the rest
                if self.log is not None:
                    self.log.write(f"releasing {held.kind} {held.name}: {e}\n")
                    self.log.flush()
                if e is not exc[1]:
                    error = error or e
        if error is not None:
            if exc[1] is None:
                raise error
            exc[1].add_note(f"while releasing: {error}")
