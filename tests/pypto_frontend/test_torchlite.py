"""pldemu's torch stand-in against numpy (values) and torch's documented rules (dtypes, views)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pldemu.pypto.torchlite as torch
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
        torch.sort(grid())  # type: ignore[attr-defined]


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
