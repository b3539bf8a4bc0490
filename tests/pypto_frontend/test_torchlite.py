"""pldemu's torch stand-in against numpy (values) and torch's documented rules (dtypes, views)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pldemu.torchlite as torch
from pldemu.pypto import active


def grid(rows: int = 3, cols: int = 4, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.arange(rows * cols, dtype=dtype).reshape(rows, cols)


@pytest.mark.parametrize(("call", "want"), [
    (lambda: torch.arange(5), torch.int64),
    (lambda: torch.arange(0.0, 3.0), torch.float32),
    (lambda: torch.zeros(2, 3), torch.float32),
    (lambda: torch.full((2,), 3), torch.int64),
    (lambda: torch.full((2,), 3.0), torch.float32),
    (lambda: torch.full((2,), True), torch.bool),
    (lambda: torch.tensor([[1, 2]]), torch.int64),
    (lambda: torch.tensor([1.5]), torch.float32),
    (lambda: torch.arange(4, dtype=torch.int32) + 1.5, torch.float32),
    (lambda: torch.arange(4, dtype=torch.int32) + 1, torch.int32),
    (lambda: torch.arange(4, dtype=torch.int32) / 2, torch.float32),
    (lambda: torch.arange(4, dtype=torch.int32).sum(), torch.int64),
    (lambda: torch.ones(2, dtype=torch.float16) + torch.ones(2, dtype=torch.bfloat16), torch.float32),
    (lambda: torch.ones(2, dtype=torch.float16) + torch.ones(2, dtype=torch.int64), torch.float16),
    (lambda: torch.ones(2, dtype=torch.float16) * 2.5, torch.float16),
    (lambda: torch.ones(2, dtype=torch.float16) + torch.tensor(1.0), torch.float16),
    (lambda: torch.ones(2, dtype=torch.int32) + torch.tensor(1.0), torch.float32),
    (lambda: torch.cat([torch.ones(1, dtype=torch.int32), torch.ones(1)]), torch.float32),
    (lambda: torch.ones(2) > 0, torch.bool),
])
def test_dtypes_follow_torch_not_numpy(call, want) -> None:
    assert call().dtype == want


def test_bfloat16_is_ml_dtypes_and_round_trips() -> None:
    x = (1.0 + torch.arange(8, dtype=torch.float32).remainder(5) * 0.0625).to(torch.bfloat16)
    assert x.numpy().dtype == np.dtype(ml_dtypes.bfloat16) and x.element_size() == 2
    assert torch.equal(x.to(torch.float32), torch.tensor([1.0, 1.0625, 1.125, 1.1875, 1.25, 1.0, 1.0625, 1.125]))
    assert x.tolist()[1] == 1.0625 and isinstance(x.sum().item(), float)


def test_reductions_match_numpy() -> None:
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(t.sum(dim=0).numpy(), a.sum(axis=0))
    np.testing.assert_array_equal(t.prod(dim=1).numpy(), a.prod(axis=1))
    np.testing.assert_array_equal(t.max(dim=2).values.numpy(), a.max(axis=2))
    np.testing.assert_array_equal(t.min(dim=0).indices.numpy(), a.argmin(axis=0))
    assert t.max().item() == a.max() and t.min().ndim == 0
    assert t.abs().max().item() == np.abs(a).max()
    np.testing.assert_array_equal(t.sum(dim=-1, keepdim=True).numpy(), a.sum(axis=-1, keepdims=True))
    halves = torch.full((4097,), 0.1, dtype=torch.float16)
    assert halves.sum().dtype == torch.float16  # accumulated in float32, rounded once (torch's CPU result)
    assert halves.sum().item() == pytest.approx(float(np.float16(np.float32(np.float16(0.1)) * 4097)), rel=1e-3)


def test_remainder_has_the_divisors_sign() -> None:
    t = torch.arange(-3, 4)
    assert t.remainder(3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert (t % -2).tolist() == list(np.arange(-3, 4) % -2)


def test_views_share_memory_and_write_back_in_place() -> None:
    base = torch.zeros((2, 3, 4), dtype=torch.int32)
    row = base[1]
    row += 5
    base[0, 1] = 7
    base[0][2][3] = 9
    base.view(6, 4)[5, 0] = 4
    base.permute(2, 0, 1)[1, 0, 0] = 8
    base.numpy()[0, 0, 0] = -1  # what a compiled call does to an Out tensor
    assert np.asarray(base) is base.numpy()
    want = np.zeros((2, 3, 4), np.int32)
    want[1] += 5
    want[0, 1] = 7
    want[0, 2, 3] = 9
    want[1, 2, 0] = 4
    want[0, 0, 1] = 8
    want[0, 0, 0] = -1
    np.testing.assert_array_equal(base.numpy(), want)
    assert base[0, 0, 0].item() == -1 and base[0, 0, 0].ndim == 0


def test_view_refuses_what_needs_a_copy_and_reshape_copies() -> None:
    t = grid().permute(1, 0)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(-1)
    assert t.reshape(-1).tolist() == list(np.arange(12).reshape(3, 4).T.reshape(-1).astype(float))
    assert t.contiguous().view(-1).shape == (12,)


def test_shape_methods_match_numpy() -> None:
    g = grid()
    assert g.unsqueeze(0).expand(2, 3, 4).contiguous().shape == torch.Size([2, 3, 4])
    assert g.unsqueeze(0).expand(2, -1, -1).contiguous().sum(dim=0).tolist() == (2 * g).tolist()
    assert g.flatten().shape == (12,) and g.unsqueeze(-1).squeeze(-1).shape == (3, 4)
    assert g.view(1, -1, 1).shape == (1, 12, 1) and g.size(1) == 4 and g.numel() == 12 and g.dim() == 2
    assert torch.stack([g, g], dim=1).shape == (3, 2, 4)
    assert torch.cat([g[:, :1], g[:, 1:]], dim=1).tolist() == g.tolist()


def test_comparisons_allclose_equal_all() -> None:
    a = grid()
    assert torch.allclose(a, a + 1e-7, atol=1e-6) and not torch.allclose(a, a + 1)
    assert torch.equal(a, a.clone()) and not torch.equal(a, a.reshape(4, 3))
    assert bool(torch.all(a >= 0)) and not bool(torch.all(a > 0))
    assert torch.all(torch.zeros(3) == 0)
    with pytest.raises(RuntimeError, match="did not match"):
        torch.allclose(a, a.to(torch.float16))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(a > 0)


def test_python_protocols() -> None:
    g = grid()
    assert sum(g[k] for k in range(3)).tolist() == g.sum(dim=0).tolist()
    assert [r.shape for r in g] == [torch.Size([4])] * 3 and len(g) == 3
    assert f"{g.max():.1f}" == "11.0" and float(g[0, 1]) == 1.0 and int(g[2, 3]) == 11
    assert list(range(10))[torch.tensor(3)] == 3
    assert repr(torch.ones(2, dtype=torch.int32)) == "tensor([1, 1], dtype=torch.int32)"
    assert isinstance(g, torch.Tensor) and torch.is_tensor(g) and repr(torch.float) == "torch.float32"


def test_in_place_ops_refuse_a_lossy_category() -> None:
    t = torch.zeros(2, dtype=torch.int32)
    t += 2
    with pytest.raises(RuntimeError, match="can't be cast"):
        t += 1.5
    assert t.tolist() == [2, 2] and t.zero_().tolist() == [0, 0] and t.fill_(3).tolist() == [3, 3]


def test_assert_close() -> None:
    torch.testing.assert_close(grid(), grid() + 1e-6)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 12"):
        torch.testing.assert_close(grid(), grid().clone().fill_(0) + grid() * (grid() != 5))


def test_missing_names_say_to_install_torch() -> None:
    with pytest.raises(AttributeError, match="install torch"):
        torch.cdist(grid(), grid())  # type: ignore[attr-defined]


def test_seeded_random_inputs() -> None:
    """The same seed gives the same inputs; torch's dtypes and argument forms."""
    torch.manual_seed(7)
    first = (torch.randn(2, 3), torch.rand((4,)), torch.randint(0, 5, (2, 2), dtype=torch.int32), torch.randint(3, (6,)))
    torch.manual_seed(7)
    again = (torch.randn(2, 3), torch.rand((4,)), torch.randint(0, 5, (2, 2), dtype=torch.int32), torch.randint(3, (6,)))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert [t.dtype for t in first] == [torch.float32, torch.float32, torch.int32, torch.int64]
    assert first[1].min().item() >= 0 and first[1].max().item() < 1
    assert first[3].shape == (6,) and first[3].min().item() >= 0 and first[3].max().item() < 3


def test_roll_flip_cumsum() -> None:
    t = torch.arange(6).reshape(3, 2)
    assert torch.roll(t, 1, dims=0).tolist() == [[4, 5], [0, 1], [2, 3]]
    assert torch.roll(torch.arange(4), -1).tolist() == [1, 2, 3, 0]
    assert torch.flip(t, dims=[1]).tolist() == [[1, 0], [3, 2], [5, 4]]
    assert torch.cumsum(t, dim=0).tolist() == [[0, 1], [2, 4], [6, 9]]


def test_import_torch_gives_the_stand_in_only_while_active() -> None:
    import importlib.util
    import sys

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("a real torch is installed: the layer leaves it alone")
    with active():
        import torch as imported

        assert imported is torch
    assert "torch" not in sys.modules


# -- what pypto-lib's golden harness (golden/: TensorSpec, run_jit, validate_golden) and its L3 programs use --

def test_set_num_threads_checks_its_argument_as_torch_does() -> None:
    """golden/__init__.py calls it at import; torch refuses anything but a positive int."""
    assert torch.set_num_threads(16) is None and torch.set_num_threads(np.int64(2)) is None
    for bad in (0, -3):
        with pytest.raises(RuntimeError, match="expects a positive integer"):
            torch.set_num_threads(bad)
    for bad, kind in ((True, "bool"), ("4", "str"), (2.0, "float")):
        with pytest.raises(RuntimeError, match=f"expects an int, but got {kind}"):
            torch.set_num_threads(bad)  # type: ignore[arg-type]


def test_expand_as_is_a_broadcast_view_with_the_others_shape() -> None:
    """allreduce's golden: ``out[:] = inputs.sum(dim=0, keepdim=True).expand_as(out)``."""
    a = np.arange(6, dtype=np.float32).reshape(1, 1, 6)
    base = torch.from_numpy(a.copy())
    out = torch.zeros([3, 2, 6], dtype=torch.float32)
    view = base.expand_as(out)
    assert view.shape == (3, 2, 6) and view.dtype == torch.float32
    np.testing.assert_array_equal(view.numpy(), np.broadcast_to(a, (3, 2, 6)))
    base[0, 0, 2] = 100.0  # a view: the expanded tensor sees the base's writes
    out[:] = view
    want = np.broadcast_to(a, (3, 2, 6)).copy()
    want[..., 2] = 100.0
    np.testing.assert_array_equal(out.numpy(), want)
    assert torch.tensor(7, dtype=torch.int32).expand_as(out).dtype == torch.int32
    with pytest.raises(RuntimeError, match=r"expanded size of the tensor \(2\) must match the existing size \(3\) "
                                           r"at non-singleton dimension 0"):
        torch.zeros(3, 1).expand_as(torch.zeros(2, 4))


@pytest.mark.parametrize("mask", [
    np.array([True, False, True, True]),
    np.arange(12).reshape(3, 4) % 5 == 0,
    np.arange(24).reshape(2, 3, 4) % 7,  # not bool: nonzero elements count as true
    np.zeros((2, 0), dtype=bool),
])
def test_where_with_a_condition_alone_gives_int64_indices_per_dimension(mask: np.ndarray) -> None:
    got = torch.where(torch.from_numpy(mask))
    want = np.nonzero(mask)
    assert isinstance(got, tuple) and len(got) == len(want) == mask.ndim
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.int64 and g.shape == w.shape
        np.testing.assert_array_equal(g.numpy(), w)


def test_where_of_a_zero_dim_condition_is_one_dimensional() -> None:
    """numpy refuses nonzero on a 0-d array; torch treats it as one element."""
    assert [t.tolist() for t in torch.where(torch.tensor(True))] == [[0]]
    assert [t.tolist() for t in torch.where(torch.tensor(False))] == [[]]
    with pytest.raises(TypeError, match="condition alone"):
        torch.where(torch.tensor([True]), 1)


def test_validate_golden_mismatch_report() -> None:
    """validate_golden's report: ``torch.where(~isclose(...).flatten())[0]``, 0-d tensor indices, ``item()``."""
    expected_np = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    actual_np = expected_np.copy()
    actual_np[0, 1, 2], actual_np[1, 2, 3] = 99.0, -5.0
    actual = torch.from_numpy(actual_np).to(torch.bfloat16)
    expected = torch.from_numpy(expected_np).to(torch.bfloat16)
    assert not torch.allclose(actual, expected, rtol=0.0, atol=0.0)
    mismatch = torch.where(~torch.isclose(actual, expected, rtol=0.0, atol=0.0).flatten())[0]
    flat_actual, flat_expected = actual.flatten(), expected.flatten()
    report = [(i.item(), flat_actual[i].item(), flat_expected[i].item()) for i in mismatch[:min(20, mismatch.numel())]]
    want = [(int(k), float(actual_np.flat[k]), float(expected_np.flat[k]))
            for k in np.flatnonzero(actual_np != expected_np)]
    assert report == want and all(type(v) is t for v, t in zip(report[0], (int, float, float), strict=True))
    assert f"shape={tuple(actual.shape)} dtype={actual.dtype}" == "shape=(2, 3, 4) dtype=torch.bfloat16"


def test_share_in_place_keeps_contiguous_tensors_and_copies_the_rest() -> None:
    """golden/runner.py's ``_share_in_place``: a tensor that is shared and contiguous stays as it is,
    any other becomes ``t.cpu().contiguous().share_memory_()``."""
    base = np.arange(12, dtype=np.int32).reshape(3, 4)
    tensors = {"kept": torch.from_numpy(base), "copied": torch.from_numpy(base).permute(1, 0)}
    for name, t in list(tensors.items()):
        if t.is_shared() and t.is_contiguous():
            continue
        tensors[name] = t.cpu().contiguous().share_memory_()
    assert tensors["kept"].numpy() is base  # what a compiled call writes there reaches the caller's array
    assert tensors["copied"].is_shared() and tensors["copied"].numpy().flags.c_contiguous
    np.testing.assert_array_equal(tensors["copied"].numpy(), base.T)


def test_golden_idioms_of_prefill_cp_zigzag() -> None:
    """int64 tables filled element by element, bf16 markers written into rows, broadcast over ranks."""
    idx = torch.empty(4, dtype=torch.int64)
    for s in range(4):
        idx[s] = 2 * s if s < 2 else 2 * (3 - s) + 1
    table = torch.full((6,), -1, dtype=torch.int64)
    table[4] = 3
    assert idx.to(torch.int32).dtype == torch.int32 and idx.tolist() == [0, 2, 3, 1]
    assert table.tolist() == [-1, -1, -1, -1, 3, -1]
    marker = torch.zeros(4, dtype=torch.bfloat16)
    marker[1], marker[2] = float(3), float(7)
    logical = torch.zeros(3, 4, dtype=torch.bfloat16)
    logical[1] = marker
    outs = torch.zeros([2, 3, 4], dtype=torch.bfloat16)
    outs[:] = logical.unsqueeze(0).expand(2, -1, -1)
    stacked = torch.stack([marker, marker])
    want = np.zeros((2, 3, 4), np.float32)
    want[:, 1, 1:3] = [3.0, 7.0]
    assert outs.dtype == stacked.dtype == torch.bfloat16 and stacked.shape == (2, 4)
    np.testing.assert_array_equal(outs.numpy().astype(np.float32), want)


def test_golden_idioms_of_prefill_kv_allgather() -> None:
    """int32 arange -> remainder -> bf16, one column set per rank, one gathered copy broadcast to all."""
    values = torch.arange(2 * 3 * 5, dtype=torch.int32).remainder(7).reshape((2, 3, 5)).to(torch.bfloat16)
    for rank in range(2):
        values[rank, :, 0] = float(rank)
    tp, local_t, _ = values.shape
    group = torch.zeros([2, 6, 5], dtype=torch.bfloat16)
    group[:] = values.reshape(tp * local_t, 5).unsqueeze(0)
    want = (np.arange(30) % 7).reshape(2, 3, 5).astype(np.float32)
    want[:, :, 0] = [[0.0], [1.0]]
    assert values.dtype == group.dtype == torch.bfloat16
    np.testing.assert_array_equal(group.numpy().astype(np.float32), np.broadcast_to(want.reshape(1, 6, 5), (2, 6, 5)))


def test_generator_and_randperm_give_a_private_reproducible_stream() -> None:
    """``torch.Generator().manual_seed(s)`` returns the generator; ``randperm(n, generator=)`` is a permutation
    drawn from it (int64), the same for the same seed, and the global stream is untouched by it."""
    g = torch.Generator().manual_seed(20260510)
    assert isinstance(g, torch.Generator)
    p = torch.randperm(96, generator=g)
    assert p.dtype is torch.int64 and sorted(p.tolist()) == list(range(96))
    again = torch.randperm(96, generator=torch.Generator().manual_seed(20260510))
    assert torch.equal(p, again)
    assert not torch.equal(torch.randperm(96, generator=g), p)  # the stream moved on
    torch.manual_seed(3)
    first = torch.rand(4)
    torch.manual_seed(3)
    torch.randperm(10, generator=torch.Generator().manual_seed(1))
    assert torch.equal(torch.rand(4), first)
    assert torch.randperm(5, dtype=torch.int32).dtype is torch.int32


def test_fork_rng_restores_the_global_stream() -> None:
    torch.manual_seed(11)
    with torch.random.fork_rng():
        torch.rand(100)
    after = torch.rand(3)
    torch.manual_seed(11)
    assert torch.equal(torch.rand(3), after)


def test_outer_exp2_clamp_repeat_follow_torch() -> None:
    a = torch.tensor([1, 2, 3], dtype=torch.int32)
    b = torch.tensor([0.5, -1.0], dtype=torch.float32)
    o = torch.outer(a, b)
    assert o.dtype is torch.float32 and o.tolist() == [[0.5, -1.0], [1.0, -2.0], [1.5, -3.0]]
    with pytest.raises(RuntimeError, match="Expected 1-D argument self, but got 2-D"):
        torch.outer(torch.zeros(2, 2), b)
    assert torch.exp2(a).dtype is torch.float32 and torch.exp2(a).tolist() == [2.0, 4.0, 8.0]
    h = torch.tensor([0.3, -7.25, 10.0], dtype=torch.bfloat16)
    want = np.exp2(np.array([0.3, -7.25, 10.0], dtype=ml_dtypes.bfloat16).astype(np.float64))
    assert torch.exp2(h).dtype is torch.bfloat16
    np.testing.assert_array_equal(torch.exp2(h).numpy(), want.astype(ml_dtypes.bfloat16))
    x = torch.tensor([-3.0, 0.5, float("nan"), 9.0])
    np.testing.assert_array_equal(torch.clamp(x, min=-1.0, max=2.0).numpy(), [-1.0, 0.5, np.nan, 2.0])
    assert torch.clamp(x, min=5.0, max=1.0).tolist()[0] == 1.0  # min > max: every element is max
    assert torch.clamp(a, max=2).tolist() == [1, 2, 2] and torch.clamp(a, max=2).dtype is torch.int32
    assert torch.clamp(a, min=1.5).dtype is torch.float32  # a float bound promotes
    assert x.clamp(max=0.0).tolist()[0] == -3.0
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        torch.clamp(x)
    r = torch.tensor([[1, 2]]).repeat(2, 3)
    assert r.tolist() == [[1, 2, 1, 2, 1, 2], [1, 2, 1, 2, 1, 2]]
    assert torch.tensor([1, 2]).repeat(2, 1, 2).shape == (2, 1, 4)
    with pytest.raises(RuntimeError, match="can not be smaller"):
        torch.tensor([[1]]).repeat(2)


def test_device_frombuffer_and_untyped_storage() -> None:
    d = torch.device("cuda:1")
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")
    assert torch.device(torch.device("cpu")) == torch.device("cpu")
    t = torch.ones(2)
    assert t.to(torch.device("cpu")) is t
    raw = bytearray(np.arange(4, dtype=np.uint8).tobytes())
    view = torch.frombuffer(raw, dtype=torch.uint8, count=2, offset=1)
    assert view.tolist() == [1, 2]
    raw[1] = 9  # shares the buffer
    assert view.tolist() == [9, 2]
    base = torch.zeros(4, 4)
    assert base[2:].untyped_storage().data_ptr() == base.untyped_storage().data_ptr() == base.data_ptr()
    assert base[2:].data_ptr() != base.data_ptr()


def test_normal_repeat_interleave_and_scatter() -> None:
    torch.manual_seed(0)
    x = torch.empty(20000).normal_(2.0, 0.5)
    assert abs(x.mean().item() - 2.0) < 0.02 and abs(x.std().item() - 0.5) < 0.02
    t = torch.tensor([[1, 2], [3, 4]])
    assert t.repeat_interleave(2, dim=0).tolist() == [[1, 2], [1, 2], [3, 4], [3, 4]]
    assert t.repeat_interleave(2).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    assert t.repeat_interleave(torch.tensor([1, 2]), dim=1).tolist() == [[1, 2, 2], [3, 4, 4]]
    mask = torch.zeros(2, 4, dtype=torch.bool)
    mask.scatter_(dim=-1, index=torch.tensor([[1, 3], [0, 0]]), value=True)
    assert mask.tolist() == [[False, True, False, True], [True, False, False, False]]
    out = torch.zeros(3, 3).scatter(0, torch.tensor([[2, 0]]), torch.tensor([[5.0, 6.0, 7.0]]))
    assert out.tolist() == [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]
