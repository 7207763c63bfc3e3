"""Seams: the only modules of `app/` that touch a dependency's private names (one module per dependency).

Each module says which private name it uses, why (mostly speed), and what public path it replaces, and
exports it under a plain name; the rest of `app/` imports these, never the private name itself.
`tests/seams/test_seams.py` asserts every fenced name and the parameters we rely on, and `pyproject.toml` bounds
each of these packages from above, so an upgrade that moves one fails a test, not production. This package
imports none of them itself: a module that needs one seam does not load the others' dependencies.
"""
