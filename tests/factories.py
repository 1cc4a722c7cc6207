"""The one estimator factory of the tests (importable: ``tests/`` is on ``sys.path``).

``estimator(entry_point, source_dir, ...)`` makes a framework estimator for a local job:
PyTorch 2.8.0 on py312 (TensorFlow 2.19.0 with ``framework=TensorFlow``), no role, one
``local_process`` host. ``out`` sets ``output_path`` to ``file://<out>``. Every other keyword
is the estimator's own and wins over these defaults; a keyword given as ``OMIT`` is not
passed at all (the estimator's own default applies).

``sagemaker_estimator(...)`` makes one for a SageMaker job (a request, or moto): PyTorch 2.3
on py311 (TensorFlow 2.14 on py310), ``train.py`` in ``src``, the role ``ROLE``, one
``ml.m5.xlarge``; its keywords work the same way.

``job_spec(...)`` is that SageMaker job as the text of a YAML job spec (``launchbay submit``).

Test files bind what all their estimators share once, e.g.
``pytorch = functools.partial(estimator, source_dir=SCRIPTS, instance_count=2)``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

#: The training scripts of the ``local_process`` tests, which the Docker and Ray tests run too.
LOCAL_PROCESS_SCRIPTS = Path(__file__).parent / "integration" / "local_process_scripts"

#: 2 processes a host under torchrun, and under mpirun: the ``distribution`` of the 2x2 jobs.
TORCH_2X2 = {"torch_distributed": {"enabled": True, "processes_per_host": 2}}
MPI_2X2 = {"mpi": {"enabled": True, "processes_per_host": 2}}

#: A keyword's value that means: do not pass this keyword.
OMIT: Any = object()

#: The role of the SageMaker jobs of the tests.
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"

#: The framework and Python versions of each framework's estimators, for a SageMaker job.
SAGEMAKER_VERSIONS: dict[type, tuple[str, str]] = {
    PyTorch: ("2.3", "py311"),
    TensorFlow: ("2.14", "py310"),
}

#: The framework and Python versions each framework's estimators get unless told otherwise.
VERSIONS: dict[type, tuple[str, str]] = {
    PyTorch: ("2.8.0", "py312"),
    TensorFlow: ("2.19.0", "py312"),
}


def estimator(
    entry_point: str = "train.py",
    source_dir: str | Path | None = None,
    *,
    framework: type = PyTorch,
    out: str | Path | None = None,
    **kwargs: Any,
) -> Any:
    """A ``framework`` estimator for a local job (the module's docstring says the defaults)."""
    framework_version, py_version = VERSIONS[framework]
    options: dict[str, Any] = dict(
        entry_point=entry_point,
        role=None,
        instance_type="local_process",
        instance_count=1,
        framework_version=framework_version,
        py_version=py_version,
    )
    if source_dir is not None:
        options["source_dir"] = str(source_dir)
    if out is not None:
        options["output_path"] = f"file://{out}"
    options.update(kwargs)
    return framework(**{k: v for k, v in options.items() if v is not OMIT})


def sagemaker_arguments(
    entry_point: str = "train.py",
    source_dir: str | Path = "src",
    *,
    framework: type = PyTorch,
    **kwargs: Any,
) -> dict[str, Any]:
    """The keywords of :func:`sagemaker_estimator` as a dict, for tests that pass them on."""
    framework_version, py_version = SAGEMAKER_VERSIONS.get(framework, (OMIT, OMIT))
    options: dict[str, Any] = dict(
        entry_point=entry_point,
        source_dir=str(source_dir),
        role=ROLE,
        instance_count=1,
        instance_type="ml.m5.xlarge",
        framework_version=framework_version,
        py_version=py_version,
    )
    return {k: v for k, v in (options | kwargs).items() if v is not OMIT}


def sagemaker_estimator(*args: Any, framework: type = PyTorch, **kwargs: Any) -> Any:
    """A ``framework`` estimator for a SageMaker job (the module's docstring says the defaults)."""
    return framework(**sagemaker_arguments(*args, framework=framework, **kwargs))


def checkpointing_job(checkpoints: Path, out: Path, marker: str, **kwargs: Any) -> dict[str, Any]:
    """Keywords of :func:`estimator` for 2 hosts of ``checkpoint_on_sigterm.py`` under
    torch_distributed: they restore ``checkpoints`` (made here, holding ``old.ckpt``), write
    ``started-<host>`` in ``marker`` and checkpoint on SIGTERM; ``kwargs`` win."""
    checkpoints.mkdir()
    (checkpoints / "old.ckpt").write_text("from an earlier run")
    options: dict[str, Any] = dict(
        entry_point="checkpoint_on_sigterm.py",
        source_dir=str(LOCAL_PROCESS_SCRIPTS),
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 1}},
        hyperparameters={"marker": marker},
        checkpoint_s3_uri=f"file://{checkpoints}",
        output_path=f"file://{out}",
    )
    return options | kwargs


def classification_csv(directory: Path, rows: int = 200) -> str:
    """``train.csv`` in ``directory`` (made): label first, 4 features, the label a linear rule of
    the features; returns the directory's ``file://`` URI."""
    import numpy as np

    rng = np.random.default_rng(0)
    features = rng.normal(size=(rows, 4))
    labels = (features @ np.array([1.0, -2.0, 0.5, 1.5]) > 0).astype(float)
    directory.mkdir(parents=True, exist_ok=True)
    np.savetxt(directory / "train.csv", np.column_stack([labels, features]), delimiter=",")
    return f"file://{directory}"


#: The keywords a HuggingFace estimator of ``hf_train.py`` gets: 2 hosts under torchrun, offline.
TINY_BERT = dict(
    instance_count=2,
    distribution={"torch_distributed": {"enabled": True}},
    environment={"HF_HUB_OFFLINE": "1"},
    hyperparameters={"epochs": 2},
)


def tiny_bert_tokens(directory: Path) -> str:
    """``tokens.pt`` in ``directory`` (made): 16 sequences of 8 token ids below 64 and their 0/1
    labels, for ``hf_train.py``; returns the directory's ``file://`` URI."""
    import torch

    directory.mkdir()
    generator = torch.Generator().manual_seed(0)
    torch.save(
        {
            "input_ids": torch.randint(0, 64, (16, 8), generator=generator),
            "labels": torch.randint(0, 2, (16,), generator=generator),
        },
        directory / "tokens.pt",
    )
    return f"file://{directory}"


def source_dir(root: Path, train: str = "") -> Path:
    """``root/src`` made with a ``train.py`` that holds ``train``; returns the ``src``."""
    src = root / "src"
    src.mkdir()
    (src / "train.py").write_text(train)
    return src


def job_spec(extra: str = "", **fields: Any) -> str:
    """A YAML job spec of :func:`sagemaker_estimator`'s PyTorch job, one ``key: value`` a line.

    ``fields`` replace those lines (``OMIT`` drops one) or add to them; their values are
    written as they are (YAML text: ``'"2.3"'`` for a string that looks like a number).
    ``extra`` (dedented) follows, for nested fields.
    """
    lines: dict[str, Any] = dict(
        framework="pytorch",
        framework_version='"2.3"',
        py_version="py311",
        entry_point="train.py",
        source_dir="src",
        role=ROLE,
        instance_type="ml.m5.xlarge",
        instance_count=1,
    )
    text = "".join(f"{k}: {v}\n" for k, v in (lines | fields).items() if v is not OMIT)
    return text + textwrap.dedent(extra).lstrip("\n")


def local_job(tmp_path: Path, src: Path, name: str) -> tuple[Any, dict[str, Any]]:
    """A 2-host ``local_process`` job's ``LocalJob`` (not started) and its request."""
    from launchbay.backends.local.layout import JobLayout
    from launchbay.backends.local.record import LocalJob

    est = PyTorch(entry_point="train.py", source_dir=str(src), role=None,
                  instance_type="local_process", instance_count=2, framework_version="2.8.0",
                  py_version="py312", output_path=f"file://{tmp_path}/out")  # fmt: skip
    request = est.create_training_job_request(f"file://{src}", job_name=name)
    layout = JobLayout.create(str(tmp_path / "jobs"), name, ["algo-1", "algo-2"])
    return LocalJob(dict(request), layout, None, 1.0, lambda _job: None), dict(request)
