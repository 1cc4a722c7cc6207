"""``python -m launchbay.cli``: the ``launchbay`` command (detached local runs use it)."""

import sys

from launchbay.cli import main

if __name__ == "__main__":  # imported (not run) by the import checks: nothing to do
    sys.exit(main())
