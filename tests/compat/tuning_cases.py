"""Tuning calls described without reference to either SDK (see :mod:`.tuning_harness`).

Objects each SDK has its own class for are ``(class_name, kwargs)`` tuples:
estimators as ``("PyTorch", {...})`` (the request harness's :class:`~.harness.Case`
builds them), ranges and tuning settings by their class name in
:data:`.tuning_harness.TUNING_CLASSES`. ``expect`` pins what SDK v2 sends for the
feature the case is about (dotted paths into the CreateHyperParameterTuningJob request).
"""

from __future__ import annotations

from .cases import IMAGE, PT, PT_P4D, PT_SMDDP, SMDDP, TF_CPU, TORCH_DISTRIBUTED, VPC
from .tuning_harness import TuningCase

LR = ("ContinuousParameter", {"min_value": 1e-5, "max_value": 0.1, "scaling_type": "Logarithmic"})
EPOCHS = ("IntegerParameter", {"min_value": 1, "max_value": 20})
OPTIMIZER = ("CategoricalParameter", {"values": ["adam", "sgd", "adamw"]})
BATCH = ("CategoricalParameter", {"values": [32, 64, 128]})
METRICS = [
    {"Name": "validation:loss", "Regex": "val_loss=([0-9\\.]+)"},
    {"Name": "validation:accuracy", "Regex": "val_acc=([0-9\\.]+)"},
]
RANGES = {"lr": LR, "epochs": EPOCHS, "optimizer": OPTIMIZER}
TUNER = {
    "objective_metric_name": "validation:accuracy",
    "hyperparameter_ranges": RANGES,
    "metric_definitions": METRICS,
    "max_jobs": 8,
    "max_parallel_jobs": 2,
}
PT_HPS = {**PT, "hyperparameters": {"epochs": 5, "batch-size": 64, "model": "resnet"}}
DATA = "s3://data-bucket/train"

CASES = [
    TuningCase(
        id="bayesian-pytorch",
        estimators={None: ("PyTorch", PT_HPS)},
        tuner=TUNER,
        inputs=DATA,
        expect={
            "HyperParameterTuningJobConfig.Strategy": "Bayesian",
            "HyperParameterTuningJobConfig.ParameterRanges.CategoricalParameterRanges.0.Values.0": '"adam"',
            "TrainingJobDefinition.StaticHyperParameters.sagemaker_estimator_module": '"sagemaker.pytorch.estimator"',
        },
    ),
    TuningCase(
        id="random-seed-runtime-minimize",
        estimators={None: ("PyTorch", PT)},
        tuner={
            **TUNER,
            "strategy": "Random",
            "random_seed": 42,
            "objective_type": "Minimize",
            "objective_metric_name": "validation:loss",
            "max_runtime_in_seconds": 7200,
        },  # fmt: skip
        expect={
            "HyperParameterTuningJobConfig.RandomSeed": 42,
            "HyperParameterTuningJobConfig.ResourceLimits.MaxRuntimeInSeconds": 7200,
        },
    ),
    TuningCase(
        id="hyperband-strategy-config",
        estimators={None: ("PyTorch", PT_HPS)},
        tuner={
            **TUNER,
            "strategy": "Hyperband",
            "strategy_config": (
                "StrategyConfig",
                {
                    "hyperband_strategy_config": (
                        "HyperbandStrategyConfig",
                        {"max_resource": 30, "min_resource": 3},
                    )
                },
            ),
        },
        inputs=DATA,
        expect={
            "HyperParameterTuningJobConfig.StrategyConfig.HyperbandStrategyConfig.MaxResource": 30,
        },
    ),
    TuningCase(
        id="grid-categorical",
        estimators={None: ("PyTorch", PT)},
        tuner={
            "objective_metric_name": "validation:accuracy",
            "hyperparameter_ranges": {"optimizer": OPTIMIZER, "batch-size": BATCH},
            "metric_definitions": METRICS,
            "strategy": "Grid",
            "max_jobs": 9,
        },  # fmt: skip
        expect={"HyperParameterTuningJobConfig.ResourceLimits.MaxNumberOfTrainingJobs": 9},
    ),
    TuningCase(
        id="grid-without-max-jobs",
        estimators={None: ("PyTorch", PT)},
        tuner={
            "objective_metric_name": "validation:accuracy",
            "hyperparameter_ranges": {"optimizer": OPTIMIZER},
            "metric_definitions": METRICS,
            "strategy": "Grid",
        },  # fmt: skip
        improvements=("grid-max-jobs-omitted",),
    ),
    TuningCase(
        id="warm-start-identical-two-parents",
        estimators={None: ("PyTorch", PT_HPS)},
        tuner={
            **TUNER,
            "warm_start_config": (
                "WarmStartConfig",
                {
                    "warm_start_type": ("WarmStartTypes", "IDENTICAL_DATA_AND_ALGORITHM"),
                    "parents": ["parent-tuning-b", "parent-tuning-a"],
                },
            ),
        },  # fmt: skip
        inputs=DATA,
        expect={"WarmStartConfig.WarmStartType": "IdenticalDataAndAlgorithm"},
    ),
    TuningCase(
        id="warm-start-transfer-learning",
        estimators={None: ("PyTorch", PT)},
        tuner={
            **TUNER,
            "warm_start_config": (
                "WarmStartConfig",
                {
                    "warm_start_type": ("WarmStartTypes", "TRANSFER_LEARNING"),
                    "parents": ["old-tuning"],
                },
            ),
        },
        expect={
            "WarmStartConfig.ParentHyperParameterTuningJobs.0.HyperParameterTuningJobName": "old-tuning"
        },
    ),
    TuningCase(
        id="completion-criteria",
        estimators={None: ("PyTorch", PT)},
        tuner={
            **TUNER,
            "completion_criteria_config": (
                "TuningJobCompletionCriteriaConfig",
                {
                    "max_number_of_training_jobs_not_improving": 5,
                    "complete_on_convergence": True,
                    "target_objective_metric_value": 0.95,
                },
            ),
        },  # fmt: skip
        expect={
            "HyperParameterTuningJobConfig.TuningJobCompletionCriteria.ConvergenceDetected.CompleteOnConvergence": "Enabled",
            "HyperParameterTuningJobConfig.TuningJobCompletionCriteria.BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving": 5,
        },
    ),
    TuningCase(
        id="static-hyperparameters-torch-distributed",
        estimators={
            None: (
                "PyTorch",
                {
                    **PT_P4D,
                    "distribution": TORCH_DISTRIBUTED,
                    "hyperparameters": {"epochs": 3, "batch-size": 256},
                },
            )
        },
        tuner={**TUNER, "max_parallel_jobs": 1},
        inputs={"train": DATA, "test": "s3://data-bucket/test"},
        expect={
            "TrainingJobDefinition.StaticHyperParameters.sagemaker_torch_distributed_enabled": "true",
            "TrainingJobDefinition.StaticHyperParameters.batch-size": "256",
            "TrainingJobDefinition.HyperParameterTuningResourceConfig.InstanceCount": 2,
        },
    ),  # fmt: skip
    TuningCase(
        id="static-hyperparameters-smdistributed",
        estimators={None: ("PyTorch", {**PT_SMDDP, "distribution": SMDDP})},
        tuner=TUNER,
        expect={
            "TrainingJobDefinition.StaticHyperParameters.sagemaker_distributed_dataparallel_enabled": "true",
        },
    ),
    TuningCase(
        id="tags-tuner-and-estimator",
        estimators={
            None: (
                "PyTorch",
                {
                    **PT,
                    "tags": [{"Key": "team", "Value": "vision"}, {"Key": "shared", "Value": "yes"}],
                },
            )
        },
        tuner={**TUNER, "tags": {"project": "tuning", "shared": "yes"}},
        expect={"Tags.0.Key": "project", "Tags.2.Key": "team"},
    ),  # fmt: skip
    TuningCase(
        id="create-two-estimators",
        estimators={"pytorch": ("PyTorch", PT_HPS), "tensorflow": ("TensorFlow", TF_CPU)},
        tuner={
            "objective_metric_name_dict": {
                "pytorch": "validation:accuracy",
                "tensorflow": "val_acc",
            },
            "hyperparameter_ranges_dict": {"pytorch": RANGES, "tensorflow": {"learning_rate": LR}},
            "metric_definitions_dict": {
                "pytorch": METRICS,
                "tensorflow": [{"Name": "val_acc", "Regex": "acc: ([0-9.]+)"}],
            },
            "max_jobs": 10,
            "max_parallel_jobs": 3,
            "base_tuning_job_name": "multi",
        },
        inputs={"pytorch": DATA, "tensorflow": {"training": "s3://data-bucket/tf"}},
        include_cls_metadata={"tensorflow": True},
        expect={
            "TrainingJobDefinitions.1.DefinitionName": "tensorflow",
            "TrainingJobDefinitions.0.TuningObjective.MetricName": "validation:accuracy",
        },
    ),  # fmt: skip
    TuningCase(
        id="early-stopping-auto",
        estimators={None: ("PyTorch", PT_HPS)},
        tuner={**TUNER, "early_stopping_type": "Auto"},
        expect={"HyperParameterTuningJobConfig.TrainingJobEarlyStoppingType": "Auto"},
    ),
    TuningCase(
        id="autotune-keep-static",
        estimators={None: ("PyTorch", PT_HPS)},
        tuner={
            "objective_metric_name": "validation:accuracy",
            "hyperparameter_ranges": None,
            "metric_definitions": METRICS,
            "autotune": True,
            "hyperparameters_to_keep_static": [
                "epochs",
                "sagemaker_program",
                "sagemaker_submit_directory",
            ],
        },  # fmt: skip
        expect={
            "Autotune.Mode": "Enabled",
            "TrainingJobDefinition.StaticHyperParameters.epochs": "5",
        },
    ),
    TuningCase(
        id="generic-estimator-with-class-metadata",
        estimators={
            None: (
                "Estimator",
                {
                    "image_uri": IMAGE,
                    "instance_type": "ml.m5.xlarge",
                    "instance_count": 1,
                    "hyperparameters": {"depth": 6},
                },
            )
        },
        tuner={**TUNER, "hyperparameter_ranges": {"eta": LR, "booster": OPTIMIZER}},
        include_cls_metadata=True,
        expect={
            "TrainingJobDefinition.StaticHyperParameters.sagemaker_estimator_class_name": '"Estimator"',
            "HyperParameterTuningJobConfig.ParameterRanges.CategoricalParameterRanges.0.Values.0": "adam",
        },
    ),  # fmt: skip
    TuningCase(
        id="isolation-spot-checkpoints-vpc-kms",
        estimators={
            None: (
                "PyTorch",
                {
                    **PT_HPS,
                    **VPC,
                    "enable_network_isolation": True,
                    "use_spot_instances": True,
                    "max_wait": 7200,
                    "max_run": 3600,
                    "checkpoint_s3_uri": "s3://ckpt-bucket/run",
                    "volume_kms_key": "arn:aws:kms:us-west-2:123456789012:key/abc",
                    "environment": {"A": "1"},
                    "max_retry_attempts": 2,
                    "encrypt_inter_container_traffic": True,
                },
            )
        },
        tuner=TUNER,
        inputs=DATA,
        expect={
            "TrainingJobDefinition.EnableManagedSpotTraining": True,
            "TrainingJobDefinition.RetryStrategy.MaximumRetryAttempts": 2,
        },
    ),  # fmt: skip
]
