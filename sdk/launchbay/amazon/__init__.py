"""SDK v2's ``sagemaker.amazon``: the built-in algorithms' estimators and data format.

``common`` (RecordIO-protobuf, ``RecordSet``), ``amazon_estimator`` (the estimators'
base, ``get_image_uri``) and one module per algorithm under v2's names
(``linear_learner.LinearLearner``, ``kmeans.KMeans``, ...). See docs/algorithms.md.
"""
