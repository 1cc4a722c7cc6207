"""The first-party algorithm estimators of SDK v2's ``sagemaker.amazon``, one class each.

Each class names its algorithm (``repo_name``, the ``image_uris.retrieve`` name), its
hyperparameters (attribute, name sent, type, accepted values; SDK v2's names, types and
limits) in SDK v2's positional order, and its ``mini_batch_size`` rule. The modules
``launchbay.amazon.linear_learner``, ``kmeans``, ... re-export them under v2's paths.
"""

from __future__ import annotations

import logging
from typing import Any

from launchbay.amazon.amazon_estimator import AmazonAlgorithmEstimatorBase
from launchbay.amazon.amazon_estimator import Hyperparameter as H
from launchbay.errors import ConfigurationError

__all__ = [
    "FactorizationMachines",
    "IPInsights",
    "KMeans",
    "KNN",
    "LDA",
    "LinearLearner",
    "NTM",
    "Object2Vec",
    "PCA",
    "RandomCutForest",
]

logger = logging.getLogger("launchbay.amazon")

_OPTIMIZERS = ("adagrad", "adam", "rmsprop", "sgd", "adadelta")


class _TrainRecordsBatch(AmazonAlgorithmEstimatorBase):
    """Algorithms whose default ``mini_batch_size`` depends on the train records per instance."""

    def _mini_batch_size_for(self, records: Any, given: int | None) -> int | None:
        return given or self._default_mini_batch_size(records.num_records)


def _in_range(argument: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise ConfigurationError.invalid(argument, value, f"an integer from {low} to {high}")


# fmt: off
class LinearLearner(_TrainRecordsBatch):
    """Linear models: binary or multiclass classification and regression (``linear-learner``)."""

    repo_name = "linear-learner"
    DEFAULT_MINI_BATCH_SIZE = 1000
    _algorithm_arguments = (
        "predictor_type", "binary_classifier_model_selection_criteria", "target_recall",
        "target_precision", "positive_example_weight_mult", "epochs", "use_bias", "num_models",
        "num_calibration_samples", "init_method", "init_scale", "init_sigma", "init_bias",
        "optimizer", "loss", "wd", "l1", "momentum", "learning_rate", "beta_1", "beta_2",
        "bias_lr_mult", "bias_wd_mult", "use_lr_scheduler", "lr_scheduler_step",
        "lr_scheduler_factor", "lr_scheduler_minimum_lr", "normalize_data", "normalize_label",
        "unbias_data", "unbias_label", "num_point_for_scaler", "margin", "quantile",
        "loss_insensitivity", "huber_delta", "early_stopping_patience",
        "early_stopping_tolerance", "num_classes", "accuracy_top_k", "f_beta",
        "balance_multiclass_weights",
    )
    predictor_type = H("predictor_type", str, ("binary_classifier", "regressor", "multiclass_classifier"))
    binary_classifier_model_selection_criteria = H(
        "binary_classifier_model_selection_criteria", str,
        ("accuracy", "f1", "f_beta", "precision_at_target_recall", "recall_at_target_precision",
         "cross_entropy_loss", "loss_function"))
    target_recall = H("target_recall", float, ">0", "<1")
    target_precision = H("target_precision", float, ">0", "<1")
    positive_example_weight_mult = H("positive_example_weight_mult", str)
    epochs = H("epochs", int, ">0")
    use_bias = H("use_bias", bool)
    num_models = H("num_models", int, ">0")
    num_calibration_samples = H("num_calibration_samples", int, ">0")
    init_method = H("init_method", str, ("uniform", "normal"))
    init_scale = H("init_scale", float, ">0")
    init_sigma = H("init_sigma", float, ">0")
    init_bias = H("init_bias", float)
    optimizer = H("optimizer", str, ("sgd", "adam", "rmsprop", "auto"))
    loss = H("loss", str, (
        "logistic", "squared_loss", "absolute_loss", "hinge_loss", "eps_insensitive_squared_loss",
        "eps_insensitive_absolute_loss", "quantile_loss", "huber_loss", "softmax_loss", "auto"))
    wd = H("wd", float, ">=0")
    l1 = H("l1", float, ">=0")
    momentum = H("momentum", float, ">=0", "<1")
    learning_rate = H("learning_rate", float, ">0")
    beta_1 = H("beta_1", float, ">=0", "<1")
    beta_2 = H("beta_2", float, ">=0", "<1")
    bias_lr_mult = H("bias_lr_mult", float, ">0")
    bias_wd_mult = H("bias_wd_mult", float, ">=0")
    use_lr_scheduler = H("use_lr_scheduler", bool)
    lr_scheduler_step = H("lr_scheduler_step", int, ">0")
    lr_scheduler_factor = H("lr_scheduler_factor", float, ">0", "<1")
    lr_scheduler_minimum_lr = H("lr_scheduler_minimum_lr", float, ">0")
    normalize_data = H("normalize_data", bool)
    normalize_label = H("normalize_label", bool)
    unbias_data = H("unbias_data", bool)
    unbias_label = H("unbias_label", bool)
    num_point_for_scaler = H("num_point_for_scaler", int, ">0")
    margin = H("margin", float, ">=0")
    quantile = H("quantile", float, ">0", "<1")
    loss_insensitivity = H("loss_insensitivity", float, ">0")
    huber_delta = H("huber_delta", float, ">=0")
    early_stopping_patience = H("early_stopping_patience", int, ">0")
    early_stopping_tolerance = H("early_stopping_tolerance", float, ">0")
    num_classes = H("num_classes", int, ">0", "<=1000000")
    accuracy_top_k = H("accuracy_top_k", int, ">0", "<=1000000")
    f_beta = H("f_beta", float, ">0")
    balance_multiclass_weights = H("balance_multiclass_weights", bool)

    def _check_algorithm_arguments(self) -> None:
        if self.predictor_type == "multiclass_classifier" and (
            self.num_classes is None or self.num_classes < 3
        ):
            raise ConfigurationError.invalid(
                "num_classes", self.num_classes,
                "an integer above 2 with predictor_type='multiclass_classifier'")


class KMeans(AmazonAlgorithmEstimatorBase):
    """k-means clustering (``kmeans``)."""

    repo_name = "kmeans"
    _algorithm_arguments = (
        "k", "init_method", "max_iterations", "tol", "num_trials", "local_init_method",
        "half_life_time_size", "epochs", "center_factor", "eval_metrics",
    )
    k = H("k", int, ">1")
    init_method = H("init_method", str, ("random", "kmeans++"))
    max_iterations = H("local_lloyd_max_iter", int, ">0")
    tol = H("local_lloyd_tol", float, ">=0", "<=1")
    num_trials = H("local_lloyd_num_trials", int, ">0")
    local_init_method = H("local_lloyd_init_method", str, ("random", "kmeans++"))
    half_life_time_size = H("half_life_time_size", int, ">=0")
    epochs = H("epochs", int, ">0")
    center_factor = H("extra_center_factor", int, ">0")
    eval_metrics = H("eval_metrics", list, accepted='a list of "msd" and "ssd"')

    def hyperparameters(self) -> dict[str, str]:
        """As the base's, with ``force_dense="True"``: k-means reads Record data dense."""
        return {"force_dense": "True", **super().hyperparameters()}

    def _check_algorithm_arguments(self) -> None:
        if self.eval_metrics is not None and not set(self.eval_metrics) <= {"msd", "ssd"}:
            raise ConfigurationError.invalid("eval_metrics", self.eval_metrics, 'a list of "msd" and "ssd"')


class PCA(_TrainRecordsBatch):
    """Principal component analysis (``pca``)."""

    repo_name = "pca"
    DEFAULT_MINI_BATCH_SIZE = 500
    _algorithm_arguments = ("num_components", "algorithm_mode", "subtract_mean", "extra_components")
    num_components = H("num_components", int, ">0")
    algorithm_mode = H("algorithm_mode", str, ("regular", "randomized"))
    subtract_mean = H("subtract_mean", bool)
    extra_components = H("extra_components", int, ">=-1",
                         accepted="an integer at least 0, or -1")


class FactorizationMachines(AmazonAlgorithmEstimatorBase):
    """Factorization machines for classification and regression (``factorization-machines``)."""

    repo_name = "factorization-machines"
    _algorithm_arguments = (
        "num_factors", "predictor_type", "epochs", "clip_gradient", "eps", "rescale_grad",
        "bias_lr", "linear_lr", "factors_lr", "bias_wd", "linear_wd", "factors_wd",
        "bias_init_method", "bias_init_scale", "bias_init_sigma", "bias_init_value",
        "linear_init_method", "linear_init_scale", "linear_init_sigma", "linear_init_value",
        "factors_init_method", "factors_init_scale", "factors_init_sigma", "factors_init_value",
    )
    num_factors = H("num_factors", int, ">0")
    predictor_type = H("predictor_type", str, ("binary_classifier", "regressor"))
    epochs = H("epochs", int, ">0")
    clip_gradient = H("clip_gradient", float)
    eps = H("eps", float)
    rescale_grad = H("rescale_grad", float)
    bias_lr = H("bias_lr", float, ">=0")
    linear_lr = H("linear_lr", float, ">=0")
    factors_lr = H("factors_lr", float, ">=0")
    bias_wd = H("bias_wd", float, ">=0")
    linear_wd = H("linear_wd", float, ">=0")
    factors_wd = H("factors_wd", float, ">=0")
    bias_init_method = H("bias_init_method", str, ("normal", "uniform", "constant"))
    bias_init_scale = H("bias_init_scale", float, ">=0")
    bias_init_sigma = H("bias_init_sigma", float, ">=0")
    bias_init_value = H("bias_init_value", float)
    linear_init_method = H("linear_init_method", str, ("normal", "uniform", "constant"))
    linear_init_scale = H("linear_init_scale", float, ">=0")
    linear_init_sigma = H("linear_init_sigma", float, ">=0")
    linear_init_value = H("linear_init_value", float)
    factors_init_method = H("factors_init_method", str, ("normal", "uniform", "constant"))
    factors_init_scale = H("factors_init_scale", float, ">=0")
    factors_init_sigma = H("factors_init_sigma", float, ">=0")
    factors_init_value = H("factors_init_value", float)


class NTM(AmazonAlgorithmEstimatorBase):
    """Neural topic model (``ntm``)."""

    repo_name = "ntm"
    _algorithm_arguments = (
        "num_topics", "encoder_layers", "epochs", "encoder_layers_activation", "optimizer",
        "tolerance", "num_patience_epochs", "batch_norm", "rescale_gradient", "clip_gradient",
        "weight_decay", "learning_rate",
    )
    num_topics = H("num_topics", int, ">=2", "<=1000")
    encoder_layers = H("encoder_layers", list, accepted="a list of positive integers")
    epochs = H("epochs", int, ">=1", "<=100")
    encoder_layers_activation = H("encoder_layers_activation", str, ("sigmoid", "tanh", "relu"))
    optimizer = H("optimizer", str, _OPTIMIZERS)
    tolerance = H("tolerance", float, ">=1e-6", "<=0.1")
    num_patience_epochs = H("num_patience_epochs", int, ">=1", "<=10")
    batch_norm = H("batch_norm", bool)
    rescale_gradient = H("rescale_gradient", float, ">=1e-3", "<=1.0")
    clip_gradient = H("clip_gradient", float, ">=1e-3")
    weight_decay = H("weight_decay", float, ">=0.0", "<=1.0")
    learning_rate = H("learning_rate", float, ">=1e-6", "<=1.0")

    def _mini_batch_size_for(self, records: Any, given: int | None) -> int | None:
        _in_range("mini_batch_size", given, 1, 10000)
        return given


class LDA(AmazonAlgorithmEstimatorBase):
    """Latent Dirichlet allocation (``lda``): one instance only, ``mini_batch_size`` required."""

    repo_name = "lda"
    _positional = ("role", "instance_type")
    _algorithm_arguments = ("num_topics", "alpha0", "max_restarts", "max_iterations", "tol")
    num_topics = H("num_topics", int, ">0")
    alpha0 = H("alpha0", float, ">0")
    max_restarts = H("max_restarts", int, ">0")
    max_iterations = H("max_iterations", int, ">0")
    tol = H("tol", float, ">0")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        count = kwargs.pop("instance_count", 1)
        if count != 1:
            logger.warning("LDA trains on a single instance only: instance_count=%r becomes 1.", count)
        super().__init__(*args, instance_count=1, **kwargs)

    def _mini_batch_size_for(self, records: Any, given: int | None) -> int | None:
        if given is None:
            raise ConfigurationError.invalid(
                "mini_batch_size", None, "a positive integer (LDA has no default)")
        return given


class RandomCutForest(AmazonAlgorithmEstimatorBase):
    """Anomaly detection with random cut forests (``randomcutforest``)."""

    repo_name = "randomcutforest"
    MINI_BATCH_SIZE = 1000
    _algorithm_arguments = ("num_samples_per_tree", "num_trees", "eval_metrics")
    feature_dim = H("feature_dim", int, ">=1", "<=10000")
    num_samples_per_tree = H("num_samples_per_tree", int, ">=1", "<=2048")
    num_trees = H("num_trees", int, ">=50", "<=1000")
    eval_metrics = H("eval_metrics", list,
                     accepted='a list of "accuracy" and "precision_recall_fscore"')

    def _mini_batch_size_for(self, records: Any, given: int | None) -> int | None:
        if given is not None and given != self.MINI_BATCH_SIZE:
            raise ConfigurationError.invalid(
                "mini_batch_size", given, f"{self.MINI_BATCH_SIZE} (Random Cut Forest's fixed size)")
        return self.MINI_BATCH_SIZE


class KNN(AmazonAlgorithmEstimatorBase):
    """k-nearest neighbours classification and regression (``knn``)."""

    repo_name = "knn"
    _algorithm_arguments = (
        "k", "sample_size", "predictor_type", "dimension_reduction_type",
        "dimension_reduction_target", "index_type", "index_metric", "faiss_index_ivf_nlists",
        "faiss_index_pq_m",
    )
    k = H("k", int, ">=1")
    sample_size = H("sample_size", int, ">=1")
    predictor_type = H("predictor_type", str, ("classifier", "regressor"))
    dimension_reduction_type = H("dimension_reduction_type", str, ("sign", "fjlt"))
    dimension_reduction_target = H("dimension_reduction_target", int, ">=1")
    index_type = H("index_type", str, ("faiss.Flat", "faiss.IVFFlat", "faiss.IVFPQ"))
    index_metric = H("index_metric", str, ("COSINE", "INNER_PRODUCT", "L2"))
    faiss_index_ivf_nlists = H("faiss_index_ivf_nlists", str)
    faiss_index_pq_m = H("faiss_index_pq_m", int, ">=1")

    def _check_algorithm_arguments(self) -> None:
        if self.dimension_reduction_type and not self.dimension_reduction_target:
            raise ConfigurationError.invalid(
                "dimension_reduction_target", self.dimension_reduction_target,
                "a positive integer when dimension_reduction_type is set")


class IPInsights(AmazonAlgorithmEstimatorBase):
    """Embeddings of IPv4 addresses and entities, for anomaly scores (``ipinsights``)."""

    repo_name = "ipinsights"
    MINI_BATCH_SIZE = 10000
    _algorithm_arguments = (
        "num_entity_vectors", "vector_dim", "batch_metrics_publish_interval", "epochs",
        "learning_rate", "num_ip_encoder_layers", "random_negative_sampling_rate",
        "shuffled_negative_sampling_rate", "weight_decay",
    )
    num_entity_vectors = H("num_entity_vectors", int, ">=1", "<=250000000")
    vector_dim = H("vector_dim", int, ">=4", "<=4096")
    batch_metrics_publish_interval = H("batch_metrics_publish_interval", int, ">=1")
    epochs = H("epochs", int, ">=1")
    learning_rate = H("learning_rate", float, ">=1e-6", "<=10.0")
    num_ip_encoder_layers = H("num_ip_encoder_layers", int, ">=0", "<=100")
    random_negative_sampling_rate = H("random_negative_sampling_rate", int, ">=0", "<=500")
    shuffled_negative_sampling_rate = H("shuffled_negative_sampling_rate", int, ">=0", "<=500")
    weight_decay = H("weight_decay", float, ">=0.0", "<=10.0")

    def _mini_batch_size_for(self, records: Any, given: int | None) -> int | None:
        _in_range("mini_batch_size", given, 1, 500000)
        return given


class Object2Vec(AmazonAlgorithmEstimatorBase):
    """Embeddings of pairs of objects: sentences, users and items, ... (``object2vec``)."""

    repo_name = "object2vec"
    MINI_BATCH_SIZE = 32
    _algorithm_arguments = (
        "epochs", "enc0_max_seq_len", "enc0_vocab_size", "enc_dim", "mini_batch_size",
        "early_stopping_patience", "early_stopping_tolerance", "dropout", "weight_decay",
        "bucket_width", "num_classes", "mlp_layers", "mlp_dim", "mlp_activation", "output_layer",
        "optimizer", "learning_rate", "negative_sampling_rate", "comparator_list",
        "tied_token_embedding_weight", "token_embedding_storage_type", "enc0_network",
        "enc1_network", "enc0_cnn_filter_width", "enc1_cnn_filter_width", "enc1_max_seq_len",
        "enc0_token_embedding_dim", "enc1_token_embedding_dim", "enc1_vocab_size", "enc0_layers",
        "enc1_layers", "enc0_freeze_pretrained_embedding", "enc1_freeze_pretrained_embedding",
    )
    epochs = H("epochs", int, ">=1", "<=100")
    enc0_max_seq_len = H("enc0_max_seq_len", int, ">=1", "<=5000")
    enc0_vocab_size = H("enc0_vocab_size", int, ">=2", "<=3000000")
    enc_dim = H("enc_dim", int, ">=4", "<=10000")
    mini_batch_size = H("mini_batch_size", int, ">=1", "<=10000")
    early_stopping_patience = H("early_stopping_patience", int, ">=1", "<=5")
    early_stopping_tolerance = H("early_stopping_tolerance", float, ">=1e-6", "<=0.1")
    dropout = H("dropout", float, ">=0.0", "<=1.0")
    weight_decay = H("weight_decay", float, ">=0.0", "<=10000.0")
    bucket_width = H("bucket_width", int, ">=0", "<=100")
    num_classes = H("num_classes", int, ">=2", "<=30")
    mlp_layers = H("mlp_layers", int, ">=1", "<=10")
    mlp_dim = H("mlp_dim", int, ">=2", "<=10000")
    mlp_activation = H("mlp_activation", str, ("tanh", "relu", "linear"))
    output_layer = H("output_layer", str, ("softmax", "mean_squared_error"))
    optimizer = H("optimizer", str, _OPTIMIZERS)
    learning_rate = H("learning_rate", float, ">=1e-6", "<=1.0")
    negative_sampling_rate = H("negative_sampling_rate", int, ">=0", "<=100")
    comparator_list = H("comparator_list", str,
                        accepted='a comma-separated list of "hadamard", "concat", "abs_diff"')
    tied_token_embedding_weight = H("tied_token_embedding_weight", bool)
    token_embedding_storage_type = H("token_embedding_storage_type", str, ("dense", "row_sparse"))
    enc0_network = H("enc0_network", str, ("hcnn", "bilstm", "pooled_embedding"))
    enc1_network = H("enc1_network", str, ("hcnn", "bilstm", "pooled_embedding", "enc0"))
    enc0_cnn_filter_width = H("enc0_cnn_filter_width", int, ">=1", "<=9")
    enc1_cnn_filter_width = H("enc1_cnn_filter_width", int, ">=1", "<=9")
    enc1_max_seq_len = H("enc1_max_seq_len", int, ">=1", "<=5000")
    enc0_token_embedding_dim = H("enc0_token_embedding_dim", int, ">=2", "<=1000")
    enc1_token_embedding_dim = H("enc1_token_embedding_dim", int, ">=2", "<=1000")
    enc1_vocab_size = H("enc1_vocab_size", int, ">=2", "<=3000000")
    enc0_layers = H("enc0_layers", int, ">=1", "<=4")
    enc1_layers = H("enc1_layers", int, ">=1", "<=4")
    enc0_freeze_pretrained_embedding = H("enc0_freeze_pretrained_embedding", bool)
    enc1_freeze_pretrained_embedding = H("enc1_freeze_pretrained_embedding", bool)

    def _check_algorithm_arguments(self) -> None:
        if self.comparator_list is not None and not set(self.comparator_list.split(",")) <= {
            "hadamard", "concat", "abs_diff"
        }:
            raise ConfigurationError.invalid(
                "comparator_list", self.comparator_list,
                'a comma-separated list of "hadamard", "concat", "abs_diff"')

    def _mini_batch_size_for(self, records: Any, given: int | None) -> int | None:
        return given if given is not None else self.mini_batch_size or self.MINI_BATCH_SIZE
# fmt: on
