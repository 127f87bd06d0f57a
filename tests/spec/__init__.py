"""The MongoDB specification tests against MultiforaDB.

- test_unified.py: every test of the unified-format folders in FOLDERS
  (read from ../shared/spec at test time), one pytest case each, run by
  tests/unified's runner on a fresh in-process server;
- test_bson_corpus.py: every BSON corpus `valid` vector round-trips through
  the server byte for byte, every `decodeErrors` vector is refused;
- expected_failures.py: the one list of tests that fail today, each with
  its reason; they run as strict xfails, so the list only shrinks;
- scorecard.py: ``cd tests && python -m spec.scorecard`` runs all of it and
  writes docs/scorecard.md.
"""
