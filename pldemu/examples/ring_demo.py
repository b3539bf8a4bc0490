"""The ring_demo program written with the Python builder (the same program as ring_demo.pld).

    pldemu run pldemu/examples/ring_demo.py -n 3 --iters 5 --jitter 50
    pldemu stress pldemu/examples/ring_demo.py --iters 200 --visibility deferred -n 4
    python pldemu/examples/ring_demo.py          # prints it as .pld text

pldemu executes this file on every rank and runs the module-level ``program``.
"""

from __future__ import annotations

from pldemu.ir import NR, Program, ProgramBuilder, format_program


def build_ring_demo() -> Program:
    """Every rank writes rank + iteration, then a ring max-allreduce reuses one signal buffer 10 times."""
    pb = ProgramBuilder("ring_demo")
    data = pb.window("data", "fp32", [1, 4097])
    sig = pb.signal("ring_sig", [2 * (NR - 1), NR])
    fb = pb.function("main")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(data, hint="ctx"), hint="me")
    with fb.for_range(10, hint="it") as it:
        mine = pld.tile.full([1, 4097], me + it, "fp32", hint="mine")
        pld.tile.store(mine, [0, 0], data)
        pld.tensor.allreduce(data, sig, op="max", mode="ring")
    return pb.build()


program = build_ring_demo()

if __name__ == "__main__":
    print(format_program(program), end="")
