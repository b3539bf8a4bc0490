"""Catalogue of inputs the lowering rejects, each with the message it must give.

Every ``LoweringError`` names the op, the argument and what was expected, then where the call sits
(``func main > stmt N: <source>``). Unknown reduce ops and modes never reach the pass: the builder
and the parser reject them (shown at the end), and a hand-made call that bypasses both is caught by
the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pldemu.ir import NR, AllreduceMode, IRTypeError, Program, ProgramBuilder, parse_program
from pldemu.ir.enums import Layout
from pldemu.ir.nodes import Call, Eval, ExprLike
from pldemu.ir.ops import Op
from pldemu.lowering import LoweringError, lower_composite_ops


@dataclass(frozen=True)
class Bad:
    """A program builder and the fragments its error message must contain."""

    build: Callable[[], Program]
    op: str
    arg: str
    fragments: tuple[str, ...]


def _prog(body: Callable[[ProgramBuilder], object], nranks: int | None = None) -> Callable[[], Program]:
    """A program whose buffers and main function ``body`` declares (buffers first, then pb.function())."""

    def build() -> Program:
        pb = ProgramBuilder("bad", nranks)
        body(pb)
        return pb.build()

    return build


def _allreduce(dtype: str = "fp32", shape: list[ExprLike] | None = None, valid: list[ExprLike] | None = None,
               mode: str = "mesh", sig_shape: list[ExprLike] | None = None, sig_kind: str = "signal",
               sig_dtype: str = "int32", window: bool = True, layout: Layout = Layout.ND,
               strides: list[int] | None = None, nranks: int | None = None,
               lanes: int = 1) -> Callable[[], Program]:
    def body(pb: ProgramBuilder) -> None:
        dims = shape or [1, 64]
        if window:
            t = pb.window("t", dtype, dims, valid, layout=layout, strides=strides)
        else:
            t = pb.local("t", dtype, dims)
        default_sig: list[ExprLike] = [NR, 1] if mode == "mesh" else [2 * (NR - 1), NR]
        sdims = sig_shape or default_sig
        if sig_kind == "signal":
            s = pb.signal("s", sdims)
        elif sig_kind == "window":
            s = pb.window("s", sig_dtype, sdims)
        else:
            s = pb.local("s", sig_dtype, sdims)
        pb.function().pld.tensor.allreduce(t, s, mode=mode, lanes=lanes)

    return _prog(body, nranks)


def _mixed_signal() -> Program:
    pb = ProgramBuilder("mixed")
    t = pb.window("t", "fp32", [1, 64])
    s = pb.signal("s", [NR, 1])
    fb = pb.function()
    fb.pld.tensor.barrier(s)
    ring_view = fb.pld.tensor.view(s, [2 * (NR - 1), NR])
    fb.pld.tensor.allreduce(t, ring_view, mode="ring")
    return pb.build()


def _mixed_signal_across_functions() -> Program:
    pb = ProgramBuilder("mixed2")
    t = pb.window("t", "fp32", [1, 64])
    s = pb.signal("s", [2 * (NR - 1), NR])
    main = pb.function("main")
    main.pld.tensor.allreduce(t, s, mode="ring")
    other = pb.function("other")
    other.pld.tensor.allreduce(t, s, mode="mesh")
    return pb.build()


def _allgather(local_shape: list[ExprLike], target_shape: list[ExprLike], alias: bool = False,
               local_dtype: str = "fp32") -> Callable[[], Program]:
    def body(pb: ProgramBuilder) -> None:
        local = pb.local("x", local_dtype, local_shape)
        target = pb.window("t", "fp32", target_shape)
        s = pb.signal("s", [NR, 1])
        pb.function().pld.tensor.allgather(target if alias else local, target, s)

    return _prog(body)


def _allgather_view_alias() -> Program:
    pb = ProgramBuilder("alias")
    target = pb.window("t", "fp32", [NR, 16])
    s = pb.signal("s", [NR, 1])
    fb = pb.function()
    row = fb.pld.tensor.view(target, [1, 16 * NR])
    fb.pld.tensor.allgather(row, target, s)
    return pb.build()


def _a2av(rows: ExprLike | None = None, send: tuple[str, list[ExprLike], str] = ("int32", [NR], "local"),
          recv: tuple[str, list[ExprLike], str] = ("int32", [NR, 1], "signal"), size: int = 16,
          nranks: int | None = None) -> Callable[[], Program]:
    def body(pb: ProgramBuilder) -> None:
        r = rows if rows is not None else 2 * NR
        src = pb.local("x", "fp32", [r, size])
        t = pb.window("t", "fp32", [r, size])
        s = pb.signal("s", [NR, 1])
        declare = {"local": pb.local, "window": pb.window}
        sc = declare[send[2]]("sc", send[0], send[1]) if send[2] != "signal" else pb.signal("sc", send[1])
        rc = declare[recv[2]]("rc", recv[0], recv[1]) if recv[2] != "signal" else pb.signal("rc", recv[1])
        pb.function().pld.tensor.all_to_all_v(src, t, s, sc, rc)

    return _prog(body, nranks)


def _broadcast(root: int, nranks: int | None = None, window: bool = True) -> Callable[[], Program]:
    def body(pb: ProgramBuilder) -> None:
        t = pb.window("t", "fp32", [1, 64]) if window else pb.local("t", "fp32", [1, 64])
        s = pb.signal("s", [NR, 1])
        pb.function().pld.tensor.broadcast(t, s, root=root)

    return _prog(body, nranks)


def _reduce_scatter(dtype: str = "fp32", shape: list[ExprLike] | None = None) -> Callable[[], Program]:
    def body(pb: ProgramBuilder) -> None:
        t = pb.window("t", dtype, shape or [NR, 64])
        s = pb.signal("s", [NR, 1])
        pb.function().pld.tensor.reduce_scatter(t, s)

    return _prog(body)


def _all_to_all(input_shape: list[ExprLike], size: int = 32) -> Callable[[], Program]:
    def body(pb: ProgramBuilder) -> None:
        x = pb.local("x", "fp32", input_shape)
        t = pb.window("t", "fp32", [NR, size])
        s = pb.signal("s", [NR, 1])
        pb.function().pld.tensor.all_to_all(x, t, s)

    return _prog(body)


def _unknown_reduce_op_bypassing_the_builder() -> Program:
    pb = ProgramBuilder("raw")
    t = pb.window("t", "fp32", [1, 64])
    s = pb.signal("s", [NR, 1])
    fb = pb.function()
    good = fb.call(Op.ALLREDUCE, [t, s])
    fb.emit(Eval(Call(Op.ALLREDUCE, good.args, (("op", 7), ("mode", AllreduceMode.mesh)), good.type)))
    return pb.build()


def _unknown_mode_bypassing_the_builder() -> Program:
    pb = ProgramBuilder("raw")
    t = pb.window("t", "fp32", [1, 64])
    s = pb.signal("s", [NR, 1])
    fb = pb.function()
    good = fb.call(Op.ALLREDUCE, [t, s])
    fb.emit(Eval(Call(Op.ALLREDUCE, good.args, (("op", good.attr("op")), ("mode", "tree")), good.type)))
    return pb.build()


AR, AG, RS, BC, A2A, A2AV, BAR = ("pld.tensor.allreduce", "pld.tensor.allgather", "pld.tensor.reduce_scatter",
                                  "pld.tensor.broadcast", "pld.tensor.all_to_all", "pld.tensor.all_to_all_v",
                                  "pld.tensor.barrier")

CATALOGUE: dict[str, Bad] = {
    "allreduce int32": Bad(_allreduce(dtype="int32"), AR, "target", ("FP16 or FP32", "got INT32")),
    "allreduce bf16": Bad(_allreduce(dtype="bf16"), AR, "target", ("FP16 or FP32", "got BF16")),
    "allreduce ring int32": Bad(_allreduce(dtype="int32", mode="ring"), AR, "target", ("FP16 or FP32",)),
    "allreduce local target": Bad(_allreduce(window=False), AR, "target", ("a window", "got tensor fp32")),
    "signal fp32": Bad(_allreduce(sig_kind="window", sig_dtype="fp32"), AR, "signal",
                       ("INT32 signal window", "got window fp32")),
    "signal not a window": Bad(_allreduce(sig_kind="local"), AR, "signal", ("a window", "got tensor int32")),
    "signal is a data window": Bad(_allreduce(sig_kind="window"), AR, "signal",
                                   ("'signal' buffer (zero at allocation)", "got window s")),
    "mesh signal [NR, 2]": Bad(_allreduce(sig_shape=[NR, 2]), AR, "signal", ("[NR, 1]", "got [NR, 2]")),
    "mesh given ring signal": Bad(_allreduce(sig_shape=[2 * (NR - 1), NR]), AR, "signal",
                                  ("[NR, 1] (one cell per rank)", "got [2 * (NR - 1), NR]")),
    "ring given mesh signal": Bad(_allreduce(mode="ring", sig_shape=[NR, 1]), AR, "signal",
                                  ("[2 * (NR - 1), NR]", "got [NR, 1]")),
    "ring signal [2*NR, NR]": Bad(_allreduce(mode="ring", sig_shape=[2 * NR, NR]), AR, "signal",
                                  ("[2 * (NR - 1), NR]", "got [2 * NR, NR]")),
    "constant signal, NR free": Bad(_allreduce(sig_shape=[4, 1]), AR, "signal",
                                    ("[NR, 1]", "as an expression in NR", "got [4, 1]")),
    "constant signal, wrong pinned NR": Bad(_allreduce(sig_shape=[4, 1], nranks=8), AR, "signal",
                                            ("NR pinned to 8", "got [4, 1]")),
    "one signal for mesh and ring": Bad(_mixed_signal, AR, "signal",
                                        ("one signal convention", "s is a ring signal here", "mesh signal at")),
    "one signal, two functions": Bad(_mixed_signal_across_functions, AR, "signal",
                                     ("s is a mesh signal here", "ring signal at func main")),
    "strided target": Bad(_allreduce(strides=[128, 1]), AR, "target", ("packed tensor", "strides [128, 1]")),
    "DN partial target": Bad(_allreduce(shape=[8, 16], valid=[3, 10], layout=Layout.DN), AR, "target",
                             ("ND layout", "layout DN")),
    "oversized partial rectangle": Bad(_allreduce(shape=[128, 128], valid=[100, 100]), AR, "target",
                                       ("within one 16384-byte chunk", "100 x 100 fp32 = 40000 bytes")),
    "partial box with row gaps": Bad(_allreduce(shape=[4, 8, 16], valid=[2, 4, 10]), AR, "target",
                                     ("one [rows, cols] box", "valid [2, 4, 10] of shape [4, 8, 16]")),
    "ring partial not a prefix": Bad(_allreduce(shape=[4, 8], valid=[2, 5], mode="ring"), AR, "target",
                                     ("contiguous row-major prefix", "valid [2, 5] of shape [4, 8]")),
    "partial valid outside shape": Bad(_allreduce(shape=[4, 8], valid=[5, 8]), AR, "target",
                                       ("inside the shape [4, 8]", "got [5, 8]")),
    "lanes 0": Bad(_allreduce(lanes=0), AR, "lanes", ("a positive int", "got 0")),
    "lanes with ring": Bad(_allreduce(mode="ring", lanes=2), AR, "lanes", ("1 with mode=ring", "got 2")),
    "lanes on a [NR, 1] signal": Bad(_allreduce(lanes=2), AR, "signal",
                                     ("[NR, S] with a static S >= lanes = 2", "got [NR, 1]")),
    "lanes beyond the signal's columns": Bad(_allreduce(sig_shape=[NR, 2], lanes=3), AR, "signal",
                                             ("S >= lanes = 3", "got [NR, 2]")),
    "lanes on a symbolic column count": Bad(_allreduce(sig_shape=[NR, NR], lanes=2), AR, "signal",
                                            ("a static S", "got [NR, NR]")),
    "lanes on a partial valid target": Bad(_allreduce(shape=[4, 8], valid=[2, 8], sig_shape=[NR, 2], lanes=2), AR,
                                           "target", ("fully valid when lanes > 1", "valid [2, 8] of shape [4, 8]")),
    "allgather local is target": Bad(_allgather([1, 16], [NR, 16], alias=True), AG, "local_data",
                                     ("other than the target", "t aliases t")),
    "allgather local is a view of target": Bad(_allgather_view_alias, AG, "local_data",
                                               ("other than the target", "t_view aliases t")),
    "allgather 7 fp32 elements": Bad(_allgather([1, 7], [NR, 7]), AG, "local_data",
                                     ("one alignment unit", "8 fp32 elements", "got 7 elements per row")),
    "allgather width mismatch": Bad(_allgather([1, 16], [NR, 32]), AG, "local_data", ("[1, 32]", "got [1, 16]")),
    "allgather target rows": Bad(_allgather([1, 16], [NR + 1, 16]), AG, "target", ("[NR, SIZE]",)),
    "allgather dtype mismatch": Bad(_allgather([1, 16], [NR, 16], local_dtype="fp16"), AG, "local_data",
                                    ("target's dtype fp32", "got fp16")),
    "reduce_scatter int32": Bad(_reduce_scatter(dtype="int32"), RS, "target", ("FP16 or FP32",)),
    "reduce_scatter rows": Bad(_reduce_scatter(shape=[NR + 1, 64]), RS, "target",
                               ("[NR, SIZE]", "got [NR + 1, 64]")),
    "broadcast negative root": Bad(_broadcast(-1), BC, "root", ("non-negative", "got -1")),
    "broadcast root >= pinned NR": Bad(_broadcast(4, nranks=4), BC, "root", ("below the pinned NR = 4", "got 4")),
    "broadcast local target": Bad(_broadcast(0, window=False), BC, "target", ("a window",)),
    "all_to_all input rows": Bad(_all_to_all([NR + 1, 32]), A2A, "input", ("[NR, SIZE]",)),
    "all_to_all 4 elements": Bad(_all_to_all([NR, 4], size=4), A2A, "input", ("one alignment unit",)),
    "a2av rows not k*NR": Bad(_a2av(rows=6), A2AV, "target", ("k * NR", "got 6")),
    "a2av rows vs pinned NR": Bad(_a2av(rows=6, nranks=4), A2AV, "target",
                                  ("divisible by the pinned NR = 4", "got 6")),
    "a2av rows NR + 1": Bad(_a2av(rows=NR + 1), A2AV, "target", ("k * NR", "got NR + 1")),
    "a2av send_counts fp32": Bad(_a2av(send=("fp32", [NR], "local")), A2AV, "send_counts",
                                 ("INT32 local tensor of [NR]", "got local fp32[NR]")),
    "a2av send_counts window": Bad(_a2av(send=("int32", [NR], "window")), A2AV, "send_counts",
                                   ("INT32 local tensor", "got window int32[NR]")),
    "a2av send_counts [NR, 1]": Bad(_a2av(send=("int32", [NR, 1], "local")), A2AV, "send_counts",
                                    ("[NR]", "got [NR, 1]")),
    "a2av recv_counts local": Bad(_a2av(recv=("int32", [NR, 1], "local")), A2AV, "recv_counts", ("a window",)),
    "a2av recv_counts [NR]": Bad(_a2av(recv=("int32", [NR], "signal")), A2AV, "recv_counts",
                                 ("[NR, 1]", "got [NR]")),
    "a2av recv_counts fp32": Bad(_a2av(recv=("fp32", [NR, 1], "window")), A2AV, "recv_counts",
                                 ("INT32 window of [NR, 1]", "got fp32")),
    "barrier ring-shaped signal": Bad(_prog(lambda pb: pb.function().pld.tensor.barrier(
        pb.signal("s", [2 * (NR - 1), NR]))), BAR, "signal", ("[NR, 1]",)),
    "unknown reduce op (hand-made call)": Bad(_unknown_reduce_op_bypassing_the_builder, AR, "op",
                                              ("a ReduceOp (Sum, Max, Min, Prod)", "got 7")),
    "unknown mode (hand-made call)": Bad(_unknown_mode_bypassing_the_builder, AR, "mode",
                                         ("one of mesh, ring", "got 'tree'")),
}


@pytest.mark.parametrize("case", list(CATALOGUE), ids=list(CATALOGUE))
def test_rejected_with_a_clear_message(case: str) -> None:
    bad = CATALOGUE[case]
    with pytest.raises(LoweringError) as info:
        lower_composite_ops(bad.build())
    err = info.value
    text = str(err)
    assert text.startswith(f"{bad.op}: argument '{bad.arg}' must be "), text
    assert err.op.text == bad.op and err.arg == bad.arg
    for fragment in bad.fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    assert "(at func " in text, text  # the call's location
    assert "Const(" not in text and "DType." not in text and "Var(" not in text, text  # the user's terms
    assert isinstance(err, ValueError)


def test_catalogue_is_large_enough() -> None:
    assert len(CATALOGUE) >= 20


def test_builder_rejects_unknown_reduce_op() -> None:
    pb = ProgramBuilder("b")
    t = pb.window("t", "fp32", [1, 64])
    s = pb.signal("s", [NR, 1])
    with pytest.raises(IRTypeError, match=r"pld.tensor.allreduce: argument 'op' must be one of Sum, Max, Min, "
                                          r"Prod, got 'avg'"):
        pb.function().pld.tensor.allreduce(t, s, op="avg")


def test_builder_rejects_unknown_mode() -> None:
    pb = ProgramBuilder("b")
    t = pb.window("t", "fp32", [1, 64])
    s = pb.signal("s", [NR, 1])
    with pytest.raises(IRTypeError, match=r"argument 'mode' must be one of mesh, ring, got 'tree'"):
        pb.function().pld.tensor.allreduce(t, s, mode="tree")


@pytest.mark.parametrize("attr,fragment", [("op=Avg", "Avg"), ("mode=tree", "tree")])
def test_parser_rejects_unknown_reduce_op_and_mode(attr: str, fragment: str) -> None:
    text = f"""program p {{
  window t: fp32[1, 64]
  signal s: int32[NR, 1]
  func main() {{
    t = pld.tensor.allreduce(t, s, {attr})
  }}
}}
"""
    with pytest.raises(ValueError) as info:
        parse_program(text)
    assert fragment in str(info.value)
