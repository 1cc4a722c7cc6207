"""The name patterns CreateTrainingJob applies, shared by the argument checks and the request rules.

They sit below both :mod:`launchbay.arguments` and :mod:`launchbay._request_rules`
(which derives its field -> argument map from the argument table), so neither
imports the other for them.
"""

from __future__ import annotations

import re

__all__ = ["INSTANCE_TYPE_RE", "JOB_NAME_RE"]

#: ``TrainingJobName``: the model's pattern (``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``),
#: anchored as the service applies it; written out so that using it reads no JSON
#: (``tests/unit/test_request_rules.py`` pins it to the model).
JOB_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: A SageMaker training instance type. The model has an enum, not a pattern, and
#: its list lags behind new types, so any ``ml.<family>.<size>`` is accepted here.
INSTANCE_TYPE_RE = re.compile(r"^ml\.[a-z0-9\-]+\.[a-z0-9]+$")
