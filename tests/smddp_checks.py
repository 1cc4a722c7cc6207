"""Checks shared by the smdistributed stand-in tests (local_process and Docker).

The training scripts (tests/integration/local_process_scripts/smddp_*.py) train
the same two-layer network with plain SGD, each rank on its slice of every
global batch, and report their final parameters. :func:`reference` trains the
same network in this process on the whole global batches, from rank 0's
initial parameters: data parallel training must land on the same numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SCRIPTS = Path(__file__).parent / "integration" / "local_process_scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from smddp_data import dataset  # noqa: E402

#: The scripts' defaults.
BATCH, STEPS, LR = 16, 6, 0.1


def torch_layout_to_tf(params: dict) -> dict[str, np.ndarray]:
    """``hidden.weight``... (torch.nn.Linear, out x in) as ``w1``... (x @ w1 layout)."""
    return {
        "w1": np.asarray(params["hidden.weight"], dtype=np.float32).T,
        "b1": np.asarray(params["hidden.bias"], dtype=np.float32),
        "w2": np.asarray(params["out.weight"], dtype=np.float32).T,
        "b2": np.asarray(params["out.bias"], dtype=np.float32),
    }


def reference(initial: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Single-process SGD on the concatenated batches, from ``initial`` (``w1`` layout)."""
    import torch

    x, y = dataset(BATCH * STEPS)
    weights = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in initial.items()}
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        data, target = torch.from_numpy(x[rows]), torch.from_numpy(y[rows])
        hidden = torch.tanh(data @ weights["w1"] + weights["b1"])
        loss = torch.mean((hidden @ weights["w2"] + weights["b2"] - target) ** 2)
        grads = torch.autograd.grad(loss, list(weights.values()))
        with torch.no_grad():
            for weight, grad in zip(weights.values(), grads, strict=True):
                weight -= LR * grad
    return {k: v.detach().numpy() for k, v in weights.items()}


def check_training(reports: dict[int, dict], *, torch_layout: bool) -> None:
    """Every rank holds the same parameters, and they are single-process training's."""
    convert = torch_layout_to_tf if torch_layout else _as_arrays
    finals = {rank: convert(report["params"]) for rank, report in reports.items()}
    for rank, params in finals.items():
        for name, value in params.items():
            assert np.array_equal(value, finals[0][name]), (rank, name)
    initial = convert(reports[0]["initial"])
    expected = reference(initial)
    moved = max(float(np.abs(expected[k] - initial[k]).max()) for k in expected)
    assert moved > 1e-3  # training changed the parameters
    for name, value in expected.items():
        np.testing.assert_allclose(finals[0][name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def _as_arrays(params: dict) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}
