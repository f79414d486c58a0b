"""Home Assistant's sentences as a grammar: hassil templates -> `Grammar`.

    Grammar.load("ha:en", home="home.yaml")            # home-assistant-intents' English set
    Grammar.load("custom_sentences/en", home=...)      # a user's custom_sentences/en/*.yaml
    Grammar.load("my_intents.yaml")                    # one hassil file (`intents:` at the top)

Home Assistant matches typed or transcribed text against hassil templates: `(a|b)` a choice,
`[x]` an optional, `(a;b)` a permutation, `<rule>` an expansion rule, `{list}` or
`{list:slot}` a list of values (text, or a number range). The `hassil` library parses them
(`hassil.Intents`); this module turns its parsed templates into this package's grammar
elements, so that a search writes only Home Assistant's sentences and `Grammar.parse` reads
the intent and slots off them, each slot valued as Home Assistant expects it (an area's name,
an entity's name, a number in digits, a list's `out` value). A block's fixed `slots`
(`domain: light`) are the expression's `fixed` slots.

hassil joins its text with no space where the template writes none (`fan[s]`, `day[ ]light`);
words here are whole, so such text is pushed into each option of the choice beside it.
`{name}`, `{area}` and `{floor}` are the home's: a small YAML file (`read_home`) names its
areas, floors and devices (each with its domain, so a block that `requires_context` a domain
lists only the devices of that domain). What cannot be a closed grammar is dropped, one warning
line per reason with its count: wildcard lists (a timer's name, a shopping item), context that
only a satellite knows (`requires_context: area: {slot: true}`: "turn on the lights" in the room
it hears), lists the home leaves empty.
"""

import itertools
import logging
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from asr.grammar.elements import MAX_SENTENCE_WORDS, Choice, Expression, Slot, SlotTypes, Word
from asr.grammar.reader import GrammarError, shown
from asr.text import normalize_text, number_words
from asr.untrusted import UntrustedInputError, check_yaml, read_text

PACKAGE_PREFIX = "ha:"  # "ha:en": the home-assistant-intents package's sentences of a language
MAX_FILE_BYTES = 4 << 20  # one sentences file (home-assistant-intents' English is 180 KB)
MAX_HOME_BYTES = 1 << 20
MAX_SPELLINGS = 256  # the options of a choice whose text is glued to its neighbour's
MAX_PERMUTED = 5  # items of a permutation (5! = 120 orders)
MAX_RULE_DEPTH = 24  # expansion rules referring to rules (hassil's own guard)
MAX_RANGE_VALUES = 2000
HOME_LISTS = ("name", "area", "floor")
SKIP_BEFORE = ("can you", "could you", "would you", "i'd like", "i'd like to", "i want")
SKIP_AFTER = ("please", "for me")
_SYMBOLS = {"%": " percent ", "°": " degrees "}


class _Dropped(Exception):
    """A template (or one option of its choice) that cannot be a closed grammar: the reason,
    and what in particular (counted under the reason)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class Device:
    name: str
    domain: str | None = None
    area: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Home:
    """The names a home gives its areas, floors and devices (each name as Home Assistant
    writes it: that is the slot's value; it is spoken as `normalize_text` of it)."""

    areas: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (name, aliases)
    floors: tuple[tuple[str, tuple[str, ...]], ...] = ()
    devices: tuple[Device, ...] = ()


def is_hassil(path: str | Path, text: str | None = None) -> bool:
    """Whether a grammar is hassil's: a package set ("ha:en"), a folder of sentence files, or
    a file with `intents:` (not Rhino's `context:`) at the top level."""
    if str(path).startswith(PACKAGE_PREFIX) or Path(path).is_dir():
        return True
    return text is not None and bool(re.search(r"^intents\s*:", text, re.M)) \
        and not re.search(r"^context\s*:", text, re.M)


def read_home(path: str | Path | None) -> Home:
    """A home file: `areas` and `floors` (names, or {name, aliases}) and `devices` (names, or
    {name, domain, area, aliases}); None: an empty home. Problems are one GrammarError line."""
    if path is None:
        return Home()
    try:
        text = read_text(path, MAX_HOME_BYTES, "the home file")
        check_yaml(text, path)
        data = yaml.safe_load(text) or {}
    except UntrustedInputError as err:
        raise GrammarError(str(err)) from None
    if not isinstance(data, dict) or set(data) - {"areas", "floors", "devices"}:
        raise GrammarError(f"{path}: a home file maps areas, floors and devices to lists")
    areas, floors = (tuple(_named(path, key, item) for item in _items(path, data, key))
                     for key in ("areas", "floors"))
    devices = tuple(_device(path, item) for item in _items(path, data, "devices"))
    return Home(areas, floors, devices)


def _items(path: str | Path, data: dict, key: str) -> list:
    items = data.get(key) or []
    if not isinstance(items, list):
        raise GrammarError(f"{path}: {key} must be a list")
    return items


def _named(path: str | Path, key: str, item: object) -> tuple[str, tuple[str, ...]]:
    if isinstance(item, dict):
        name, aliases = item.get("name"), item.get("aliases") or []
    else:
        name, aliases = item, []
    names = [name, *aliases] if isinstance(aliases, list) else [None]
    if not all(isinstance(n, str) and normalize_text(n) for n in names):
        raise GrammarError(f"{path}: each of {key} needs a name of words (and aliases a list of "
                           f"them), got {shown(item)}")
    return name, tuple(aliases)


def _device(path: str | Path, item: object) -> Device:
    name, aliases = _named(path, "devices", item)
    extra = item if isinstance(item, dict) else {}
    domain, area = extra.get("domain"), extra.get("area")
    if not all(v is None or isinstance(v, str) for v in (domain, area)):
        raise GrammarError(f"{path}: a device's domain and area are names, got {shown(item)}")
    return Device(name, domain, area, aliases)


def load_hassil(source: str | Path, home: Home | str | Path | None = None) -> tuple[
        list[Expression], SlotTypes]:
    """The expressions and slot types of hassil sentences (see the module docstring)."""
    try:
        import home_assistant_intents  # noqa: F401
        from hassil import Intents  # optional dependencies: the `wyoming` extra
    except ImportError as err:
        raise GrammarError(f"{source}: Home Assistant's sentences need hassil and "
                           f"home-assistant-intents ({err}): pip install "
                           "'speech-transformer-asr[wyoming]'") from None
    data = _sentences(source)
    try:
        intents = Intents.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError, AssertionError) as err:
        raise GrammarError(f"{source}: not hassil sentences ({type(err).__name__}: "
                           f"{str(err)[:120]})") from None
    home = home if isinstance(home, Home) else read_home(home)
    return _Converter(intents, home, str(source)).run()


def _sentences(source: str | Path) -> dict:
    """The sentences' data: the package's language, a folder's *.yaml merged, or one file."""
    from hassil.util import merge_dict

    if str(source).startswith(PACKAGE_PREFIX):
        from home_assistant_intents import get_intents

        language = str(source)[len(PACKAGE_PREFIX):]
        data = get_intents(language)
        if data is None:
            raise GrammarError(f"{source}: home-assistant-intents has no language {language!r}")
        return data
    files = sorted(Path(source).glob("*.yaml")) if Path(source).is_dir() else [Path(source)]
    if not files:
        raise GrammarError(f"{source}: no *.yaml sentence files in the folder")
    merged: dict = {}
    for path in files:
        try:
            text = read_text(path, MAX_FILE_BYTES, "the sentences file")
            check_yaml(text, path)
            data = yaml.safe_load(text)
        except UntrustedInputError as err:
            raise GrammarError(str(err)) from None
        if not isinstance(data, dict) or not isinstance(data.get("intents", {}), dict):
            raise GrammarError(f"{path}: not hassil sentences (expected language: and intents:)")
        merge_dict(merged, data)
    merged.setdefault("language", "en")
    return merged


# ------------------------------------------------------------------ hassil tree -> word tokens
# A template becomes a tuple of tokens: _SPACE (a word break), a str (text with no break in
# it), an _Alt (a choice; an empty option: the choice may be skipped) or a Slot; `_resolve`
# pushes text glued to a choice into its options, so no two tokens stay glued.

_SPACE = " "


@dataclass(frozen=True)
class _Alt:
    options: tuple[tuple, ...]


class _Converter:
    """hassil's Intents and a home -> expressions and slot types, dropped templates counted."""

    def __init__(self, intents, home: Home, source: str) -> None:
        self.intents, self.home, self.source = intents, home, source
        self.slots: SlotTypes = {}
        self.dropped: Counter[tuple[str, str]] = Counter()  # (reason, detail): templates
        self.parts: Counter[str] = Counter()  # reason: options of a choice left out
        self.rules, self.lists = intents.expansion_rules, intents.slot_lists

    def run(self) -> tuple[list[Expression], SlotTypes]:
        found: list[Expression] = []
        for intent in self.intents.intents.values():
            for block in intent.data:
                found += self._block(intent.name, block)
        self._warn_dropped()
        if not found:
            raise GrammarError(f"{self.source}: no sentence template could be a grammar")
        # Home Assistant prefers a reading that names a device ("kitchen light") to one that
        # names an area ("kitchen" lights): the first expression in order wins a shared sentence.
        return sorted(found, key=lambda e: "name" not in _slot_names(e.elements)), self.slots

    def _warn_dropped(self) -> None:
        """One line per reason: the templates dropped (by what), the options left out."""
        reasons = sorted({reason for reason, _ in self.dropped} | set(self.parts))
        for reason in reasons:
            details = {d: n for (r, d), n in self.dropped.items() if r == reason}
            count = sum(details.values())
            listed = ", ".join(f"{d} {n}" for d, n in sorted(details.items()) if d)
            parts = f"; {self.parts[reason]} optional part(s) left out" if self.parts[reason] else ""
            warnings.warn(f"{self.source}: {count} template(s) dropped: {reason}"
                          f"{f' ({listed})' if listed else ''}{parts}", stacklevel=4)

    def _block(self, intent: str, block) -> list[Expression]:
        context = {k: v for k, v in (block.requires_context or {}).items() if k != "domain"}
        domains = (block.requires_context or {}).get("domain")
        fixed = tuple((str(k), str(v)) for k, v in (block.slots or {}).items()
                      if isinstance(v, str | int | float))
        found = []
        for line, sentence in enumerate(block.sentences, 1):
            try:
                if context or block.excludes_context:
                    raise _Dropped("they need context only a satellite knows (its area)",
                                   ", ".join(sorted(context)) or "excludes_context")
                elements = self._elements(sentence.expression, block, domains)
            except _Dropped as why:
                self.dropped[why.reason, why.detail] += 1
                continue
            found.append(Expression(intent, _with_skip_words(elements), line,
                                    sentence.text or "", fixed))
        return found

    def _elements(self, expression, block, domains) -> tuple:
        rules = {**self.rules, **(block.expansion_rules or {})}
        lists = {**self.lists, **(block.slot_lists or {})}
        tokens = _resolve(self._tokens(expression, rules, lists, block, domains, 0))
        elements = _to_elements(tokens)
        if not elements:
            raise _Dropped("they say no words")
        return elements

    def _tokens(self, e, rules, lists, block, domains, depth: int) -> tuple:
        from hassil.expression import (
            Alternative,
            ListReference,
            Permutation,
            RuleReference,
            Sequence,
            TextChunk,
        )

        if depth > MAX_RULE_DEPTH:
            raise GrammarError(f"{self.source}: expansion rules nested deeper than "
                               f"{MAX_RULE_DEPTH} (a rule that refers to itself?)")
        walk = lambda item: self._tokens(item, rules, lists, block, domains, depth + 1)  # noqa: E731
        if isinstance(e, TextChunk):
            return _text_tokens(e.text)
        if isinstance(e, Alternative):
            return (self._alternative(e.items, walk),)
        if isinstance(e, Permutation):
            return (_permutation([walk(item) for item in e.items]),)
        if isinstance(e, Sequence):
            return tuple(token for item in e.items for token in walk(item))
        if isinstance(e, RuleReference):
            if e.rule_name not in rules:
                raise GrammarError(f"{self.source}: no expansion rule <{e.rule_name}>")
            return walk(rules[e.rule_name].expression)
        if isinstance(e, ListReference):
            return (_SPACE, self._slot(e, lists, block, domains), _SPACE)
        raise GrammarError(f"{self.source}: a template part hassil gave that is not known: "
                           f"{type(e).__name__}")

    def _alternative(self, items: list, walk) -> _Alt:
        """A choice, less its options that cannot be a closed grammar (a wildcard's), unless
        that is every option."""
        options, why = [], None
        for item in items:
            try:
                options.append(walk(item))
            except _Dropped as dropped:
                why = dropped
        if not options:
            raise why
        if why is not None:
            self.parts[why.reason] += 1
        return _Alt(tuple(options))

    def _slot(self, ref, lists, block, domains) -> Slot:
        """The slot of a {list} reference, its type built on first use."""
        if ref.list_name in block.wildcard_list_names:
            raise _Dropped("they hold a wildcard list (any words)", f"{{{ref.list_name}}}")
        if ref.is_inline_range:
            start, stop, step = ref.get_inline_range()
            return self._type(f"range.{start}.{stop}.{step}", ref.slot_name,
                              lambda: _range_values(start, stop, step, None, None))
        if ref.list_name in HOME_LISTS and ref.list_name not in lists:
            chosen = sorted(domains) if isinstance(domains, list) and ref.list_name == "name" \
                else None
            key = ref.list_name + (f"[{','.join(chosen)}]" if chosen else "")
            return self._type(f"home.{key}", ref.slot_name,
                              lambda: _home_values(self.home, ref.list_name, chosen))
        if ref.list_name not in lists:
            raise GrammarError(f"{self.source}: no list {{{ref.list_name}}}")
        return self._type(f"list.{ref.list_name}.{id(lists[ref.list_name])}", ref.slot_name,
                          lambda: self._list_values(lists[ref.list_name]))

    def _type(self, name: str, slot: str, values) -> Slot:
        if name not in self.slots:
            self.slots[name] = values()
        if not self.slots[name]:
            raise _Dropped("their list has no values (the home names none)", name.split(".")[1])
        return Slot(name, slot)

    def _list_values(self, slot_list) -> tuple[tuple[str, str], ...]:
        from hassil.intents import RangeSlotList, TextSlotList
        from hassil.sample import sample_expression

        if isinstance(slot_list, RangeSlotList):
            return _range_values(slot_list.start, slot_list.stop, slot_list.step,
                                 slot_list.fraction_type, slot_list.multiplier)
        if not isinstance(slot_list, TextSlotList):
            raise _Dropped("they hold a list that is no closed set of values")
        pairs = []
        for value in slot_list.values:
            out = value.value_out
            for text in sample_expression(value.text_in, self.lists, self.rules):
                pairs.append((_spoken(text), str(text.strip() if out is None else out)))
        return _unique(pairs)


def _slot_names(elements: tuple) -> set[str]:
    names = set()
    for element in elements:
        if isinstance(element, Slot):
            names.add(element.name)
        elif isinstance(element, Choice):
            for option in element.options:
                names |= _slot_names(option)
    return names


def _spoken(text: str) -> str:
    for symbol, words in _SYMBOLS.items():
        text = text.replace(symbol, words)
    return normalize_text(text)


def _unique(pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """(spoken, value) pairs, the first value of each spoken form kept, none empty or long."""
    found: dict[str, str] = {}
    for spoken, value in pairs:
        if spoken and len(spoken.split()) <= MAX_SENTENCE_WORDS:
            found.setdefault(spoken, value)
    return tuple(found.items())


def _range_values(start: int, stop: int, step: int, fractions, multiplier
                  ) -> tuple[tuple[str, str], ...]:
    """A number range spoken in words, valued in digits (times `multiplier`, as hassil)."""
    from hassil.intents import RangeFractionType

    numbers = list(range(start, stop + 1, step))[:MAX_RANGE_VALUES]
    parts = RangeFractionType.get_fractions(fractions) if fractions else []
    pairs = []
    for n in numbers:
        for part in (0, *parts):
            if n < 0:
                continue
            said = number_words(n) + (f" point {number_words(round(part * 10))}" if part else "")
            value = n + part
            value = value * multiplier if multiplier is not None else value
            pairs.append((said, _number(value)))
    return _unique(pairs)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(round(value, 6))


def _home_values(home: Home, list_name: str, domains: list[str] | None
                 ) -> tuple[tuple[str, str], ...]:
    """The home's names for {name} (devices, only those of `domains` when a block requires
    them; a device with no domain is in every block), {area} or {floor}."""
    if list_name == "name":
        named = [(d.name, d.aliases) for d in home.devices
                 if domains is None or d.domain is None or d.domain in domains]
    else:
        named = list(home.areas if list_name == "area" else home.floors)
    return _unique([(normalize_text(said), name) for name, aliases in named
                    for said in (name, *aliases)])


def _text_tokens(text: str) -> tuple:
    """Text as tokens: its pieces between spaces, a _SPACE wherever it has whitespace."""
    for symbol, words in _SYMBOLS.items():
        text = text.replace(symbol, words)
    tokens = []
    for piece in re.split(r"(\s+)", text):
        if piece:
            tokens.append(_SPACE if piece.isspace() else piece)
    return tuple(tokens)


def _permutation(items: list[tuple]) -> _Alt:
    if len(items) > MAX_PERMUTED:
        raise _Dropped(f"they permute more than {MAX_PERMUTED} parts")  # noqa: B904
    return _Alt(tuple(tuple(itertools.chain.from_iterable(
        (_SPACE, *item, _SPACE) for item in order)) for order in itertools.permutations(items)))


def _resolve(tokens: tuple) -> tuple:
    """The tokens with every choice's options resolved, and text glued to a choice (no
    _SPACE between) pushed into each of its options: "fan" [s] -> (fans | fan)."""
    out: list = []
    for token in tokens:
        if isinstance(token, _Alt):
            token = _Alt(tuple(_resolve(option) for option in token.options))
        if out and _glues(out[-1]) and _glues(token):
            out.append(_merge(out.pop(), token))
        else:
            out.append(token)
    return tuple(out)


def _glues(token: object) -> bool:
    return isinstance(token, str | _Alt) and token != _SPACE


def _merge(left: object, right: object) -> object:
    if isinstance(left, str) and isinstance(right, str):
        return left + right
    lefts = left.options if isinstance(left, _Alt) else ((left,),)
    rights = right.options if isinstance(right, _Alt) else ((right,),)
    if len(lefts) * len(rights) > MAX_SPELLINGS:
        raise _Dropped(f"they glue choices of more than {MAX_SPELLINGS} spellings together")
    return _Alt(tuple(_resolve(a + b) for a in lefts for b in rights))


def _to_elements(tokens: tuple) -> tuple:
    """Resolved tokens -> grammar elements: words normalised, empty options made optional."""
    elements: list = []
    for token in tokens:
        if isinstance(token, Slot):
            elements.append(token)
        elif isinstance(token, _Alt):
            elements += _choice(token)
        elif token != _SPACE:
            elements += [Word(word) for word in normalize_text(token).split()]
    return tuple(elements)


def _choice(alt: _Alt) -> list:
    options: dict[str, tuple] = {}
    optional = False
    for option in alt.options:
        elements = _to_elements(option)
        if not elements:
            optional = True
        else:
            options.setdefault(repr(elements), elements)
    if not options:
        return []
    if len(options) == 1 and not optional:
        return list(next(iter(options.values())))
    return [Choice(tuple(options.values()), optional)]


_SKIP = (Choice(tuple(tuple(Word(w) for w in normalize_text(s).split()) for s in SKIP_BEFORE), True),
         Choice(tuple(tuple(Word(w) for w in normalize_text(s).split()) for s in SKIP_AFTER), True))


def _with_skip_words(elements: tuple) -> tuple:
    """Home Assistant's skip words, as it takes them: "could you" before a sentence,
    "please" after it."""
    return (_SKIP[0], *elements, _SKIP[1])


def sample_commands(source: str | Path, home: Home | str | Path | None = None,
                    per_template: int = 2) -> list[tuple[str, str]]:
    """(intent, sentence) pairs that hassil itself writes from the sentences: the first
    `per_template` of each template that can be a closed grammar, with the home's names
    (a block's {name} only its domains' devices, as Home Assistant would resolve them)."""
    from hassil import Intents
    from hassil.intents import TextSlotList
    from hassil.sample import sample_sentence

    intents = Intents.from_dict(_sentences(source))
    home = home if isinstance(home, Home) else read_home(home)
    logging.getLogger("hassil.sample").setLevel(logging.ERROR)  # "no language set": digits
    pairs = []
    for intent in intents.intents.values():
        for block in intent.data:
            context = block.requires_context or {}
            if set(context) - {"domain"} or block.excludes_context:
                continue
            domains = context.get("domain")
            lists = {**intents.slot_lists, **(block.slot_lists or {})}
            for name in HOME_LISTS:
                chosen = domains if name == "name" and isinstance(domains, list) else None
                values = _home_values(home, name, chosen)
                if values:
                    lists[name] = TextSlotList.from_tuples(
                        [(spoken, value) for spoken, value in values], allow_template=False)
            rules = {**intents.expansion_rules, **(block.expansion_rules or {})}
            for sentence in block.sentences:
                if any(n in block.wildcard_list_names or n not in lists
                       for n in sentence.list_names(rules)):
                    continue
                texts = sample_sentence(sentence, lists, rules)  # numbers in digits: fast
                pairs += [(intent.name, text) for text in itertools.islice(texts, per_template)]
    return pairs


def round_trip(grammar, pairs: list[tuple[str, str]]) -> tuple[int, list[tuple[str, str]]]:
    """How many of hassil's (intent, sentence) pairs the grammar parses back to that intent
    (one of its readings), and the pairs it does not."""
    missed = [(intent, text) for intent, text in pairs
              if intent not in {r.intent for r in grammar.readings(text)}]
    return len(pairs) - len(missed), missed
