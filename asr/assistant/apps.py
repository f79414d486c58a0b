"""Opening and closing the configured programs.

Programs are launched only when `launch` is on, only from the configured `apps` table (an
argv list, run without a shell), and only after a spoken "yes": opening asks the question and
the dialogue (`asr.assistant.actions.Assistant`) runs the launch when the answer comes.
Only programs this assistant opened are closed.
"""

import subprocess
from collections.abc import Callable
from pathlib import Path

Ask = Callable[[str, Callable[[], str]], None]  # (what is asked, what "yes" runs)


class Apps:
    """The apps table and the programs launched from it (app -> its process)."""

    def __init__(self, home: Path, apps: dict[str, list[str]], launch: bool, ask: Ask) -> None:
        self.home, self.apps, self.launch, self.ask = home, apps, launch, ask
        self.launched: dict[str, subprocess.Popen] = {}

    def open(self, app: str) -> str:
        argv = self.apps.get(app)
        if not argv:
            return f"No program is configured for the {app}."
        if not self.launch:
            return f"Would open the {app}: {' '.join(argv)} (launching is off: actions.launch)."
        self.ask(f"open the {app}", lambda: self._launch(app, argv))
        return f"Open the {app} ({' '.join(argv)})? Say yes or no."

    def _launch(self, app: str, argv: list[str]) -> str:
        try:
            process = subprocess.Popen(argv, shell=False, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True, cwd=self.home)
        except OSError as err:
            return f"Could not open the {app}: {err.strerror or err}"
        self.launched[app] = process
        return f"Opened the {app} (pid {process.pid})."

    def close(self, app: str) -> str:
        process = self.launched.pop(app, None)
        if process is None:
            return f"Would close the {app} (only programs this demo opened are closed)."
        process.terminate()
        return f"Closed the {app} (pid {process.pid})."
