"""The built-in algorithms: RecordIO-protobuf, the first-party estimators, local refusals.

Requests are compared with SDK v2 in tests/compat/test_algorithms_compat.py; pulling their
images in Docker mode is tested in tests/docker/test_pull.py.
"""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import launchbay
from launchbay import Estimator
from launchbay.amazon.common import (
    RecordSet,
    read_records,
    write_numpy_to_dense_tensor,
    write_spmatrix_to_sparse_tensor,
)
from launchbay.errors import ConfigurationError

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
KMEANS_IMAGE = "174872318107.dkr.ecr.us-west-2.amazonaws.com/kmeans:1"
XGBOOST_IMAGE = "246618743249.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1"


def test_import_launchbay_stays_lazy_and_fast() -> None:
    code = (
        "import time, sys; t = time.perf_counter(); import launchbay; "
        "print(time.perf_counter() - t); "
        "print(sorted(m for m in sys.modules if m.startswith(('launchbay.amazon', "
        "'launchbay.local', 'numpy', 'boto3'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, modules = out.stdout.splitlines()
    assert modules == "[]"
    assert float(seconds) < 0.030
    assert launchbay.KMeans.__name__ == "KMeans"
    from launchbay.amazon.kmeans import KMeans

    assert KMeans is launchbay.KMeans and launchbay.RecordSet is RecordSet


def test_recordio_round_trip_dense_and_sparse() -> None:
    import scipy.sparse

    buffer = io.BytesIO()
    array = np.array([[1.5, -2.0], [0.0, 3.25]], dtype="float64")
    write_numpy_to_dense_tensor(buffer, array, np.array([1, -7]))
    data = buffer.getvalue()
    assert struct.unpack("<I", data[:4])[0] == 0xCED7230A and len(data) % 4 == 0
    records = read_records(io.BytesIO(data))
    assert [r.features["values"].float64_tensor.values for r in records] == array.tolist()
    assert [r.label["values"].int32_tensor.values for r in records] == [[1], [-7]]
    assert records[0].features["values"].WhichOneof("value") == "float64_tensor"

    sparse = scipy.sparse.csr_matrix(np.array([[0, 2.0, 0], [0, 0, 0]], dtype="float32"))
    buffer = io.BytesIO()
    write_spmatrix_to_sparse_tensor(buffer, sparse)
    first, empty = read_records(io.BytesIO(buffer.getvalue()))
    assert first.features["values"].float32_tensor.values == [2.0]
    assert first.features["values"].float32_tensor.keys == [1]
    assert first.features["values"].float32_tensor.shape == [3]
    assert empty.features["values"].float32_tensor.shape == [3]


def test_recordio_refusals_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="magic"):
        read_records(io.BytesIO(b"\x00" * 8))
    with pytest.raises(ConfigurationError, match="array.dtype"):
        write_numpy_to_dense_tensor(io.BytesIO(), np.zeros((2, 2), dtype="int8"))
    with pytest.raises(ConfigurationError, match="labels"):
        write_numpy_to_dense_tensor(io.BytesIO(), np.zeros((2, 2)), np.zeros((3,)))


def test_hyperparameter_errors_name_the_argument_and_what_is_accepted() -> None:
    with pytest.raises(ConfigurationError, match=r"Invalid k=1\..*above 1"):
        launchbay.KMeans(role=ROLE, instance_count=1, instance_type="ml.m5.xlarge", k=1)
    with pytest.raises(ConfigurationError, match="predictor_type.*one of 'binary_classifier'"):
        launchbay.LinearLearner(ROLE, 1, "ml.m5.xlarge", "classifier")
    with pytest.raises(ConfigurationError, match="num_classes"):
        launchbay.LinearLearner(ROLE, 1, "ml.m5.xlarge", predictor_type="multiclass_classifier")
    with pytest.raises(ConfigurationError, match="mini_batch_size"):
        launchbay.RandomCutForest(ROLE, 1, "ml.m5.xlarge").create_training_job_request(
            RecordSet("s3://bucket-a/m", 10, 2), mini_batch_size=5
        )
    knn = launchbay.KNN(ROLE, 1, "ml.m5.xlarge", 5, 100, "regressor")
    assert (knn.k, knn.sample_size, knn.predictor_type) == (5, 100, "regressor")


def test_record_set_for_a_local_job_is_a_file_prefix(home: Path) -> None:
    est = launchbay.PCA(instance_count=2, instance_type="local", num_components=2)
    records = est.record_set(np.arange(30, dtype="float32").reshape(10, 3), channel="test")
    assert records.s3_data_type == "S3Prefix" and records.channel == "test"
    folder = Path(records.s3_data.removeprefix("file://"))
    assert folder.is_relative_to(home) and sorted(p.name for p in folder.iterdir()) == [
        "matrix_0.pbr", "matrix_1.pbr"
    ]  # fmt: skip
    rows = [r for p in sorted(folder.iterdir()) for r in read_records(p.open("rb"))]
    assert len(rows) == 10


def test_local_process_refuses_a_builtin_algorithm_before_anything_starts(home: Path) -> None:
    est = launchbay.KMeans(instance_count=1, instance_type="local_process", k=2,
                           sagemaker_session=launchbay.Session(region_name="us-west-2"))  # fmt: skip
    records = RecordSet(f"file://{home}", 10, 2, s3_data_type="S3Prefix")
    with pytest.raises(ConfigurationError, match="built-in 'kmeans' algorithm") as caught:
        est.fit(records, mini_batch_size=2)
    assert "instance_type='local'" in str(caught.value) and caught.value.argument == "instance_type"
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())

    generic = Estimator(image_uri=XGBOOST_IMAGE, instance_count=1, instance_type="local_process")
    with pytest.raises(ConfigurationError, match="built-in 'xgboost' algorithm"):
        generic.create_training_job_request({"train": f"file://{home}"})


def test_builtin_algorithm_images_are_told_by_registry_and_repository() -> None:
    from launchbay._algorithm_images import builtin_algorithm

    assert builtin_algorithm(KMEANS_IMAGE) == "kmeans"
    assert builtin_algorithm(XGBOOST_IMAGE) == "xgboost"
    assert builtin_algorithm("123456789012.dkr.ecr.us-west-2.amazonaws.com/kmeans:1") is None
    assert builtin_algorithm("launchbay/pytorch-training:2.13.0-cpu-py311") is None


def test_local_session_is_a_session_with_v2_arguments() -> None:
    session = launchbay.LocalSession(disable_local_code=True)
    assert isinstance(session, launchbay.Session) and session.local_mode
    with pytest.raises(ConfigurationError, match="AWS_ENDPOINT_URL_S3"):
        launchbay.LocalSession(s3_endpoint_url="http://127.0.0.1:9000")
