"""``python -m holon_ctx`` is the same as the ``holon-ctx`` console script."""

import sys

from holon_ctx.cli.main import main

sys.exit(main())
