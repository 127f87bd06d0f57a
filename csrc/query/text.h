/*
 * text.h -- full-text search as mongod 7.0's text index version 3 does it
 * (src/mongo/db/fts): languages, the tokenizer, the spec of a text index,
 * a document's term scores, a $text query and its document-side checks.
 * Private to query/ (index_text.c, plan_text.c, match.c); docs/text.md is
 * the design and the list of what differs from mongod.
 *
 * Tokens.  A string is cut at delimiters (Unicode White_Space, Dash,
 * Hyphen, Quotation_Mark, Terminal_Punctuation, Pattern_Syntax, STerm, as
 * of Unicode 8.0, read from ICU; in English the apostrophe is not one).  Each word is case-folded (simple folding,
 * ICU) and dropped if it is a stop word of the language; then stemmed
 * (Snowball, libstemmer), then its diacritics are removed (NFD, then the
 * code points with the Diacritic property dropped).  A case-sensitive
 * query keeps the word's case; a diacritic-sensitive one its diacritics.
 *
 * Scores (mongod's FTSSpec::scoreDocument, version 2 and 3).  Per string
 * of weight w with N tokens, for a term seen c times:
 *     freq  = sum over its occurrences k = 0..c-1 of 1 / 2^k
 *     coeff = 0.5 * c / N + 0.5
 *     adj   = 1.1 when the whole string is the term (ASCII case aside), else 1
 *     score(term) += w * freq * coeff * adj
 * summed over the document's strings.  A $text query's score of a document
 * is the sum of its scores of the query's terms (TEXT_OR's sum of keys).
 */
#ifndef MF_QUERY_TEXT_H
#define MF_QUERY_TEXT_H

#include "query_int.h"

/* A stop-word list (text_stopwords.c, generated): sorted by bytes. */
typedef struct mfi_text_stops {
    const char *lang;
    const char *const *words;
    size_t n;
} mfi_text_stops;
extern const mfi_text_stops mfi_text_stop_lists[];

/* A language of text index version 3 (mongod's FTSLanguage). */
typedef struct mfi_text_lang {
    const char *name;    /* "english"; "none" */
    const char *code;    /* ISO 639-1 "en", or NULL */
    const char *stemmer; /* the libstemmer algorithm, NULL: no stemming */
    const mfi_text_stops *stops; /* NULL: no stop words */
    int index;           /* position in the table (stemmer caches) */
    int version;         /* the text index version it tokenizes for: 3, or 2
                            (mongod's legacy tokenizer: mfi_text_tokenize) */
} mfi_text_lang;

/* The language named `name` (a name or ISO code, case-insensitive), or
 * NULL: mongod's FTSLanguage::make for version 3 / for `version` (2, 3). */
const mfi_text_lang *mfi_text_lang_find(const char *name);
const mfi_text_lang *mfi_text_lang_find_v(const char *name, int version);

/* Tokenizer options (mongod's FTSTokenizer::Options). */
enum {
    MFI_TOK_STOP = 1,      /* drop stop words */
    MFI_TOK_CASE = 2,      /* keep the case */
    MFI_TOK_DIACRITIC = 4  /* keep diacritics */
};

/* The words of `s` (`len` bytes of UTF-8) in `lang` (a version 2
 * language: mongod's legacy tokenizing, ASCII delimiters and case, no
 * diacritics removed), each given to
 * `fn(arg, word, wlen)` (word valid for the call).  `fn` returns 0 to go
 * on, else that value is returned.  Invalid UTF-8 bytes are taken as
 * Latin-1.  -1: out of memory. */
typedef int (*mfi_text_word_fn)(void *arg, const char *word, size_t wlen);
int mfi_text_tokenize(const mfi_text_lang *lang, const char *s, size_t len, int opts,
                      mfi_text_word_fn fn, void *arg);

/* ------------------------------------------------------------ the spec */

/* A text index's spec (mongod's FTSSpec), from its stored form. */
typedef struct mfi_text_spec {
    char **wfields; /* weighted fields, sorted by bytes */
    double *weights;
    size_t nweights;
    bool wildcard;  /* "$**": every string */
    const mfi_text_lang *default_lang;
    char *override; /* language_override */
    size_t nbefore, nafter; /* prefix and suffix fields of the key pattern */
    char **before, **after;
} mfi_text_spec;

/* From a stored spec (key {_fts: "text", _ftsx: 1, ...}, weights, ...).
 * Errors: DataCorruption for a spec createIndexes would not have stored;
 * InternalError (out of memory). */
int mfi_text_spec_init(mfi_text_spec *ts, const bson_t *spec, mf_error *err);
void mfi_text_spec_clear(mfi_text_spec *ts);

/* createIndexes: the spec `in` (key with "text" fields) as mongod's
 * FTSSpec::fixSpec writes it, into `out` (initialised here): the key
 * {prefix..., _fts: "text", _ftsx: 1, suffix...}, weights (sorted, whole
 * numbers), default_language, language_override, textIndexVersion (3, or 2
 * when asked: mongod 7.0 builds both; 67 "bad textIndexVersion: N" else).
 * Errors: CannotCreateIndex (67) with mongod's messages. */
int mfi_text_fix_spec(const bson_t *in, bson_t *out, mf_error *err);

/* A document's term scores (scoreDocument): a sorted map term -> score. */
typedef struct mfi_text_term {
    char *term;
    double score;
} mfi_text_term;
typedef struct mfi_text_terms {
    mfi_text_term *v;
    size_t n, cap;
} mfi_text_terms;

/* Errors: 17261 a language override of another type than string, 17262
 * "language override unsupported: X"; InternalError (out of memory). */
int mfi_text_score_doc(const mfi_text_spec *ts, const bson_t *doc, mfi_text_terms *out,
                       mf_error *err);
void mfi_text_terms_free(mfi_text_terms *t);
/* The score of `term`, 0 when the document lacks it. */
double mfi_text_terms_get(const mfi_text_terms *t, const char *term);

/* ----------------------------------------------------------- the query */

/* A $text query, parsed (mongod's FTSQueryImpl). */
typedef struct mfi_text_query {
    char *search;
    const mfi_text_lang *lang; /* $language, or NULL: the index's default */
    char *lang_name;           /* as given, for explain */
    bool case_sensitive, diacritic_sensitive;
    /* what the search says, once mfi_text_query_terms has run: */
    char **bounds;   /* terms for the index (folded), sorted, unique */
    size_t nbounds;
    char **terms, **neg_terms; /* as the matcher compares them */
    size_t nterms, nneg_terms;
    char **phrases, **neg_phrases;
    size_t nphrases, nneg_phrases;
} mfi_text_query;

/* Parse the operand of $text ({$search, $language, $caseSensitive,
 * $diacriticSensitive}).  Errors as mongod's: BadValue, TypeMismatch,
 * FailedToParse. */
int mfi_text_query_parse(const bson_iter_t *operand, mfi_text_query *q, mf_error *err);
/* Split the search into terms and phrases in `lang` (the query's
 * $language, else the index's default).  Errors: BadValue an unsupported
 * $language; InternalError. */
int mfi_text_query_terms(mfi_text_query *q, const mfi_text_lang *index_default, mf_error *err);
void mfi_text_query_clear(mfi_text_query *q);

/* mongod's FTSMatcher::matches: the document checks the index cannot
 * answer -- negated terms and phrases, the positive terms of a case- or
 * diacritic-sensitive query, the phrases. */
int mfi_text_doc_matches(const mfi_text_spec *ts, const mfi_text_query *q, const bson_t *doc,
                         bool *match, mf_error *err);

/* parsedTextQuery as explain shows it. */
void mfi_text_query_explain(const mfi_text_query *q, bson_t *out);

/* Where the text part of `filter` is: `*found` when it has one $text;
 * `*operand` is on it when it stands at the top or in a top-level $and,
 * else (`*under_or`) it is inside a $or.  Errors (mongod's checks of the
 * whole filter): BadValue "Too many text expressions", "text expression
 * not allowed in nor". */
int mfi_text_find(const bson_t *filter, bson_iter_t *operand, bool *found, bool *under_or,
                  mf_error *err);

/* ------------------------------------------ the index (index_text.c) */

/* A text index's spec and stored spec, from its descriptor (NULL when it
 * is not a text index); valid while the descriptor is. */
const mfi_text_spec *mfi_text_index_spec(const mf_index_desc *d);
const bson_t *mfi_text_index_stored(const mf_index_desc *d);
/* Append the key encoding of `term` as the index holds it (a long one cut
 * and hashed).  -1: out of memory. */
int mfi_text_key_term(mf_buf *out, const char *term, size_t len);

#endif /* MF_QUERY_TEXT_H */
