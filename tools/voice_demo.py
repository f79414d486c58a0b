"""The voice-command demo as a script; the same as the `asr-demo` console script.

    python tools/voice_demo.py --input commands.wav model_dir=exp/voice_commands

The code lives in asr/assistant/demo.py (so that the console script can reach it).
"""

import sys

from asr.assistant.demo import main

if __name__ == "__main__":
    sys.exit(main())
