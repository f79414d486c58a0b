"""Reading a grammar file: Rhino context YAML -> expressions and slot types, every problem
one `GrammarError` line naming the file, the line and what is wrong.

The text is untrusted: YAML aliases and deep nesting are refused before any loader builds it
(`asr.untrusted.check_yaml`), and each expression string is parsed by a small recursive-descent
parser (`_Expr`) into the elements of `asr.grammar.elements`, its brackets nested at most
MAX_NESTING deep (so that no walk of the elements runs out of stack).
"""

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import yaml

from asr.grammar.elements import (
    BUILTIN_SLOTS,
    MAX_NESTING,
    MAX_SENTENCE_WORDS,
    Choice,
    Expression,
    Slot,
    SlotTypes,
    Word,
)
from asr.text import normalize_text
from asr.untrusted import UntrustedInputError, check_yaml

_TOKEN = re.compile(r"\s*(?:(?P<punct>[\[\](),])|(?P<slot>\$[\w.]*(?::\w*)?)|(?P<macro>@\w*)"
                    r"|(?P<word>[^\s\[\](),$@]+))")


# libyaml's parser where PyYAML has it: a grammar may be a megabyte, which PyYAML's own parser
# takes seconds to read (twice: checked, then composed).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class GrammarError(ValueError):
    """A problem in a grammar file: `file:line: problem`, one line."""


def read_grammar(text: str, source: str) -> tuple[list[Expression], SlotTypes]:
    """The expressions and slot types (type -> (spoken, value) pairs) of a grammar's text."""
    return _Reader(text, source).parse()


@dataclass(frozen=True)
class _Macro:
    """A macro: its choice of phrases and the slot names they fill."""

    choice: Choice
    slot_names: frozenset[str]


class _Reader:
    """YAML text -> expressions and slot types, with the line of every problem."""

    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source

    def fail(self, line: int | None, problem: str) -> GrammarError:
        where = f"{self.source}:{line}" if line else self.source
        return GrammarError(f"{where}: {problem}")

    def parse(self) -> tuple[list[Expression], SlotTypes]:
        root = self._compose()
        context = _mapping_get(root, "context")
        if context is None or not isinstance(context, yaml.MappingNode):
            raise self.fail(_line(root), "no 'context:' mapping (expected context: expressions: "
                            "{intent: [expression, ...]}, slots: {type: [value, ...]})")
        unknown = [k for k, _ in context.value if k.value not in ("expressions", "slots", "macros")]
        if unknown:
            raise self.fail(_line(unknown[0]), f"unknown section {shown(unknown[0].value)} under "
                            "context (expected expressions, slots, macros)")
        slots = self._slots(_mapping_get(context, "slots"))
        macros = self._macros(_mapping_get(context, "macros"), slots)
        expressions = self._expressions(_mapping_get(context, "expressions"), slots, macros)
        return expressions, slots

    def _compose(self) -> yaml.Node:
        try:
            check_yaml(self.text, self.source, LOADER)
            root = yaml.compose(self.text, Loader=LOADER)
        except UntrustedInputError as err:
            raise self.fail(err.line, err.problem) from None
        except yaml.YAMLError as err:  # what composing finds beyond the parse (tags)
            raise self.fail(None, f"not valid YAML: {str(err).splitlines()[0]}") from None
        if root is None:
            raise self.fail(None, "empty file")
        return root

    def _slots(self, node: yaml.Node | None) -> SlotTypes:
        slots = {}
        for name, values in self._named_lists(node, "slots"):
            spoken: dict[str, str] = {}
            for value in values:
                said = normalize_text(value.value)
                if not said:
                    raise self.fail(_line(value), f"slot {shown(name)} has a value with no "
                                    f"words: {shown(value.value)}")
                if any(unicodedata.category(c) == "Cc" or c in "\u2028\u2029"
                       for c in str(value.value)):
                    raise self.fail(_line(value), f"slot {shown(name)} has a value with a "
                                    f"control character or line break: {shown(value.value)}")
                if len(said.split()) > MAX_SENTENCE_WORDS:
                    raise self.fail(_line(value), f"slot {shown(name)} has a value of "
                                    f"{len(said.split())} words; a sentence may have at most "
                                    f"{MAX_SENTENCE_WORDS}")
                if said in spoken:
                    raise self.fail(_line(value), f"slot {shown(name)} lists "
                                    f"{shown(value.value)} twice")
                spoken[said] = str(value.value)
            slots[name] = tuple(spoken.items())
        return slots

    def _macros(self, node: yaml.Node | None, slots: dict) -> dict[str, _Macro]:
        """Each macro's choice of phrases, and the slot names its phrases fill (an expression
        that uses the macro must not fill them again: a sentence reports each slot once)."""
        macros: dict[str, _Macro] = {}
        for name, phrases in self._named_lists(node, "macros"):
            parsers = [_Expr(self, p.value, _line(p), slots, {}) for p in phrases]
            options = tuple(parser.sequence() for parser in parsers)
            macros[name] = _Macro(Choice(options), frozenset().union(*(p.names for p in parsers)))
        return macros

    def _expressions(self, node: yaml.Node | None, slots: dict, macros: dict) -> list[Expression]:
        found = [Expression(intent, _Expr(self, e.value, _line(e), slots, macros).sequence(),
                            _line(e), e.value)
                 for intent, items in self._named_lists(node, "expressions") for e in items]
        if not found:
            raise self.fail(_line(node) if node else None, "no expressions: a grammar needs "
                            "context: expressions: {intent: [expression, ...]}")
        return found

    def _named_lists(self, node: yaml.Node | None, section: str
                     ) -> Iterator[tuple[str, list[yaml.ScalarNode]]]:
        """(name, items) of a section that maps names to lists of strings."""
        if node is None or (isinstance(node, yaml.ScalarNode) and node.value == ""):
            return
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(_line(node), f"'{section}' must map names to lists")
        seen = set()
        for key, items in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else ""
            if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
                raise self.fail(_line(key), f"bad name {shown(name)} in '{section}' (letters, "
                                "digits, _ and . only)")
            if name in seen:
                raise self.fail(_line(key), f"{shown(name)} appears twice in '{section}'")
            seen.add(name)
            if not isinstance(items, yaml.SequenceNode) or not items.value:
                raise self.fail(_line(items), f"{section} {shown(name)} must be a non-empty list")
            for item in items.value:
                if not isinstance(item, yaml.ScalarNode) or not str(item.value).strip():
                    raise self.fail(_line(item), f"{section} {shown(name)}: each item must be a "
                                    "non-empty string")
                hidden = invisible(str(item.value))
                if hidden is not None:
                    raise self.fail(_line(item), f"{section} {shown(name)}: {hidden} in "
                                    f"{shown(item.value)} hides where its words break; write a "
                                    "space or nothing there")
            yield name, items.value


def invisible(text: str) -> str | None:
    """The first Unicode format character (category Cf: zero-width space, joiners, bidi marks,
    soft hyphen, ...) in `text`, named, else None. Grammar text is refused with one: nobody
    reading the file sees whether it joins two words or breaks one."""
    found = next((c for c in text if unicodedata.category(c) == "Cf"), None)
    if found is None:
        return None
    return f"the invisible character U+{ord(found):04X} ({unicodedata.name(found, 'unnamed')})"


def shown(text: object, limit: int = 80) -> str:
    """`text` quoted for an error line, cut short: an expression may be kilobytes long."""
    quoted = repr(text)
    return quoted if len(quoted) <= limit else quoted[:limit - 4] + "...'"


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _mapping_get(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


class _Expr:
    """Recursive-descent parser of one expression string."""

    def __init__(self, reader: _Reader, text: str, line: int, slots: dict, macros: dict) -> None:
        self.reader, self.text, self.line, self.slots, self.macros = reader, text, line, slots, macros
        self.tokens = self._tokens()
        self.at = 0
        self.depth = 0  # brackets open
        self.names: set[str] = set()

    def fail(self, problem: str) -> GrammarError:
        return self.reader.fail(self.line, f"{problem} in {shown(self.text)}")

    def _tokens(self) -> list[tuple[str, str]]:
        tokens, position, text = [], 0, self.text.strip()
        while position < len(text):
            found = _TOKEN.match(text, position)
            if found is None or found.end() == position:
                raise self.fail(f"unexpected {shown(text[position:].split()[0])}")
            kind = found.lastgroup or "word"
            tokens.append((kind, found.group(kind)))
            position = found.end()
        return tokens

    def sequence(self) -> tuple:
        elements = self._sequence()
        if self.at < len(self.tokens):
            token = self.tokens[self.at][1]
            raise self.fail(f"unmatched {shown(token)}" if token in "])" else
                            f"{shown(token)} outside brackets")
        if not elements:
            raise self.fail("empty expression")
        return elements

    def _sequence(self) -> tuple:
        elements: list = []
        while self.at < len(self.tokens):
            kind, value = self.tokens[self.at]
            if kind == "punct" and value in "[(":
                if self.depth == MAX_NESTING:
                    raise self.fail(f"brackets nested deeper than {MAX_NESTING} levels")
                self.at += 1
                self.depth += 1
                elements.append(self._choice("]" if value == "[" else ")", value == "("))
                self.depth -= 1
            elif kind == "punct":
                break
            else:
                self.at += 1
                elements += self._atom(kind, value)
        return tuple(elements)

    def _choice(self, close: str, optional: bool) -> Choice:
        options = []
        while True:
            option = self._sequence()
            if not option:
                raise self.fail(f"empty choice in {'(...)' if optional else '[...]'}")
            options.append(option)
            if self.at >= len(self.tokens):
                raise self.fail(f"unclosed {'(' if optional else '['}")
            token = self.tokens[self.at][1]
            self.at += 1
            if token == close:
                return Choice(tuple(options), optional)
            if token != ",":
                raise self.fail(f"{shown(token)} where {shown(close)} or ',' was expected")

    def _atom(self, kind: str, value: str) -> list:
        if kind == "slot":
            slot_type, _, name = value[1:].partition(":")
            if not slot_type or not name:
                raise self.fail(f"bad slot {shown(value)} (write $type:name)")
            if slot_type not in self.slots and slot_type not in BUILTIN_SLOTS:
                raise self.fail(f"unknown slot type {shown(slot_type)}")
            if name in self.names:
                raise self.fail(f"slot name {shown(name)} used twice")
            self.names.add(name)
            return [Slot(slot_type, name)]
        if kind == "macro":
            macro = self.macros.get(value[1:])
            if macro is None:
                raise self.fail(f"unknown macro {shown(value)}")
            again = sorted(macro.slot_names & self.names)
            if again:
                raise self.fail(f"slot name {shown(again[0])} used twice (once through "
                                f"{shown(value)})")
            self.names |= macro.slot_names
            return [macro.choice]
        words = normalize_text(value).split()
        if not words:
            raise self.fail(f"{shown(value)} is not a word")
        return [Word(word) for word in words]
