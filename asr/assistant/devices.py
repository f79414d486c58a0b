"""The devices the assistant controls, simulated: volume, switches and a music player.

Their state lives here and every answer says "(simulated)", so the demo can be tried on any
machine without touching real hardware.
"""


PLAYER_STATES = {"play": "playing", "pause": "paused", "stop": "stopped"}  # action -> state


class SimulatedDevices:
    """Volume (percent), on/off switches, and a player's state and track."""

    def __init__(self, volume_step: int) -> None:
        self.volume_step = volume_step
        self.volume, self.switches = 50, {"lights": "off", "radio": "off", "wifi": "on"}
        self.player = {"state": "stopped", "track": 0}

    def volume_change(self, direction: str) -> str:
        if direction not in ("up", "down"):
            return f"Turn the volume {direction!r}? Only up or down; nothing done."
        step = self.volume_step if direction == "up" else -self.volume_step
        self.volume = min(100, max(0, self.volume + step))
        return f"Volume {direction}: {self.volume}% (simulated)."

    def switch(self, state: str, device: str) -> str:
        if device not in self.switches:
            return (f"There is no {device!r} to switch (only the {', '.join(self.switches)}); "
                    "nothing done.")
        if state not in ("on", "off"):
            return f"Turn the {device} {state!r}? Only on or off; nothing done."
        before, self.switches[device] = self.switches[device], state
        again = " (it already was)" if before == state else ""
        return f"The {device} {'is' if device == 'wifi' else 'are'} {state}{again} (simulated)."

    def music(self, action: str) -> str:
        state = PLAYER_STATES.get(action)
        if state is None:
            return f"The player cannot {action!r} (only {', '.join(PLAYER_STATES)}); nothing done."
        self.player["state"] = state
        return f"Music {self.player['state']}: track {self.player['track'] + 1} (simulated player)."

    def next_song(self) -> str:
        self.player["track"] += 1
        self.player["state"] = "playing"
        return f"Next song: playing track {self.player['track'] + 1} (simulated player)."
