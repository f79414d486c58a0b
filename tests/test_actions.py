"""The demo's actions: the home-folder sandbox, status checks, timers and simulated devices."""

import datetime as dt
import os
import subprocess
import time
from pathlib import Path

import pytest

from asr.assistant.actions import ActionsConfig, Assistant
from asr.assistant.home_files import MAX_SCREENS, SandboxError, inside_home, list_files
from asr.assistant.system_status import running_processes
from helpers import peak_memory

pytestmark = pytest.mark.tier("fast")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home folder with a few files of each kind, a hidden one, and links pointing out."""
    home = tmp_path / "home"
    for name in ("Pictures/beach.jpg", "Pictures/trips/alps.PNG", "Music/song.mp3",
                 "Downloads/paper.pdf", "notes.txt", "clip.mp4", ".secret.jpg"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(name)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.jpg").write_text("not yours")
    (home / "link-out").symlink_to(outside)
    (home / "Pictures" / "stolen.jpg").symlink_to(outside / "private.jpg")
    # Ages from the last midnight, so "yesterday" means the same at any time of day.
    midnight = dt.datetime.now().replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    for name, age_h in (("Pictures/trips/alps.PNG", 12), ("notes.txt", 60),
                        ("Music/song.mp3", 24 * 30)):
        os.utime(home / name, (midnight - 3600 * age_h, midnight - 3600 * age_h))
    return home


def assistant(home: Path, announced: list[str] | None = None, **config) -> Assistant:
    announce = announced.append if announced is not None else print
    return Assistant(ActionsConfig(home=str(home), **config), announce)


def names(paths: list[Path], home: Path) -> list[str]:
    return [str(p.relative_to(home)) for p in paths]


def test_files_by_kind_stay_inside_home(home):
    assert names(list_files(home, "photos")[0], home) == ["Pictures/beach.jpg", "Pictures/trips/alps.PNG"]
    assert names(list_files(home, "music")[0], home) == ["Music/song.mp3"]
    assert names(list_files(home, "videos")[0], home) == ["clip.mp4"]
    assert names(list_files(home, "documents")[0], home) == ["Downloads/paper.pdf", "notes.txt"]
    assert sorted(names(list_files(home, "directories")[0], home)) == [
        "Downloads", "Music", "Pictures", "Pictures/trips"]
    assert len(list_files(home, "files")[0]) == 6  # not the hidden file, not the links


def test_a_huge_home_is_listed_from_a_bounded_walk(home):
    """A listing looks at no more than `limit` entries, so a home of millions of files cannot
    block the demo; the answer says it is partial."""
    for i in range(30):
        (home / "Downloads" / f"scan{i:02d}.pdf").write_text("scan")
    found, complete = list_files(home, "documents")
    assert complete and len(found) == 32
    found, complete = list_files(home, "documents", limit=20)  # the 7 of home, not Downloads'
    assert not complete and names(found, home) == ["notes.txt"]
    a = assistant(home, max_scanned=20)
    assert a.act("show_files", {"kind": "documents"}) == (
        f"1 document in {home} among the first 20 entries: 1. notes.txt")
    with pytest.raises(ValueError, match=r"^actions.max_scanned must be in \[1, 10000000\], got 0"):
        ActionsConfig(max_scanned=0)
    with pytest.raises(ValueError, match=r"^actions.page_size must be an integer, got '5'"):
        ActionsConfig(page_size="5")


def test_paths_outside_home_are_refused(home, tmp_path):
    for folder in ("/etc", "..", "../outside", "link-out", "Pictures/../../outside"):
        with pytest.raises(SandboxError, match="outside the home folder"):
            list_files(home, "files", folder)
    with pytest.raises(SandboxError):
        inside_home(home, "/etc/passwd")
    assert inside_home(home, "Pictures/../notes.txt") == (home / "notes.txt").resolve()


def test_show_find_scroll_pick_and_go_back(home):
    a = assistant(home, page_size=1)
    assert a.act("show_files", {"kind": "photos"}) == (
        f"2 photos in {home}: 1. Pictures/beach.jpg (scroll down for 1 more)")
    assert a.act("scroll", {"direction": "down"}) == f"2 photos in {home}: 2. Pictures/trips/alps.PNG"
    assert a.act("digit", {"digit": "two"}) == f"Item 2: {home / 'Pictures/trips/alps.PNG'}"
    assert a.act("digit", {"digit": "seven"}) == "There is no item 7."
    assert a.act("find_files", {"kind": "files", "when": "from yesterday"}) == (
        f"1 file from yesterday in {home}: 1. Pictures/trips/alps.PNG")
    assert a.act("find_files", {"kind": "photos", "when": "from today"}) == (
        f"1 photo from today in {home}: 1. Pictures/beach.jpg")
    assert a.act("find_files", {"kind": "files", "when": "from last week"}).startswith(
        f"5 files from last week in {home}")
    assert a.act("show_files", {"kind": "downloads"}) == (
        f"1 download in {home / 'Downloads'}: 1. Downloads/paper.pdf")
    assert a.act("go_back", {}).startswith(f"Back to 5 files from last week in {home}")


def test_battery_from_a_power_supply_tree(home, tmp_path):
    supply = tmp_path / "power_supply"
    for name, kind, capacity, status in (("AC", "Mains", None, None),
                                         ("BAT0", "Battery", "7", "Discharging")):
        (supply / name).mkdir(parents=True)
        (supply / name / "type").write_text(kind + "\n")
        if capacity:
            (supply / name / "capacity").write_text(capacity + "\n")
            (supply / name / "status").write_text(status + "\n")
    a = assistant(home, power_supply=str(supply))
    assert a.act("check_status", {"thing": "battery"}) == "BAT0 has run down: 7%, discharging."
    (supply / "BAT0" / "capacity").write_text("80\n")
    assert a.act("check_log", {"thing": "battery"}).startswith("BAT0 has not run down: 80%")
    none = assistant(home, power_supply=str(tmp_path / "missing"))
    assert none.act("check_status", {"thing": "battery"}) == (
        f"No battery found (nothing reports one under {tmp_path / 'missing'}).")


@pytest.mark.subprocess
def test_program_check_looks_at_real_processes(home):
    sleeper = subprocess.Popen(["sleep", "30"])
    deadline = time.monotonic() + 5  # Popen returns after the fork, maybe before the exec
    while Path(f"/proc/{sleeper.pid}/comm").read_text().strip() != "sleep" \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert assistant(home, program="sleep").act("check_status", {"thing": "program"}) \
            .startswith("sleep is running (pid ")
        assert sleeper.pid in running_processes("sleep")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sleeper.pid not in running_processes("sleep")
    assert assistant(home, program="no-such-program-xyz").act(
        "check_status", {"thing": "program"}) == "No process called no-such-program-xyz is running."


def test_program_log_is_read_only_inside_home(home):
    (home / "program.log").write_text("started\nfinished ok\n")
    assert assistant(home).act("check_log", {"thing": "program"}).endswith("ends with: finished ok")
    assert assistant(home, program_log="../outside/private.jpg").act(
        "check_log", {"thing": "program"}).endswith("outside the home folder "
                                                     f"{home.resolve()}; refused")


def test_timers_count_down_in_the_background_and_cancel(home):
    announced: list[str] = []
    a = assistant(home, announced)
    assert a.act("timer", {"amount": "one", "unit": "second"}) == (
        "Timer set for one second: it rings in 0:00:01.")
    a.act("timer", {"amount": "two", "unit": "seconds"})
    assert a.running_timers() == ["one second", "two seconds"]
    assert a.act("cancel", {}) == "Cancelled the timer for two seconds."
    assert announced == []  # nothing rings at once: the count-down is real
    deadline = time.monotonic() + 5
    while not announced and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.2)  # past the moment the cancelled timer would have rung
    assert announced == ["Time is up: the timer for one second has run out."]
    assert a.running_timers() == [] and a.act("cancel", {}) == "Nothing to cancel."


def test_simulated_devices_keep_state(home):
    a = assistant(home)
    assert a.act("volume", {"direction": "up"}) == "Volume up: 60% (simulated)."
    assert a.act("switch", {"state": "on", "device": "lights"}) == "The lights are on (simulated)."
    assert a.act("switch", {"state": "on", "device": "lights"}) == (
        "The lights are on (it already was) (simulated).")
    assert a.act("switch", {"state": "off", "device": "wifi"}) == "The wifi is off (simulated)."
    assert a.act("music", {"action": "play"}) == "Music playing: track 1 (simulated player)."
    assert a.act("next_song", {}) == "Next song: playing track 2 (simulated player)."
    assert a.act("word", {"word": "stop"}) == "Music stopped: track 2 (simulated player)."
    assert a.act("time", {}).startswith("It is ")
    assert a.act("date", {}).startswith("Today is ")
    assert a.act("word", {"word": "yes"}) == "Yes: nothing is waiting for an answer."


def test_disabled_and_unknown_actions_do_nothing(home):
    a = assistant(home, enabled=["time"])
    assert a.act("show_files", {"kind": "photos"}) == (
        "The show_files action is disabled in the config; nothing done.")
    assert a.act("rm", {}) == "No action called 'rm'; nothing done."
    with pytest.raises(ValueError, match="unknown actions"):
        assistant(home, enabled=["time", "shell"])


def test_a_question_is_answered_only_by_the_next_utterance_in_time(home):
    """"open the browser", other commands, then "go" or a late "yes" must launch nothing."""
    now = [100.0]
    a = Assistant(ActionsConfig(home=str(home), launch=True, apps={"browser": ["true"]},
                                confirm_seconds=8.0))
    a.set_clock(lambda: now[0])
    asked = "Open the browser (true)? Say yes or no."
    assert a.act("open_app", {"app": "browser"}) == asked
    assert a.act("word", {"word": "go"}) == "Go: nothing is waiting for an answer."
    assert a.act("word", {"word": "yes"}) == "Yes: nothing is waiting for an answer."
    assert a.act("open_app", {"app": "browser"}) == asked
    assert a.act("time", {}).startswith("It is ")  # another command drops the question
    assert a.act("word", {"word": "yes"}) == "Yes: nothing is waiting for an answer."
    assert a.act("open_app", {"app": "browser"}) == asked
    a.not_understood()  # so does an utterance that was no command
    assert a.act("word", {"word": "yes"}) == "Yes: nothing is waiting for an answer."
    assert a.act("open_app", {"app": "browser"}) == asked
    now[0] += 8.5
    assert a.act("word", {"word": "yes"}) == (
        "The question has expired (open the browser); say the command again.")
    assert a.act("open_app", {"app": "browser"}) == asked
    assert a.act("cancel", {}) == "Cancelled: open the browser."
    assert a.launched == {}
    assert a.act("open_app", {"app": "browser"}) == asked
    now[0] += 7.5
    assert a.act("word", {"word": "yes"}).startswith("Opened the browser (pid ")
    a.launched["browser"].wait(timeout=10)


# ---------------------------------------------------------------------------- any grammar


@pytest.mark.parametrize(("intent", "slots", "answer"), [
    ("timer", {"amount": "25", "unit": "minutes"}, "Timer set for 25 minutes: it rings in 0:25:00."),
    ("timer", {"amount": "sixty", "unit": "hours"},
     "Timer set for sixty hours: it rings in 2 days, 12:00:00."),
    ("timer", {"amount": "ninety nine", "unit": "Seconds"},
     "Timer set for ninety nine Seconds: it rings in 0:01:39."),
    ("timer", {"amount": "sixty", "unit": "days"},
     "Timers count seconds, minutes or hours, not 'days'; no timer set."),
    ("timer", {"amount": "99", "unit": "hours"}, "Timer set for 99 hours: it rings in 4 days, 3:00:00."),
    ("timer", {"amount": "999", "unit": "hours"}, "999 hours is longer than a week; no timer set."),
    ("timer", {"amount": "a few", "unit": "minutes"},
     "Cannot count 'a few' (a number up to ninety nine, or digits); no timer set."),
    ("timer", {"amount": "five"}, "The timer action takes amount, unit (got amount); nothing done."),
    ("timer", {"amount": "5", "unit": "minutes", "size": "large"},
     "The timer action takes amount, unit (got amount, unit, size); nothing done."),
    ("time", {"minutes": "25"}, "The time action takes no slots (got minutes); nothing done."),
    ("next_song", {"count": "2"}, "The next_song action takes no slots (got count); nothing done."),
    ("show_files", {}, "The show_files action takes kind (got no slots); nothing done."),
    ("show_files", {"kind": "spreadsheets"}, "I know no kind of file called 'spreadsheets' "
     "(only files, directories, downloads, photos, documents, music, videos); nothing shown."),
    ("find_files", {"kind": "photos", "when": "from last month"}, "I cannot tell which files are "
     "'from last month' (only from today, from yesterday, from last week); nothing shown."),
    ("digit", {"digit": "7"}, "Heard 7; nothing on screen to pick."),
    ("digit", {"digit": "seventy"}, "Heard 'seventy', which is no digit; nothing picked."),
    ("volume", {"direction": "sideways"}, "Turn the volume 'sideways'? Only up or down; nothing done."),
    ("switch", {"state": "on", "device": "fan"},
     "There is no 'fan' to switch (only the lights, radio, wifi); nothing done."),
    ("switch", {"state": "dim", "device": "lights"},
     "Turn the lights 'dim'? Only on or off; nothing done."),
    ("music", {"action": "rewind"},
     "The player cannot 'rewind' (only play, pause, stop); nothing done."),
    ("scroll", {"direction": "diagonally"},
     "Cannot scroll 'diagonally' (up, down, left or right); nothing done."),
    ("check_status", {"thing": "printer"},
     "I cannot check the 'printer' (only the battery or the program); nothing done."),
    ("check_log", {"thing": "printer"},
     "I cannot check the 'printer' (only the battery or the program); nothing done."),
    ("word", {"word": "banana"}, "Heard 'banana': no action for that word; nothing done."),
    ("orderDrink", {"size": "large"}, "No action called 'orderDrink'; nothing done."),
])
def test_a_grammar_of_ones_own_gets_an_answer_never_a_crash(home, intent, slots, answer):
    a = assistant(home)
    assert a.act(intent, slots) == answer
    a.timers.cancel()


def test_timers_ring_on_a_clock_the_caller_advances(home):
    """On the demo's clock (seconds of audio) a timer rings when that clock passes its end,
    however little wall time went by; "sixty hours" is sixty hours, not sixty seconds."""
    announced: list[str] = []
    a, now = assistant(home, announced), [0.0]
    a.set_clock(lambda: now[0])
    a.act("timer", {"amount": "two", "unit": "seconds"})
    a.act("timer", {"amount": "sixty", "unit": "hours"})
    a.act("timer", {"amount": "one", "unit": "second"})
    now[0] = 1.5
    a.tick()
    assert announced == ["Time is up: the timer for one second has run out."]
    now[0] = 3600 * 59
    a.tick()
    assert announced[1:] == ["Time is up: the timer for two seconds has run out."]
    assert a.running_timers() == ["sixty hours"]
    now[0] = 3600 * 60
    a.tick()
    assert announced[2:] == ["Time is up: the timer for sixty hours has run out."]
    assert a.running_timers() == []


def test_links_that_loop_and_a_huge_log_are_answered_in_bounded_time_and_memory(home, tmp_path):
    (home / "Downloads").rename(home / "Downloads.old")
    (home / "Downloads").symlink_to("Downloads")  # a link to itself
    (home / "program.log").symlink_to("program.log")
    a = assistant(home)
    assert a.act("show_files", {"kind": "downloads"}).endswith(
        "cannot be resolved (Symlink loop from '" + str(home / "Downloads") + "'); refused")
    assert "cannot be resolved" in a.act("check_log", {"thing": "program"})
    (home / "program.log").unlink()
    with (home / "program.log").open("wb") as log:  # one line of 64 MB, and a last one
        log.truncate(64 << 20)
        log.seek(0, os.SEEK_END)
        log.write(b"\nfinished\n")
    answer, peak = peak_memory(lambda: a.act("check_log", {"thing": "program"}))
    assert answer.endswith("ends with: finished")
    assert peak < 1 << 20, f"{peak} bytes held to read the last line of a 64 MB log"
    looping = tmp_path / "loop"
    looping.symlink_to(looping)
    with pytest.raises(ValueError, match="^actions.home: .*cannot be resolved"):
        assistant(looping)


def test_listings_kept_for_going_back_are_bounded(home):
    a = assistant(home)
    for _ in range(MAX_SCREENS + 10):
        a.act("show_files", {"kind": "files"})
    assert len(a.files.screens) == MAX_SCREENS
    assert a.act("go_back", {}).startswith("Back to ")
