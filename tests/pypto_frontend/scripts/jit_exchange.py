"""A tutorial-style pl.jit script of our own: every rank hands its row to the next (put) or takes the
next rank's (get), at any rank count; `--compile-only` as pypto's tutorial scripts have it.

    pldemu python jit_exchange.py -d 0,1,2 --mode get
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

COLS = 32
NR = pl.dynamic("NR")


@pl.jit.incore
def exchange(
    x: pl.Tensor[[1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
    box: pld.DistributedTensor[[1, COLS], pl.FP32],
    sig: pld.DistributedTensor[[1, 1], pl.INT32],
    pull: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(box)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if pull:  # publish in the own window for the previous rank to read
        box = pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], box)
        pld.system.notify(sig, peer=(me + n - 1) % n, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        got = pld.tile.remote_load(box, peer=(me + 1) % n, offsets=[0, 0], shape=[1, COLS])
        return pl.store(got, [0, 0], y)
    pld.tensor.put(box, peer=(me + 1) % n, src=x, atomic=pld.AtomicType.None_)  # into the next rank's window
    pld.system.notify(sig, peer=(me + 1) % n, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    return pl.store(pl.load(box, [0, 0], [1, COLS]), [0, 0], y)


@pl.jit
def per_rank(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
             box: pld.DistributedTensor[[1, COLS], pl.FP32], sig: pld.DistributedTensor[[1, 1], pl.INT32],
             pull: pl.Scalar[pl.INT32]):
    return exchange(x, y, box, sig, pull)


@pl.jit.host
def ring(x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]], pull: int):
    box_buf = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        box = pld.window(box_buf, [1, COLS], dtype=pl.FP32)
        sig = pld.window(sig_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], box, sig, pull, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="jit_exchange")
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--mode", choices=["put", "get"], default="put")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    devices = [int(d) for d in args.device.split(",")]
    n = len(devices)
    x = torch.stack([torch.full((1, COLS), float(r)) for r in range(n)])
    y = torch.zeros((n, 1, COLS))
    pull = 1 if args.mode == "get" else 0
    config = RunConfig(platform="a2a3sim", distributed_config=DistributedConfig(device_ids=devices))
    compiled = ring.compile(x, y, pull, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y, pull, config=config)
    shift = 1 if pull else -1
    expected = torch.stack([x[(r + shift) % n] for r in range(n)])
    assert torch.equal(y, expected), y
    print(f"OK {args.mode} on {n} devices")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
