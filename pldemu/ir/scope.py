"""Name scoping of a function body, shared by the parser and the verifier.

A ``Scope`` maps the names visible at one point of a function to their types. Blocks get a
``child``; what becomes visible after a block follows two rules: names first bound inside a loop
body are not visible after the loop (it may run zero times), and after an ``if`` a name is visible
when both branches bind it with the same type. ``hidden`` records, per function, why a name is not
visible, so the parser can say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pldemu.ir.nodes import Type


@dataclass
class Scope:
    """Names visible at one point of a function, plus why other names are not (shared per function)."""

    names: dict[str, Type]
    hidden: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of(names: Mapping[str, Type]) -> Scope:
        """A fresh function-level scope holding a copy of ``names``."""
        return Scope(dict(names))

    def child(self) -> Scope:
        """The scope of a nested block: sees every name of this one; its own bindings stay inside."""
        return Scope(dict(self.names), self.hidden)

    def bind(self, name: str, t: Type) -> None:
        self.names[name] = t

    def get(self, name: str) -> Type | None:
        return self.names.get(name)

    def leave_loop(self, body: Scope, where: str) -> None:
        """After a loop whose body had scope ``body``: its new names stay hidden, with the reason."""
        for name in body.names.keys() - self.names.keys():
            self.hidden[name] = f"it is only bound inside {where} (names bound in a loop body are not " \
                                "visible after the loop)"

    def join_branches(self, then: Scope, other: Scope, where: str) -> None:
        """After an ``if`` (``where``) whose branches had scopes ``then`` and ``other``."""
        for name in (then.names.keys() | other.names.keys()) - self.names.keys():
            t, e = then.names.get(name), other.names.get(name)
            if t is not None and t == e:
                self.bind(name, t)
            elif t is not None and e is not None:
                self.hidden[name] = f"the branches of {where} bind it with different types"
            else:
                self.hidden[name] = f"it is bound in only one branch of {where}"
        for name, t0 in list(self.names.items()):
            t, e = then.names[name], other.names[name]
            if t == e and t != t0:  # both branches re-bound it the same way
                self.bind(name, t)


__all__ = ["Scope"]
