"""NeuronEliminateCasts never raises on a kernel its verifier accepts (issue 22 point 4): random verified
kernels (hypothesis), and the two shapes the issue found crashing, a tensor with no stores (``const``, or a
kernel whose DMA load was deleted), kept by the no-stores bail with the reason and the statistic."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from neuron_helpers import CORPUS, FULL, kernel

from pldemu.cli import main
from pldemu.neuron.dtypes import NDType
from pldemu.neuron.eliminate_casts import KEPT_NO_STORES, NeuronEliminateCasts, Refusal
from pldemu.neuron.evaluate import compare
from pldemu.neuron.ir import AP, Function, Inst, Kind, Memory, Tensor, TensorFlag, ValueRef
from pldemu.neuron.ops import ACTIVATIONS, ARITH
from pldemu.neuron.stats import Statistics
from pldemu.neuron.text import parse_file
from pldemu.neuron.verifier import VerifyError, verify

P, F = 4, 4
DTYPES = [NDType.FP32, NDType.BF16, NDType.FP16, NDType.FP8_E4M3, NDType.INT8, NDType.INT32]
WHOLE = ((F, P), (1, F))
HALVES = [(((F, P), (1, F // 2)), 0), (((F, P), (1, F // 2)), F // 2)]


def _ap(t: Tensor, part: int | None) -> AP:
    pattern, offset = (WHOLE, 0) if part is None else HALVES[part]
    return AP(t.name, pattern, offset, t.dtype)


@st.composite
def tensors(draw: st.DrawFn) -> tuple[Tensor, ...]:
    out = [Tensor("h_in", Memory.HBM, (P, F), draw(st.sampled_from(DTYPES)), frozenset({TensorFlag.INPUT}))]
    for i in range(draw(st.integers(1, 4))):
        flags = draw(st.sampled_from([frozenset(), frozenset(), frozenset({TensorFlag.CONST}),
                                      frozenset({TensorFlag.INPUT})]))
        out.append(Tensor(f"s{i}", Memory.SBUF, (P, F), draw(st.sampled_from(DTYPES)), flags))
    if draw(st.booleans()):
        out.append(Tensor("acc", Memory.PSUM, (P, F), NDType.FP32))
    return tuple(out)


@st.composite
def instruction(draw: st.DrawFn, f: Function, n: int) -> Inst:
    """One instruction over ``f``'s tensors and values (often, not always, well formed)."""
    values = [i for i in f.insts if i.dst is None]
    onchip = [t for t in f.tensors if t.memory is not Memory.HBM]
    kind = draw(st.sampled_from([Kind.TensorCopyOp, Kind.TensorCopyOp, Kind.ActivationOp, Kind.TensorScalarPtrOp,
                                 Kind.TensorTensorOp, Kind.DMACopy]))
    part = draw(st.sampled_from([None, None, 0, 1]))
    if kind is Kind.DMACopy:
        hbm = f.tensors[0]
        dst = draw(st.sampled_from(onchip))
        return Inst(f"i{n}", kind, (_ap(hbm, part),), dst.dtype, _ap(dst, part), trips=draw(st.integers(1, 3)))
    use_value = values and part is None and draw(st.booleans())
    src: ValueRef | AP = (ValueRef(draw(st.sampled_from(values)).name) if use_value
                          else _ap(draw(st.sampled_from(onchip)), part))
    srcs = (src, src) if kind is Kind.TensorTensorOp else (src,)
    store = draw(st.booleans()) if kind is not Kind.TensorCopyOp else draw(st.sampled_from([False, False, True]))
    dst_t = draw(st.sampled_from(onchip)) if store else None
    dtype = dst_t.dtype if dst_t is not None else draw(st.sampled_from(DTYPES))
    func = {Kind.ActivationOp: draw(st.sampled_from(sorted(ACTIVATIONS))),
            Kind.TensorScalarPtrOp: draw(st.sampled_from(sorted(ARITH))),
            Kind.TensorTensorOp: draw(st.sampled_from(sorted(ARITH)))}.get(kind)
    return Inst(f"i{n}", kind, srcs, dtype, None if dst_t is None else _ap(dst_t, part), func=func,
                scalar=0.5 if kind is Kind.TensorScalarPtrOp else None, canMutateDstTy=draw(st.booleans()),
                trips=draw(st.integers(1, 3)))


@st.composite
def verified_kernels(draw: st.DrawFn) -> Function:
    f = Function("random", draw(tensors()), ())
    for n in range(draw(st.integers(1, 9))):
        inst = draw(instruction(f, n))
        candidate = Function(f.name, f.tensors, (*f.insts, inst))
        try:
            f = verify(candidate)
        except VerifyError:
            continue  # keep the program verified: drop the instruction
    assume(any(i.kind is Kind.TensorCopyOp and i.dst is None for i in f.insts))
    return f


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(verified_kernels())
def test_the_pass_never_raises_on_a_verified_kernel(f: Function) -> None:
    result = NeuronEliminateCasts().transformStmts(f)  # no exception, whatever the kernel
    assert len(result.verdicts) == sum(1 for i in f.insts if i.kind is Kind.TensorCopyOp and i.dst is None)
    for v in result.verdicts:
        assert v.eliminated or v.refusal is not None
    survivors = {i.name for i in result.after.insts}
    assert all((v.cast in survivors) != v.eliminated for v in result.verdicts)
    try:
        verify(result.after)
    except VerifyError:
        return  # pldemu casts says so (exit 1): a producer flagged canMutateDstTy had another reader
    compare(f, result.after, 0)  # and --run executes both without raising


CONST = ("kernel k\nsbuf t[8, 4] bf16 const\nhbm out[8, 4] fp32 output\n"
         f"%c = TensorCopyOp(t{FULL}:bf16) dtype=fp32\n%u = ActivationOp(%c) func=exp dtype=fp32\n"
         f"%store = DMACopy(%u) dst=out{FULL}:fp32 dtype=fp32\n")


def test_a_tensor_with_no_stores_is_a_bail_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    never_written = kernel(f"%c = TensorCopyOp(xs{FULL}:bf16) dtype=fp32\n%u = ActivationOp(%c) func=exp dtype=fp32\n")
    never_written = Function(never_written.name, never_written.tensors,
                             tuple(i for i in never_written.insts if i.name != "lx"))  # its DMA load deleted
    for f in (verify(never_written), verify(parse_file(_write(tmp_path, CONST)))):
        stats = Statistics()
        result = NeuronEliminateCasts(stats=stats).transformStmts(f)
        (verdict,) = result.verdicts
        assert not verdict.eliminated and verdict.refusal is Refusal.BAIL_NO_STORES
        assert result.after == f and stats.value(KEPT_NO_STORES) == 1
    assert main(["casts", str(tmp_path / "k.nki"), "--stats", "--run"]) == 0
    out = capsys.readouterr().out
    assert "%c: kept by bail: the tensor has no stores (a const tensor, or one never written)" in out
    assert f"{KEPT_NO_STORES}: 1 count" in out


def test_the_corpus_verdicts_do_not_change() -> None:
    for path in sorted(CORPUS.glob("*.nki")):
        assert all(v.refusal is not Refusal.BAIL_NO_STORES
                   for v in NeuronEliminateCasts().transformStmts(verify(parse_file(path))).verdicts), path


def _write(folder: Path, text: str) -> Path:
    path = folder / "k.nki"
    path.write_text(text)
    return path
