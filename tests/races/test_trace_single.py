"""Traces on one rank, flow matching on synthetic events, and ``pldemu trace-plot``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import instance

from pldemu.cli.commands import trace_plot
from pldemu.ir import NR, BufferKind, DType, ProgramBuilder
from pldemu.job import trace_plot as plot
from pldemu.runtime.instrument.trace import Notify, Wait, match_flows, partial_path
from pldemu.runtime.values import Buffer


def test_one_rank_trace_has_slices_calls_and_a_self_flow(tmp_path: Path) -> None:
    pb = ProgramBuilder("selfsync")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 8])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.tile.put(data, me, pld.tile.full([1, 8], 1.0, "fp32"), pld.tile.create([1, 8], "fp32"))
    pld.system.notify(sig, me, [0, 0], 1)
    pld.system.wait(sig, [0, 0], 1)
    pld.system.notify(sig, me, [0, 0], -1)
    out = tmp_path / "sub" / "t.json"
    with instance(pb.build(), trace=str(out)) as inst:
        inst.run()
        inst.run()
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    names = [e["name"] for e in ev if e["ph"] == "X"]
    assert names.count("call 1") == names.count("call 2") == 1
    assert names.count("notify -> 0") == 4 and names.count("wait") == 2 and "put -> 0" in names
    assert "rank" not in names  # metadata ops are not traced
    flows = [e for e in ev if e["ph"] in "sf"]
    assert len(flows) == 4 and {e["pid"] for e in flows} == {0}
    wait = next(e for e in ev if e["name"] == "wait")
    assert wait["args"]["satisfied_by"].startswith("rank 0 main:") and wait["args"]["cell"] == "sig[0, 0]"
    assert [e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"] == ["rank 0"]
    assert doc["otherData"]["program"] == "selfsync" and doc["otherData"]["nranks"] == 1
    assert all(e["ts"] >= 0 for e in ev if "ts" in e)


def _sig(shape: tuple[int, ...]) -> Buffer:
    return Buffer(0, "sig", BufferKind.SIGNAL, DType.INT32, shape, None, np.empty(0, np.int32))


def test_flow_goes_to_the_notify_that_reached_the_expected_value() -> None:
    bufs = [_sig((3, 1))]
    # Cell [1, 0] of rank 0: rank 1 adds 1 (t 10), rank 1 adds 1 again (t 20); rank 0 waits for >= 2.
    n1 = Notify(0, 1, 0, 0, 1, 1, False, 9.0, 11.0)
    n2 = Notify(1, 1, 0, 0, 1, 1, False, 19.0, 21.0)
    w2 = Wait(2, 0, 0, 1, 2, True, 5.0, 22.0)
    w1 = Wait(3, 0, 0, 1, 1, True, 5.0, 12.0)
    got = dict((w.event, n.event) for n, w in match_flows([n1, n2], [w2, w1], bufs, 3))
    assert got == {2: 1, 3: 0}


def test_flow_replay_handles_retiring_and_set() -> None:
    bufs = [_sig((2, 1))]
    up1 = Notify(0, 1, 0, 0, 1, 1, False, 0.0, 2.0)
    retire = Notify(1, 0, 0, 0, 1, -1, False, 3.0, 4.0)  # the waiter's epilogue
    up2 = Notify(2, 1, 0, 0, 1, 1, False, 5.0, 6.0)
    wait = Wait(3, 0, 0, 1, 1, True, 4.5, 7.0)  # second call's wait: satisfied by up2, not up1
    (pair,) = match_flows([up1, retire, up2], [wait], bufs, 2)
    assert pair[0] is up2
    s = Notify(4, 1, 0, 0, 1, 5, True, 8.0, 9.0)  # a Set to 5 satisfies Eq 5
    eq = Wait(5, 0, 0, 1, 5, False, 8.0, 10.0)
    assert match_flows([up1, retire, up2, s], [eq], bufs, 2)[0][0] is s


def test_flow_fallback_prefers_the_rank_the_cell_belongs_to() -> None:
    bufs = [_sig((3, 1))]
    # The replay cannot satisfy the wait (say a clock error moved the notify late): fall back to the
    # notify of rank 2, whose credits cell [2, 0] counts, even though rank 1's is nearer.
    n_owner = Notify(0, 2, 0, 0, 2, 1, False, 30.0, 31.0)
    n_other = Notify(1, 1, 0, 0, 2, 0, False, 9.0, 10.0)
    w = Wait(2, 0, 0, 2, 1, True, 0.0, 12.0)
    assert match_flows([n_owner, n_other], [w], bufs, 3)[0][0] is n_owner


def test_partial_path() -> None:
    assert partial_path("/x/run.json", 3) == "/x/run.rank3.json"
    assert partial_path("trace", 0) == "trace.rank0.json"


def _synthetic(path: Path, races: bool = True) -> None:
    ev: list[dict[str, Any]] = []
    for r in range(4):
        ev.append({"name": "process_name", "ph": "M", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}})
        for call in range(3):
            t0 = call * 10_000 + r * 100
            ev.append({"name": f"call {call + 1}", "cat": "call", "ph": "X", "ts": t0, "dur": 2_000, "pid": r,
                       "tid": 0, "args": {"call": call + 1}})
            for k, cat in enumerate(["notify", "wait", "remote_load", "load/store", "compute", "put"]):
                ev.append({"name": cat, "cat": cat, "ph": "X", "ts": t0 + 100 + 300 * k, "dur": 200, "pid": r,
                           "tid": 0, "args": {"call": call + 1}})
            ev.append({"name": "signal", "cat": "flow", "ph": "s", "id": 100 * call + r, "pid": r, "tid": 0,
                       "ts": t0 + 200})
            ev.append({"name": "signal", "cat": "flow", "ph": "f", "bp": "e", "id": 100 * call + r,
                       "pid": (r + 1) % 4, "tid": 0, "ts": t0 + 590})
    if races:
        for side, (r, t) in enumerate([(0, 1_000), (2, 1_300)]):
            ev.append({"name": "race: target[0, 0:4]", "cat": "race", "ph": "i", "s": "t", "ts": t, "pid": r,
                       "tid": 0, "args": {"pair": 1, "target": 1, "buffer": "target", "kind": ["write", "read"][side],
                                          "at": "main:3 pld.tile.put(target, 1, x)", "call": 1}})
        ev.append({"name": "error: DeadlockError", "cat": "error", "ph": "i", "s": "t", "ts": 25_000, "pid": 3,
                   "tid": 0, "args": {}})
    path.write_text(json.dumps({"traceEvents": ev, "otherData": {"program": "synthetic"}}))


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    trace_plot.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_trace_plot_draws_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, png = tmp_path / "t.json", tmp_path / "out" / "t.png"
    _synthetic(src)
    assert trace_plot.run(_args(str(src), "-o", str(png))) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "4 ranks" in out and "12 flows" in out and "1 races" in out
    # Zoom on one call, without flows, without gap compression.
    png2 = tmp_path / "c2.png"
    assert trace_plot.run(_args(str(src), "-o", str(png2), "--calls", "2", "--no-flows", "--no-compress")) == 0
    assert "0 flows" in capsys.readouterr().out and png2.is_file()


def test_trace_plot_cuts_long_idle_gaps() -> None:
    m = plot.TimeMap([(0.0, 1_000.0), (50_000.0, 51_000.0)], 0.0, 51_000.0, 0.0, compress=True)
    assert m(1_000.0) == pytest.approx(1.0) and m(50_000.0) < 1.2  # the 49 ms gap is drawn 0.06 ms wide
    assert len(m.gaps) == 1 and m(51_000.0) - m(50_000.0) == pytest.approx(1.0)  # busy time stays to scale
    flat = plot.TimeMap([(0.0, 1_000.0), (50_000.0, 51_000.0)], 0.0, 51_000.0, 0.0, compress=False)
    assert flat(50_000.0) == pytest.approx(50.0) and not flat.gaps


def test_trace_plot_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = str(tmp_path / "x.png")
    assert trace_plot.run(_args(str(tmp_path / "missing.json"), "-o", png)) == 2
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"traceEvents": []}))
    assert trace_plot.run(_args(str(empty), "-o", png)) == 2
    src = tmp_path / "t.json"
    _synthetic(src, races=False)
    assert trace_plot.run(_args(str(src), "-o", png, "--calls", "9")) == 2
    assert trace_plot.run(_args(str(src), "-o", png, "--calls", "x:y")) == 2
    err = capsys.readouterr().err
    assert "cannot read a trace" in err and "no slices" in err and "no such call" in err


def test_subcommand_is_registered() -> None:
    from pldemu.cli import SUBCOMMANDS

    assert SUBCOMMANDS["trace-plot"][0] == "pldemu.cli.commands.trace_plot"
