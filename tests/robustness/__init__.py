"""The bad-input corpus (`test_corpus.py` runs it): one module per kind of case, `case` (what a
case is and the inputs it may spoil), `runner` (running one case and judging its outcome) and
`corpus` (every module registered in order, and the worker process that runs them).
"""
