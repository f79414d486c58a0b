"""The devices the assistant controls, simulated: volume, switches and a music player.

Their state lives here and every answer says "(simulated)", so the demo can be tried on any
machine without touching real hardware.
"""


class SimulatedDevices:
    """Volume (percent), on/off switches, and a player's state and track."""

    def __init__(self, volume_step: int) -> None:
        self.volume_step = volume_step
        self.volume, self.switches = 50, {"lights": "off", "radio": "off", "wifi": "on"}
        self.player = {"state": "stopped", "track": 0}

    def volume_change(self, direction: str) -> str:
        step = self.volume_step if direction == "up" else -self.volume_step
        self.volume = min(100, max(0, self.volume + step))
        return f"Volume {direction}: {self.volume}% (simulated)."

    def switch(self, state: str, device: str) -> str:
        before, self.switches[device] = self.switches[device], state
        again = " (it already was)" if before == state else ""
        return f"The {device} {'is' if device == 'wifi' else 'are'} {state}{again} (simulated)."

    def music(self, action: str) -> str:
        self.player["state"] = {"play": "playing", "pause": "paused", "stop": "stopped"}[action]
        return f"Music {self.player['state']}: track {self.player['track'] + 1} (simulated player)."

    def next_song(self) -> str:
        self.player["track"] += 1
        self.player["state"] = "playing"
        return f"Next song: playing track {self.player['track'] + 1} (simulated player)."
