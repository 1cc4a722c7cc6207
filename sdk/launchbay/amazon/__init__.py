"""SDK v2's ``sagemaker.amazon``: the built-in algorithms' helpers (``get_image_uri``)."""
