"""Built-in algorithms: launchbay sends the CreateTrainingJob request sagemaker==2.257.7 sends.

Two kinds of jobs, each built with both SDKs on the moto server of this directory and
compared key for key (:func:`harness.normalize`, :func:`harness.differences`):

* the generic ``Estimator(image_uri=image_uris.retrieve(<algorithm>, region, ...))`` with
  algorithm hyperparameters and channels (each SDK's own ``retrieve`` gives the image,
  so the images are compared too);
* the first-party estimators of ``sagemaker.amazon`` (``LinearLearner``, ``KMeans`` ...)
  trained with ``fit(record_set)``: their image, hyperparameters (strings, as v2 sends
  them), ``feature_dim``/``mini_batch_size`` and the ``RecordSet`` channels.
"""

from __future__ import annotations

import importlib
import io
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest

from .harness import (
    ACCOUNT,
    ROLE,
    differences,
    no_v2_telemetry,
    normalize,
    ours_session,
    record_create_training_job,
    v2_session,
)

BUCKET = f"sagemaker-us-west-2-{ACCOUNT}"
MANIFEST = f"s3://{BUCKET}/sagemaker-record-sets/LinearLearner-2024/.amazon.manifest"
PREFIX = f"s3://{BUCKET}/data/train/"


@dataclass(frozen=True)
class AlgorithmCase:
    """One job: ``estimator`` (a class name both SDKs have), its kwargs and what fit() gets.

    ``image`` is ``(algorithm, retrieve kwargs)`` for the generic Estimator: each SDK's
    ``image_uris.retrieve`` makes its ``image_uri``. ``records`` are RecordSet kwargs
    (one dict, or a list for several channels); ``inputs`` channels for the generic one
    (``("TrainingInput", kwargs)`` builds each SDK's class).
    """

    id: str
    estimator: str
    kwargs: dict[str, Any]
    image: tuple[str, dict[str, Any]] | None = None
    records: Any = None
    inputs: Any = None
    mini_batch_size: int | None = None
    region: str = "us-west-2"
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def job_name(self) -> str:
        return f"compat-alg-{self.id}"[:63]


CPU = {"instance_count": 1, "instance_type": "ml.m5.xlarge"}
TWO = {"instance_count": 2, "instance_type": "ml.c5.2xlarge"}


def _input(content_type: str, s3_data: str = PREFIX, **more: Any) -> tuple[str, dict]:
    """A case's ``TrainingInput`` of ``s3_data`` with ``content_type`` (and ``more``)."""
    return ("TrainingInput", {"s3_data": s3_data, "content_type": content_type, **more})


CASES = [
    AlgorithmCase(
        "xgboost-algorithm-mode",
        "Estimator",
        {
            **CPU,
            "hyperparameters": {
                "objective": "binary:logistic",
                "num_round": 50,
                "max_depth": 5,
                "eta": 0.2,
            },
        },
        image=("xgboost", {"version": "1.7-1"}),
        inputs={
            "train": _input("text/csv"),
            "validation": _input("text/csv", f"s3://{BUCKET}/data/val/"),
        },
        expect={
            "HyperParameters": {
                "objective": "binary:logistic",
                "num_round": "50",
                "max_depth": "5",
                "eta": "0.2",
            }
        },
    ),  # fmt: skip
    AlgorithmCase(
        "blazingtext-supervised",
        "Estimator",
        {
            **CPU,
            "hyperparameters": {
                "mode": "supervised",
                "epochs": 10,
                "word_ngrams": 2,
                "early_stopping": True,
            },
        },
        image=("blazingtext", {}),
        inputs={"train": _input("text/plain", distribution="FullyReplicated")},
    ),  # fmt: skip
    AlgorithmCase(
        "deepar",
        "Estimator",
        {
            **TWO,
            "hyperparameters": {
                "time_freq": "H",
                "context_length": 24,
                "prediction_length": 24,
                "epochs": 20,
            },
        },
        image=("forecasting-deepar", {}),
        region="eu-west-1",
        inputs={"train": PREFIX, "test": f"s3://{BUCKET}/data/test/"},
    ),  # fmt: skip
    AlgorithmCase(
        "image-classification-pipe",
        "Estimator",
        {
            "instance_count": 1,
            "instance_type": "ml.p3.2xlarge",
            "input_mode": "Pipe",
            "volume_size": 50,
            "hyperparameters": {
                "num_layers": 18,
                "image_shape": "3,224,224",
                "num_classes": 2,
                "num_training_samples": 100,
                "use_pretrained_model": 1,
            },
        },
        image=("image-classification", {}),
        inputs={"train": _input("application/x-recordio", record_wrapping="RecordIO")},
        expect={"AlgorithmSpecification.TrainingInputMode": "Pipe"},
    ),  # fmt: skip
    AlgorithmCase(
        "linear-learner-binary",
        "LinearLearner",
        {
            **CPU,
            "predictor_type": "binary_classifier",
            "epochs": 5,
            "use_bias": True,
            "learning_rate": 0.01,
            "early_stopping_tolerance": 1,
            "loss": "logistic",
        },
        records={"s3_data": MANIFEST, "num_records": 4000, "feature_dim": 30},
        expect={
            "HyperParameters": {
                "predictor_type": "binary_classifier",
                "epochs": "5",
                "use_bias": "True",
                "learning_rate": "0.01",
                "early_stopping_tolerance": "1.0",
                "loss": "logistic",
                "feature_dim": "30",
                "mini_batch_size": "1000",
            }
        },
    ),  # fmt: skip
    AlgorithmCase(
        "linear-learner-multiclass-channels",
        "LinearLearner",
        {
            **TWO,
            "predictor_type": "multiclass_classifier",
            "num_classes": 4,
            "output_path": f"s3://{BUCKET}/out",
            "max_run": 3600,
            "tags": [{"Key": "team", "Value": "ml"}],
        },
        records=[
            {"s3_data": MANIFEST, "num_records": 600, "feature_dim": 8},
            {
                "s3_data": PREFIX,
                "num_records": 100,
                "feature_dim": 8,
                "s3_data_type": "S3Prefix",
                "channel": "validation",
                "distribution": "FullyReplicated",
            },
        ],
        expect={"HyperParameters.mini_batch_size": "300"},
    ),  # fmt: skip
    AlgorithmCase(
        "kmeans",
        "KMeans",
        {
            **TWO,
            "k": 10,
            "init_method": "kmeans++",
            "max_iterations": 20,
            "tol": 0.01,
            "center_factor": 2,
            "eval_metrics": ["msd", "ssd"],
        },
        records={"s3_data": MANIFEST, "num_records": 1000, "feature_dim": 784},
        mini_batch_size=500,
        expect={
            "HyperParameters.eval_metrics": '["msd", "ssd"]',
            "HyperParameters.local_lloyd_max_iter": "20",
        },
    ),  # fmt: skip
    AlgorithmCase(
        "pca-randomized",
        "PCA",
        {
            **CPU,
            "num_components": 5,
            "algorithm_mode": "randomized",
            "subtract_mean": False,
            "extra_components": -1,
        },
        records={"s3_data": MANIFEST, "num_records": 120, "feature_dim": 50},
        expect={"HyperParameters.mini_batch_size": "120"},
    ),  # fmt: skip
    AlgorithmCase(
        "factorization-machines",
        "FactorizationMachines",
        {
            **CPU,
            "num_factors": 64,
            "predictor_type": "regressor",
            "epochs": 3,
            "bias_init_method": "normal",
            "factors_lr": 0.1,
        },
        records={"s3_data": MANIFEST, "num_records": 1000, "feature_dim": 2000},
        mini_batch_size=100,
    ),  # fmt: skip
    AlgorithmCase(
        "ntm",
        "NTM",
        {
            **CPU,
            "num_topics": 20,
            "encoder_layers": [100, 50],
            "epochs": 10,
            "optimizer": "adam",
            "batch_norm": True,
        },
        records={"s3_data": MANIFEST, "num_records": 1000, "feature_dim": 500},
        mini_batch_size=64,
    ),  # fmt: skip
    AlgorithmCase(
        "lda",
        "LDA",
        {
            "instance_type": "ml.c5.xlarge",
            "num_topics": 5,
            "alpha0": 1.0,
            "max_restarts": 2,
            "tol": 1e-5,
        },
        records={"s3_data": MANIFEST, "num_records": 200, "feature_dim": 100},
        mini_batch_size=50,
    ),  # fmt: skip
    AlgorithmCase(
        "randomcutforest",
        "RandomCutForest",
        {**CPU, "num_samples_per_tree": 512, "num_trees": 50, "eval_metrics": ["accuracy"]},
        records={"s3_data": MANIFEST, "num_records": 5000, "feature_dim": 1},
        expect={"HyperParameters.mini_batch_size": "1000"},
    ),  # fmt: skip
    AlgorithmCase(
        "knn",
        "KNN",
        {
            **CPU,
            "k": 5,
            "sample_size": 500,
            "predictor_type": "classifier",
            "dimension_reduction_type": "sign",
            "dimension_reduction_target": 3,
            "index_type": "faiss.IVFFlat",
            "faiss_index_ivf_nlists": "auto",
        },
        records={"s3_data": MANIFEST, "num_records": 500, "feature_dim": 10},
        mini_batch_size=100,
    ),  # fmt: skip
    AlgorithmCase(
        "ipinsights",
        "IPInsights",
        {**CPU, "num_entity_vectors": 10000, "vector_dim": 64, "epochs": 2, "learning_rate": 0.01},
        records={
            "s3_data": PREFIX,
            "num_records": 100,
            "feature_dim": 2,
            "s3_data_type": "S3Prefix",
        },
        mini_batch_size=1000,
    ),  # fmt: skip
    AlgorithmCase(
        "object2vec",
        "Object2Vec",
        {
            **CPU,
            "epochs": 3,
            "enc0_max_seq_len": 20,
            "enc0_vocab_size": 1000,
            "enc_dim": 16,
            "comparator_list": "hadamard,abs_diff",
            "enc0_network": "bilstm",
            "tied_token_embedding_weight": False,
        },
        records={
            "s3_data": PREFIX,
            "num_records": 100,
            "feature_dim": 20,
            "s3_data_type": "S3Prefix",
        },
        expect={"HyperParameters.mini_batch_size": "32"},
    ),  # fmt: skip
]
IDS = [case.id for case in CASES]


def _lookup(request: dict[str, Any], path: str) -> Any:
    value: Any = request
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _build(value: Any, sdk: str) -> Any:
    if isinstance(value, tuple):
        name, kwargs = value
        module = "sagemaker.inputs" if sdk == "v2" else "launchbay.inputs"
        return getattr(importlib.import_module(module), name)(**kwargs)
    if isinstance(value, dict):
        return {k: _build(v, sdk) for k, v in value.items()}
    return value


def _estimator_class(name: str, sdk: str) -> Any:
    if sdk == "v2":
        import sagemaker

        return sagemaker.estimator.Estimator if name == "Estimator" else getattr(sagemaker, name)
    import launchbay

    return getattr(launchbay, name)


def _records(case: AlgorithmCase, sdk: str) -> Any:
    if sdk == "v2":
        from sagemaker.amazon.amazon_estimator import RecordSet
    else:
        from launchbay.amazon.common import RecordSet
    if isinstance(case.records, list):
        return [RecordSet(**r) for r in case.records]
    return RecordSet(**case.records)


def _image(case: AlgorithmCase, sdk: str) -> str:
    assert case.image is not None
    framework, kwargs = case.image
    module = importlib.import_module(
        "sagemaker.image_uris" if sdk == "v2" else "launchbay.image_uris"
    )
    return str(module.retrieve(framework, case.region, **kwargs))


def v2_algorithm_request(case: AlgorithmCase) -> dict[str, Any]:
    session = v2_session(case.region)
    kwargs = {"role": ROLE, **case.kwargs}
    if case.image:
        kwargs["image_uri"] = _image(case, "v2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        estimator = _estimator_class(case.estimator, "v2")(sagemaker_session=session, **kwargs)
    with record_create_training_job(session) as calls, no_v2_telemetry():
        if case.image:
            estimator.fit(_build(case.inputs, "v2"), wait=False, job_name=case.job_name)
        else:
            estimator.fit(
                _records(case, "v2"), mini_batch_size=case.mini_batch_size, wait=False,
                job_name=case.job_name,
            )  # fmt: skip
    assert len(calls) == 1
    return calls[0]


def ours_algorithm_request(case: AlgorithmCase) -> dict[str, Any]:
    session = ours_session(case.region)
    kwargs = {"role": ROLE, **case.kwargs}
    if case.image:
        kwargs["image_uri"] = _image(case, "ours")
    estimator = _estimator_class(case.estimator, "ours")(sagemaker_session=session, **kwargs)
    if case.image:
        return dict(
            estimator.create_training_job_request(_build(case.inputs, "ours"), case.job_name)
        )
    return dict(
        estimator.create_training_job_request(
            _records(case, "ours"), job_name=case.job_name, mini_batch_size=case.mini_batch_size
        )
    )


def test_the_matrix_covers_generic_and_first_party_estimators() -> None:
    assert len(CASES) >= 10
    assert len(set(IDS)) == len(IDS)
    assert sum(1 for c in CASES if c.image) >= 4
    assert {c.estimator for c in CASES} >= {
        "LinearLearner", "KMeans", "PCA", "FactorizationMachines", "NTM", "LDA",
        "RandomCutForest", "KNN", "IPInsights", "Object2Vec",
    }  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_algorithm_request_matches_sdk_v2(case: AlgorithmCase) -> None:
    expected = v2_algorithm_request(case)
    for path, value in case.expect.items():
        assert _lookup(expected, path) == value, f"{path}: SDK v2 sent {_lookup(expected, path)!r}"
    ours = ours_algorithm_request(case)
    diffs = differences(normalize(expected), normalize(ours))
    assert not diffs, f"{case.id}: launchbay's request differs from SDK v2's:\n  " + "\n  ".join(
        diffs
    )


def test_record_set_writes_what_sdk_v2_writes() -> None:
    """record_set(): the same shards (byte for byte), manifest and RecordSet as SDK v2's."""
    import boto3
    import numpy as np

    rng = np.random.default_rng(7)
    train = rng.random((11, 4)).astype("float32")
    labels = rng.integers(0, 2, 11).astype("float32")
    kwargs = {"role": ROLE, "instance_count": 3, "instance_type": "ml.m5.xlarge",
              "predictor_type": "binary_classifier"}  # fmt: skip
    v2 = _estimator_class("LinearLearner", "v2")(
        sagemaker_session=v2_session("us-west-2"), **kwargs
    )
    ours = _estimator_class("LinearLearner", "ours")(
        sagemaker_session=ours_session("us-west-2"), **kwargs
    )
    theirs_set, our_set = (
        v2.record_set(train, labels),
        ours.record_set(train, labels, channel="train"),
    )
    for attribute in ("num_records", "feature_dim", "s3_data_type", "channel", "distribution"):
        assert getattr(our_set, attribute) == getattr(theirs_set, attribute), attribute
    s3 = boto3.client("s3", region_name="us-west-2")

    def objects(manifest_uri: str) -> tuple[list[Any], dict[str, bytes]]:
        bucket, key = manifest_uri[len("s3://") :].split("/", 1)
        import json

        listing = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        prefix = listing[0]["prefix"]
        p_bucket, p_key = prefix[len("s3://") :].split("/", 1)
        files = {
            n: s3.get_object(Bucket=p_bucket, Key=p_key + n)["Body"].read() for n in listing[1:]
        }
        return listing[1:], files

    their_names, their_files = objects(theirs_set.s3_data)
    our_names, our_files = objects(our_set.s3_data)
    assert our_names == their_names == ["matrix_0.pbr", "matrix_1.pbr", "matrix_2.pbr"]
    assert our_files == their_files
    assert our_set.s3_data.startswith(f"s3://{BUCKET}/sagemaker-record-sets/LinearLearner-")

    from launchbay.amazon.common import read_records

    rows = [r for n in our_names for r in read_records(io.BytesIO(our_files[n]))]
    decoded = np.array([r.features["values"].float32_tensor.values for r in rows], dtype="float32")
    assert (decoded == train).all()
    assert [r.label["values"].float32_tensor.values[0] for r in rows] == labels.tolist()
