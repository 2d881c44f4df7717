"""pllzoo.syncs: counting the operations that would make the host wait for a GPU, on a CPU."""

from __future__ import annotations

import torch

from pllzoo.syncs import class_counts, count_syncs, host_reads_are_free, host_side


def test_item_counts_one():
    x = torch.arange(5.0)
    with count_syncs(cuda=False) as syncs:
        x.sum().item()
    assert syncs.count == 1 and "_local_scalar_dense" in syncs.ops[0]


def test_python_conversions_and_tolist_count():
    x = torch.tensor([1.0, 2.0])
    with count_syncs(cuda=False) as syncs:
        float(x[0])
        int(x[1])
        bool(x.any())
        x.tolist()
        x.numpy()
    assert syncs.count == 5, syncs.ops


def test_data_dependent_shapes_count():
    x, mask = torch.randn(6), torch.tensor([True, False, True, False, False, True])
    with count_syncs(cuda=False) as syncs:
        x[mask]
    assert syncs.count >= 1 and any("index" in op or "nonzero" in op for op in syncs.ops)
    for fn in (lambda: torch.nonzero(x > 0), lambda: torch.unique(mask), lambda: x.masked_select(mask),
               lambda: torch.bincount(mask.long()), lambda: x.repeat_interleave(torch.tensor([1, 2, 0, 1, 1, 1])),
               lambda: torch.equal(x, x)):
        with count_syncs(cuda=False) as syncs:
            fn()
        assert syncs.count >= 1, fn
    with count_syncs(cuda=False) as syncs:
        x[mask] = 0.0  # index_put with a bool mask
    assert syncs.count >= 1


def test_arithmetic_and_fixed_shape_ops_count_zero():
    x, idx = torch.randn(8, 3), torch.tensor([2, 0, 5])
    with count_syncs(cuda=False) as syncs:
        y = (x * 2 + 1).exp().sum(1)
        y = torch.where(y > 3, y, torch.zeros_like(y))
        x.index_select(0, idx)
        x[idx] = 1.0  # index_put with long indices
        torch.sort(y, stable=True)
        class_counts(idx, 6)
        x.masked_fill(x > 0, 0.0)
    assert syncs.count == 0, syncs.ops


def test_host_side_blocks_are_not_counted_and_nesting():
    g = torch.Generator().manual_seed(0)
    with count_syncs(cuda=False) as outer:
        with host_side():
            int(torch.randint(10, (1,), generator=g))  # a host generator's draw, by design
        with count_syncs(cuda=False) as inner:
            torch.ones(2).sum().item()
    assert inner.count == 1 and outer.count == 1


def test_host_reads_are_free_only_on_cpu_outside_counting():
    assert host_reads_are_free(torch.device("cpu")) and host_reads_are_free("cpu")
    assert not host_reads_are_free("cuda")
    with count_syncs(cuda=False):
        assert not host_reads_are_free("cpu")  # code takes its accelerator path, which is what is counted
    assert host_reads_are_free("cpu")


def test_class_counts_equals_bincount():
    labels = torch.randint(0, 7, (100,), generator=torch.Generator().manual_seed(3))
    assert torch.equal(class_counts(labels, 9), torch.bincount(labels, minlength=9))
    assert class_counts(labels, 9).dtype == torch.long


def test_cpu_print_and_format_count():
    """An outside review: ``t.cpu()`` (a blocking copy on CUDA) and printing or formatting a tensor passed a CPU
    check unseen, since on a CPU tensor they dispatch no op."""
    import io

    x = torch.tensor([1.0, 2.0])
    for fn in (lambda: x.cpu(), lambda: print(x, file=io.StringIO()), lambda: f"{x.sum():.3f}"):
        with count_syncs(cuda=False) as syncs:
            fn()
        assert syncs.count >= 1, fn
    with host_side(), count_syncs(cuda=False) as syncs:
        x.cpu()
    assert syncs.count == 0
