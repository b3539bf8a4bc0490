"""Every literal region of every window or local access is refused before launch, from the one signature
table (issue 22 point 2): each op's region operands are data (``Signature.regions``), and this test walks
the table, so an op whose region is not declared, or declared and not checked, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from pldemu.collectives import COLLECTIVE_NAMES, CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, Op, parse_program
from pldemu.ir.signatures import SIGNATURES, Kind
from pldemu.ir.source import load_source
from pldemu.job.precheck import PrecheckError, precheck
from pldemu.lowering import lower_composite_ops

REGION_LISTS = ("offsets", "indices", "valid_shape")
"""Parameter names that say "a region of an operand" (``dst_offsets``, ``src_offsets`` included)."""

HEAD = ("  window w: fp32[2, 8]\n  local d: fp32[2, 8]\n  signal s: int32[NR, 1]\n")
TILE = "    t = tile.full([1, 8], 1.0, dtype=fp32)\n    st = tile.create([1, 8], dtype=fp32, mem=Vec)\n"

# Per op with regions: one call per declared region (in the order of Signature.regions) that leaves what
# it accesses, the line the precheck must print. The valid-shape regions the deducer already checks
# statically are given with NR, which only the job's rank count decides.
OUT_OF_BOUNDS: dict[Op, list[tuple[str, str]]] = {
    Op.PUT: [("pld.tile.put(w, 0, d, st, [1, 4], [0, 0], [1, 8])", "leaves buffer w [2, 8]: dim 1 covers [4, 12)"),
             ("pld.tile.put(w, 0, t, st, [0, 0], [1, 0], [1, 8])", "leaves tile t [1, 8]: dim 0 covers [1, 2)")],
    Op.GET: [("pld.tile.get(d, 0, w, st, [2, 0], [0, 0], [1, 8])", "leaves buffer d [2, 8]: dim 0 covers [2, 3)"),
             ("pld.tile.get(d, 0, w, st, [0, 0], [1, 4], [1, 8])",
              "region offsets [1, 4] shape [1, 8] leaves buffer w [2, 8]: dim 1 covers [4, 12) outside [0, 8)")],
    Op.REMOTE_LOAD: [("x = pld.tile.remote_load(w, 1, [0, 4], [1, 8])", "leaves buffer w [2, 8]: dim 1 covers [4, 12)"),
                     ("x = pld.tile.remote_load(w, 1, [0, 0], [1, 8], [1, NR * 4])",
                      "valid shape [1, 16] does not fit in shape [1, 8]: dim 1 covers [0, 16)")],
    Op.NOTIFY: [("pld.system.notify(s, 0, [NR, 0], 1, op=AtomicAdd)", "leaves buffer s [4, 1]: dim 0 covers [4, 5)")],
    Op.WAIT: [("pld.system.wait(s, [0, 1], 1, cmp=Ge)", "leaves buffer s [4, 1]: dim 1 covers [1, 2)")],
    Op.DEFER_WAIT: [("pld.system.defer_wait(s, [0, 1], 1, cmp=Ge)", "leaves buffer s [4, 1]: dim 1 covers [1, 2)")],
    Op.TENSOR_VIEW: [("v = tensor.view(d, [4, 4], [4, NR + 1])", "valid shape [4, 5] does not fit in shape [4, 4]")],
    Op.CACHEINVALID: [("system.cacheinvalid(w, [1, 8], [1, 4])", "leaves buffer w [2, 8]: dim 1 covers [4, 12)")],
    Op.TENSOR_READ: [("x = tensor.read(d, [0, 8])", "leaves buffer d [2, 8]: dim 1 covers [8, 9)")],
    Op.TENSOR_WRITE: [("tensor.write(d, [-1, 0], 1.0)", "leaves buffer d [2, 8]: dim 0 covers [-1, 0)")],
    Op.TILE_LOAD: [("x = tile.load(d, [1, 1], [1, 8])", "leaves buffer d [2, 8]: dim 1 covers [1, 9)"),
                   ("x = tile.load(d, [0, 0], [1, 8], [NR, 8])", "valid shape [4, 8] does not fit in shape [1, 8]")],
    Op.TILE_STORE: [("tile.store(t, [2, 0], d)", "leaves buffer d [2, 8]: dim 0 covers [2, 3)")],
    Op.TILE_SET_VALIDSHAPE: [("x = tile.set_validshape(t, [1, NR * 4])",
                              "valid shape [1, 16] does not fit in tile t [1, 8]: dim 1 covers [0, 16)")],
    Op.TILE_FULL: [("x = tile.full([1, 8], 0.0, [1, NR * 4], dtype=fp32)", "valid shape [1, 16] does not fit in "
                                                                          "shape [1, 8]")],
    Op.TILE_TRI: [("x = tile.tri(0:int32, [1, 8], [1, NR * 4], dtype=fp32)", "valid shape [1, 16] does not fit in "
                                                                           "shape [1, 8]")],
}


def refusal(line: str, nranks: int = 4) -> str:
    text = "program p {\n" + HEAD + "  func main() {\n" + TILE + "    " + line.strip() + "\n  }\n}\n"
    with pytest.raises(PrecheckError) as err:
        precheck(parse_program(text), nranks)
    return str(err.value)


def test_every_op_with_a_region_operand_declares_it():
    for op, sig in SIGNATURES.items():
        named = {p for r in sig.regions for p in r.params()}
        params = {p.name for p in sig.params}
        assert named <= params, (op, named - params)
        accessed = {p.name for p in sig.params if p.name.endswith(REGION_LISTS)}
        assert accessed <= named, f"{op.text}: {sorted(accessed - named)} not in Signature.regions"
        if any(p.kind is Kind.WINDOW for p in sig.params) and any(p.kind is Kind.LIST for p in sig.params):
            assert sig.regions, f"{op.text}: a window and a list, but no region"


def test_every_declared_region_has_an_out_of_bounds_case():
    assert set(OUT_OF_BOUNDS) == {op for op, sig in SIGNATURES.items() if sig.regions}
    for op, cases in OUT_OF_BOUNDS.items():
        assert len(cases) == len(SIGNATURES[op].regions), op


@pytest.mark.parametrize(("line", "message"), [c for cases in OUT_OF_BOUNDS.values() for c in cases],
                         ids=[f"{op.text}-{i}" for op, cases in OUT_OF_BOUNDS.items() for i in range(len(cases))])
def test_literal_region_outside_is_refused_before_launch(line: str, message: str):
    text = refusal(line)
    assert message in text, text
    assert "Const(" not in text and "DType." not in text


@pytest.mark.parametrize("line", [
    "pld.tile.get(d, 0, w, st, [1, 0], [1, 0], [1, 8])",
    "pld.tile.put(w, 0, t, st, [1, 0], [0, 0], [1, 8])",
    "x = tensor.read(d, [1, 7])",
    "v = tensor.view(d, [4, 4], [NR, 4])",
    "pld.system.notify(s, 0, [NR - 1, 0], 1, op=AtomicAdd)",
    "me = pld.system.rank(pld.system.get_comm_ctx(w))\n    x = tile.load(d, [me * 5, 0], [1, 8])",  # run time
    "v = tensor.view(d, [16])\n    x = tile.load(v, [8], [8])",  # a view: its own shape
], ids=["get-last-row", "put-tile", "read-last", "view-valid", "notify-last-row", "runtime", "view-load"])
def test_inside_or_unknown_is_accepted(line: str):
    text = "program p {\n" + HEAD + "  func main() {\n" + TILE + "    " + line + "\n  }\n}\n"
    precheck(parse_program(text), 4)


def test_a_region_of_a_view_is_checked_against_the_view():
    assert "leaves view v [16]: dim 0 covers [9, 17)" in refusal("v = tensor.view(d, [16])\n    x = tile.load(v, [9], [8])")


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "pldemu" / "examples").glob("*.p[ly]*"))


@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 5, 8])
def test_every_collective_and_example_passes_at_every_rank_count(nranks: int):
    """No false refusal: the lowered recipes and the examples have no region the precheck refuses."""
    programs = [collective_program(CollectiveSpec(name, mode=mode, size=17)).program
                for name in COLLECTIVE_NAMES for mode in AllreduceMode if mode is AllreduceMode.mesh or name == "allreduce"]
    if nranks > 1:  # an example with a literal peer 1 is refused at 1 rank, rightly
        programs += [load_source(p) for p in EXAMPLES if p.suffix in (".pld", ".py")]
    for source in programs:
        precheck(lower_composite_ops(source), nranks, source=source)
