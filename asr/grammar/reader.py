"""Reading a grammar file: Rhino context YAML -> expressions and slot types, every problem
one `GrammarError` line naming the file, the line and what is wrong.

The text is untrusted: YAML aliases and deep nesting are refused before any loader builds it
(`asr.untrusted.check_yaml`), and each expression string is parsed by a small recursive-descent
parser (`_Expr`) into the elements of `asr.grammar.elements`.
"""

import re
from collections.abc import Iterator

import yaml

from asr.grammar.elements import BUILTIN_SLOTS, Choice, Expression, Slot, SlotTypes, Word
from asr.text import normalize_text
from asr.untrusted import UntrustedInputError, check_yaml

_TOKEN = re.compile(r"\s*(?:(?P<punct>[\[\](),])|(?P<slot>\$[\w.]*(?::\w*)?)|(?P<macro>@\w*)"
                    r"|(?P<word>[^\s\[\](),$@]+))")


class GrammarError(ValueError):
    """A problem in a grammar file: `file:line: problem`, one line."""


def read_grammar(text: str, source: str) -> tuple[list[Expression], SlotTypes]:
    """The expressions and slot types (type -> (spoken, value) pairs) of a grammar's text."""
    return _Reader(text, source).parse()


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
            raise self.fail(_line(unknown[0]), f"unknown section {unknown[0].value!r} under "
                            "context (expected expressions, slots, macros)")
        slots = self._slots(_mapping_get(context, "slots"))
        macros = self._macros(_mapping_get(context, "macros"), slots)
        expressions = self._expressions(_mapping_get(context, "expressions"), slots, macros)
        return expressions, slots

    def _compose(self) -> yaml.Node:
        try:
            check_yaml(self.text, self.source)
            root = yaml.compose(self.text, Loader=yaml.SafeLoader)
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
                    raise self.fail(_line(value), f"slot {name!r} has a value with no words: "
                                    f"{value.value!r}")
                if said in spoken:
                    raise self.fail(_line(value), f"slot {name!r} lists {value.value!r} twice")
                spoken[said] = str(value.value)
            slots[name] = tuple(spoken.items())
        return slots

    def _macros(self, node: yaml.Node | None, slots: dict) -> dict[str, Choice]:
        macros: dict[str, Choice] = {}
        for name, phrases in self._named_lists(node, "macros"):
            options = tuple(_Expr(self, p.value, _line(p), slots, {}).sequence() for p in phrases)
            macros[name] = Choice(options)
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
                raise self.fail(_line(key), f"bad name {name!r} in '{section}' (letters, digits, "
                                "_ and . only)")
            if name in seen:
                raise self.fail(_line(key), f"{name!r} appears twice in '{section}'")
            seen.add(name)
            if not isinstance(items, yaml.SequenceNode) or not items.value:
                raise self.fail(_line(items), f"{section} {name!r} must be a non-empty list")
            for item in items.value:
                if not isinstance(item, yaml.ScalarNode) or not str(item.value).strip():
                    raise self.fail(_line(item), f"{section} {name!r}: each item must be a "
                                    "non-empty string")
            yield name, items.value


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
        self.names: set[str] = set()

    def fail(self, problem: str) -> GrammarError:
        return self.reader.fail(self.line, f"{problem} in {self.text!r}")

    def _tokens(self) -> list[tuple[str, str]]:
        tokens, position, text = [], 0, self.text.strip()
        while position < len(text):
            found = _TOKEN.match(text, position)
            if found is None or found.end() == position:
                raise self.fail(f"unexpected {text[position:].split()[0]!r}")
            kind = found.lastgroup or "word"
            tokens.append((kind, found.group(kind)))
            position = found.end()
        return tokens

    def sequence(self) -> tuple:
        elements = self._sequence()
        if self.at < len(self.tokens):
            token = self.tokens[self.at][1]
            raise self.fail(f"unmatched {token!r}" if token in "])" else
                            f"{token!r} outside brackets")
        if not elements:
            raise self.fail("empty expression")
        return elements

    def _sequence(self) -> tuple:
        elements: list = []
        while self.at < len(self.tokens):
            kind, value = self.tokens[self.at]
            if kind == "punct" and value in "[(":
                self.at += 1
                elements.append(self._choice("]" if value == "[" else ")", value == "("))
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
                raise self.fail(f"{token!r} where {close!r} or ',' was expected")

    def _atom(self, kind: str, value: str) -> list:
        if kind == "slot":
            slot_type, _, name = value[1:].partition(":")
            if not slot_type or not name:
                raise self.fail(f"bad slot {value!r} (write $type:name)")
            if slot_type not in self.slots and slot_type not in BUILTIN_SLOTS:
                raise self.fail(f"unknown slot type {slot_type!r}")
            if name in self.names:
                raise self.fail(f"slot name {name!r} used twice")
            self.names.add(name)
            return [Slot(slot_type, name)]
        if kind == "macro":
            if value[1:] not in self.macros:
                raise self.fail(f"unknown macro {value!r}")
            return [self.macros[value[1:]]]
        words = normalize_text(value).split()
        if not words:
            raise self.fail(f"{value!r} is not a word")
        return [Word(word) for word in words]
