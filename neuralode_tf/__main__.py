"""``python -m neuralode_tf train|compare|demo ...``: the same as the ``neuralode-tf`` command."""

import sys

from .train.cli import main

sys.exit(main())
