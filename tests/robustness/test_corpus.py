"""Bad inputs, tried as an attacker and a careless user would, each case a test: it must end
`ok`, the one-line error expected (exit 1 or 2) or the right result; else it is a `traceback`
(an exception escaped, or "Traceback" was printed), a `hang` (over its timeout), `silent` (no
error where one was due, or a wrong result) or `messy` (an error not on exactly one line).

Each case runs against fresh copies of a tiny untrained model directory, a language model, a
grammar and a 1 s clip of real speech (`runner.prepare`): a spoiled model directory
(config.yaml, weights, tokenizer, language model), spoiled ONNX exports and export folders,
bad arguments to every CLI, bad calls to the Python API, unusual but valid inputs whose result
must still be right, output files that must not replace an input, and training directories
that must not be overwritten or hang a run. Every CLI runs in-process through its
`main(argv)`, in a worker process that is replaced when a case hangs.

The suite runs the cases of IN_SUITE; `pytest tests/robustness --whole-corpus` runs all of
them (over 450, a few minutes more).
"""

from pathlib import Path

import pytest

from robustness.case import CASES
from robustness.corpus import Corpus, module_of
from robustness.runner import prepare

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

IN_SUITE = {"grammar", "assistant", "export", "arrays", "outputs", "rundirs", "round_five"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    shared, scratch = tmp_path_factory.mktemp("shared"), tmp_path_factory.mktemp("scratch")
    prepare(shared)
    runner = Corpus(Path(shared), Path(scratch))
    yield runner
    runner.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per case of IN_SUITE, or of the whole corpus with --whole-corpus."""
    whole = metafunc.config.getoption("whole_corpus")
    chosen = [i for i, c in enumerate(CASES) if whole or module_of(c) in IN_SUITE]
    metafunc.parametrize("index", chosen, ids=[f"{module_of(CASES[i])}: {CASES[i].name}"
                                              for i in chosen])


def test_a_bad_input_ends_ok(corpus, index):
    outcome = corpus.run(index)
    assert outcome.verdict == "ok", f"{outcome.verdict}: {outcome.detail} ({outcome.seconds:.1f} s)"
