"""`python -m asr.assistant.wyoming`: the `asr-wyoming` command from a checkout."""

import sys

from .server import main

sys.exit(main())
