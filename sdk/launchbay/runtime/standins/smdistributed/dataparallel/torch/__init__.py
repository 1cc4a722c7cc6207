"""PyTorch side of the stand-in: ``torch_smddp`` (current API), ``distributed`` and
``parallel`` (legacy API). Importing this package imports nothing heavy."""
