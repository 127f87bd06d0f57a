"""A unified-test-format runner (MongoDB specification tests) over pymongo.

``runner.UnifiedRunner(uri).run(load_spec(path), description)`` runs one test;
see runner.py for what it raises and matcher.py for the matching rules.
"""
from .matcher import MatchError, match
from .runner import Skipped, SpecFailure, UnifiedRunner, Unsupported, load_spec

__all__ = ["MatchError", "Skipped", "SpecFailure", "UnifiedRunner", "Unsupported", "load_spec",
           "match"]
