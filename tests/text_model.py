"""A reference model of mongod's text index version 3, written from
mongod's documented behaviour and its formula (docs/text.md), independent
of the C code: tokenizing (delimiters, case and diacritic folding, stop
words, Snowball stems from the ``snowballstemmer`` package), the term
scores of a document, and a $text query's matches and scores."""
from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

import snowballstemmer

STOPWORDS = {}
_DATA = Path(__file__).resolve().parent.parent / "data" / "stopwords"
for _p in _DATA.glob("*.txt"):
    STOPWORDS[_p.stem] = set(_p.read_text(encoding="utf-8").split())

_STEMMERS = {}


def stem(lang, word):
    if lang == "none":
        return word
    if lang not in _STEMMERS:
        _STEMMERS[lang] = snowballstemmer.stemmer(lang)
    return _STEMMERS[lang].stemWord(word)


def is_delim(ch, english):
    c = ord(ch)
    if c < 0x80:
        # Unicode 8.0's White_Space, Dash, Quotation_Mark, Terminal_Punctuation and
        # Pattern_Syntax below 0x80: \t..\r, space, and the punctuation but `_`
        if ch == "'":
            return not english
        if ch == "_":
            return False
        return 9 <= c <= 13 or c == 32 or (33 <= c < 127 and not ch.isalnum())
    cat = unicodedata.category(ch)
    return cat.startswith("Z") or cat in ("Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm")


def fold(s):
    return s.lower()


def strip_marks(s):
    out = []
    for ch in s:
        for d in unicodedata.normalize("NFD", ch):
            if not unicodedata.combining(d):
                out.append(d)
    return "".join(out)


@functools.lru_cache(maxsize=None)
def words(text, lang, stop=True, case=False, diacritic=False):
    english = lang == "english"
    out, cur = [], []
    for ch in text + " ":
        if is_delim(ch, english):
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    res = []
    for w in out:
        lower = fold(w)
        if stop and lower in STOPWORDS.get(lang, ()):
            continue
        t = stem(lang, w if case else lower)
        if not diacritic:
            t = strip_marks(t)
        res.append(t)
    return tuple(res)


def score_string(text, lang, weight, scores):
    ws = words(text, lang)
    counts = {}
    for w in ws:
        counts[w] = counts.get(w, 0) + 1
    for term, c in counts.items():
        freq, exp = 0.0, 0.0
        for _ in range(c):
            exp = exp * 2 if exp else 1.0
            freq += 1 / exp
        coeff = 0.5 * c / len(ws) + 0.5
        adj = 1.1 if len(text.encode()) == len(term.encode()) and text.lower() == term else 1.0
        scores[term] = scores.get(term, 0.0) + weight * freq * coeff * adj


def strings(doc, weights, wildcard, lang, override="language", prefix=""):
    """(text, weight, language) for every string the index takes."""
    if isinstance(doc.get(override), str):
        lang = doc[override].lower()
    for k, v in doc.items():
        if k == override:
            continue
        path = f"{prefix}.{k}" if prefix else k
        w = weights.get(path, 1.0 if wildcard else None)
        below = any(f.startswith(path + ".") for f in weights)
        vals = v if isinstance(v, list) else [v]
        for x in vals:
            if isinstance(x, str) and w is not None:
                yield x, w, lang
            elif isinstance(x, dict) and (wildcard or below):
                yield from strings(x, weights, wildcard, lang, override, path)


def doc_scores(doc, weights, wildcard=False, lang="english"):
    scores = {}
    for text, w, lg in strings(doc, weights, wildcard, lang):
        score_string(text, lg, w, scores)
    return scores


def parse_search(search, lang, case=False, diacritic=False):
    """(bounds terms, positive terms, negated terms, phrases, negated phrases)."""
    pos, neg, phrases, nphrases = [], [], [], []
    i, n = 0, len(search)
    in_neg = in_phrase = False
    prev_ws = True
    quote = 0
    while i < n and search[i].isspace():
        i += 1
    while i < n:
        start = i
        i += 1
        delim = search[start] in '-"'
        if not delim:
            while i < n and not search[i].isspace() and search[i] not in '-"':
                i += 1
        was_ws = prev_ws
        prev_ws = False
        while i < n and search[i].isspace():
            i += 1
            prev_ws = True
        if not delim:
            if in_phrase and in_neg:
                continue
            if in_neg and was_ws:
                in_neg = False
            (neg if in_neg else pos).append(search[start:i])
        elif search[start] == "-":
            if not in_phrase and was_ws:
                in_neg = True
        elif in_phrase:
            (nphrases if in_neg else phrases).append(search[quote + 1:start])
            in_phrase = False
        else:
            in_phrase = True
            if in_neg and was_ws:
                in_neg = False
            quote = start
    bounds = set(words(" ".join(pos), lang))
    terms = set(words(" ".join(pos), lang, case=case, diacritic=diacritic))
    nterms = set(words(" ".join(neg), lang, case=case, diacritic=diacritic))
    return bounds, terms, nterms, set(phrases), set(nphrases)


def _fold_for_phrase(s, case, diacritic):
    if not case:
        s = s.lower()
    if not diacritic:
        s = strip_marks(s)
    return s


def search(docs, weights, query, lang="english", wildcard=False, case=False, diacritic=False,
           qlang=None):
    """{_id: score} of the documents the $text query matches."""
    bounds, terms, nterms, phrases, nphrases = parse_search(query, qlang or lang, case,
                                                            diacritic)
    out = {}
    for d in docs:
        sc = doc_scores(d, weights, wildcard, lang)
        score = sum(sc.get(t, 0.0) for t in bounds)
        if not any(t in sc for t in bounds):
            continue
        strs = list(strings(d, weights, wildcard, lang))
        toks = set()
        for text, _, lg in strs:
            toks.update(words(text, lg, stop=False, case=case, diacritic=diacritic))
        if (case or diacritic) and not (terms & toks):
            continue
        if nterms & toks:
            continue
        def has(p):
            return any(_fold_for_phrase(p, case, diacritic) in _fold_for_phrase(t, case, diacritic)
                       for t, _, _ in strs)
        if not all(has(p) for p in phrases) or any(has(p) for p in nphrases):
            continue
        out[d["_id"]] = score
    return out
