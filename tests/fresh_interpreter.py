"""What a new Python interpreter has imported (importable: ``tests/`` is on ``sys.path``).

Import-cost tests ask it instead of each running its own ``python -c``.
"""

from __future__ import annotations

import ast
import subprocess
import sys


def loaded_after(statements: str, where: str) -> list[str]:
    """The sorted names in ``sys.modules`` of a new interpreter that ran ``statements`` for
    which the expression ``where`` (over the module's name ``m``) holds. The run must
    succeed."""
    code = f"import sys\n{statements}\nprint(repr(sorted(m for m in list(sys.modules) if {where})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])
