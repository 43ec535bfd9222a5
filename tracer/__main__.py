from __future__ import annotations

import sys

from tracer.cli import main

sys.exit(main())
