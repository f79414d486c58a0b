"""`python -m asr.assistant.intents`: the `asr-intents` command from a checkout."""

import sys

from .cli import main

sys.exit(main())
