/*
 * expr_regex.c -- $regexMatch, $regexFind, $regexFindAll over PCRE2, as
 * mongod 7.0.
 *
 * Each takes {input, regex, options?}.  The regex is a string or a BSON
 * regex (whose own flags may not be combined with `options`); options are
 * i, m, s, x (and u, accepted and ignored), patterns always UTF-8.  A
 * nullish input or regex makes $regexMatch false, $regexFind null and
 * $regexFindAll [].  A match is {match, idx, captures}: idx counts code
 * points, an unmatched group captures null.  $regexFindAll resumes after
 * each match; after an empty match it moves on one code point, and it
 * stops once the start reaches the end of the input, so "" on "ab"
 * matches at 0 and 1 (and on "" once), as mongod.
 */
#include "expr_int.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

enum { RX_MATCH, RX_FIND, RX_FIND_ALL };

static const char *rx_name(int which)
{
    return which == RX_MATCH ? "$regexMatch" : which == RX_FIND ? "$regexFind" : "$regexFindAll";
}

/* args: input, regex, options (NULL when absent). */
static int parse_regex(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 51103, "%s expects an object of named arguments but found: %s",
                            op->name, mf_bsonx_type_alias(bson_iter_type(it)));
    static const char *const names[3] = {"input", "regex", "options"};
    bson_iter_t p0, p1, p2, ch;
    bson_iter_t *parts[3] = {&p0, &p1, &p2};
    bool has[3] = {false, false, false};
    int rc;
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        int i = 0;
        while (i < 3 && strcmp(bson_iter_key(&ch), names[i]) != 0)
            i++;
        if (i == 3)
            return mf_error_set(err, 31024, "%s found an unknown argument: %s", op->name,
                                bson_iter_key(&ch));
        *parts[i] = ch;
        has[i] = true;
    }
    if (!has[0])
        return mf_error_set(err, 31022, "%s requires 'input' parameter", op->name);
    if (!has[1])
        return mf_error_set(err, 31023, "%s requires 'regex' parameter", op->name);
    for (int i = 0; i < 3; i++) {
        node *a = NULL;
        if ((has[i] && (rc = mfi_parse_node(parts[i], vsc, &a, err)) != 0) ||
            (rc = mfi_push_arg(n, a, err)) != 0)
            return rc;
    }
    return 0;
}

/* The compiled pattern, or NULL (with rc 0) when input or regex is
 * nullish; errors in mongod's order: types, flags, then the pattern. */
static int rx_compile(int which, const val *in, const val *re, const val *opts,
                      pcre2_code **out, mf_error *err)
{
    const char *name = rx_name(which);
    *out = NULL;
    if (!nullish(in) && in->value_type != BSON_TYPE_UTF8)
        return mf_error_set(err, 51104, "%s needs 'input' to be of type string", name);
    if (!nullish(re) && re->value_type != BSON_TYPE_UTF8 && re->value_type != BSON_TYPE_REGEX)
        return mf_error_set(err, 51105, "%s needs 'regex' to be of type string or regex", name);
    if (!nullish(opts) && opts->value_type != BSON_TYPE_UTF8)
        return mf_error_set(err, 51106, "%s needs 'options' to be of type string", name);
    const char *pattern = NULL, *flags = "";
    size_t plen = 0, flen = 0;
    if (re->value_type == BSON_TYPE_REGEX) {
        pattern = re->value.v_regex.regex;
        plen = strlen(pattern);
        const char *rf = re->value.v_regex.options ? re->value.v_regex.options : "";
        if (*rf && !nullish(opts))
            return mf_error_set(err, 51107, "%s: found regex option(s) specified in both "
                                "'regex' and 'option' fields", name);
        flags = rf;
        flen = strlen(rf);
    } else if (re->value_type == BSON_TYPE_UTF8) {
        pattern = re->value.v_utf8.str;
        plen = re->value.v_utf8.len;
    }
    if (!nullish(opts)) {
        flags = opts->value.v_utf8.str;
        flen = opts->value.v_utf8.len;
    }
    if (pattern && memchr(pattern, 0, plen))
        return mf_error_set(err, 51109, "%s: regular expression cannot contain an embedded "
                            "null byte", name);
    if (memchr(flags, 0, flen))
        return mf_error_set(err, 51110, "%s: regular expression options cannot contain an "
                            "embedded null byte", name);
    uint32_t copts = PCRE2_UTF;
    for (size_t i = 0; i < flen; i++) {
        switch (flags[i]) {
        case 'i': copts |= PCRE2_CASELESS; break;
        case 'm': copts |= PCRE2_MULTILINE; break;
        case 's': copts |= PCRE2_DOTALL; break;
        case 'x': copts |= PCRE2_EXTENDED; break;
        case 'u': break;
        default:
            return mf_error_set(err, 51108, "%s invalid flag in regex options: %c", name,
                                flags[i]);
        }
    }
    if (!pattern || nullish(in))
        return 0;
    int code;
    PCRE2_SIZE at;
    *out = pcre2_compile((PCRE2_SPTR)pattern, plen, copts, &code, &at, NULL);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return mf_error_set(err, 51111, "Invalid Regex in %s: %s", name, (char *)msg);
    }
    return 0;
}

static size_t cp_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static size_t cp_len(unsigned char b)
{
    return b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
}

/* One match at or after byte `*pos` (*cp: its code point index, both
 * moved to the match's start).  *found false when there is none. */
static int rx_next(int which, const pcre2_code *re, pcre2_match_data *md, const val *in,
                   size_t *pos, size_t *cp, bson_t *doc, bool *found, mf_error *err)
{
    const char *s = in->value.v_utf8.str;
    size_t len = in->value.v_utf8.len;
    int r = pcre2_match(re, (PCRE2_SPTR)s, len, *pos, 0, md, NULL);
    *found = false;
    if (r == PCRE2_ERROR_NOMATCH)
        return 0;
    if (r < 0)
        return mf_error_set(err, 51156, "Error occurred while executing the regular expression "
                            "in %s. Result code: %d", rx_name(which), r);
    *found = true;
    if (!doc)
        return 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t ncap = 0;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &ncap);
    *cp += cp_count(s + *pos, ov[0] - *pos);
    *pos = ov[0];
    bson_append_utf8(doc, "match", 5, s + ov[0], (int)(ov[1] - ov[0]));
    bson_append_int32(doc, "idx", 3, (int32_t)*cp);
    bson_t caps;
    bson_append_array_begin(doc, "captures", 8, &caps);
    for (uint32_t i = 1; i <= ncap; i++) {
        char kb[16];
        const char *key;
        size_t kl = mf_uint32_to_key(i - 1, &key, kb, sizeof kb);
        if ((int)i >= r || ov[2 * i] == PCRE2_UNSET)
            bson_append_null(&caps, key, (int)kl);
        else
            bson_append_utf8(&caps, key, (int)kl, s + ov[2 * i], (int)(ov[2 * i + 1] - ov[2 * i]));
    }
    bson_append_array_end(doc, &caps);
    return 0;
}

static int rx_eval(const node *n, ctx *c, val *out, int which)
{
    val v[3];
    int rc;
    for (int i = 0; i < 3; i++)
        v[i].value_type = BSON_TYPE_NULL;
    for (int i = 0; i < 3; i++)
        if (n->args[i] && (rc = mfi_eval(n->args[i], c, &v[i])) != 0) {
            mfi_free_all(v, (size_t)i);
            return rc;
        }
    pcre2_code *re = NULL;
    pcre2_match_data *md = NULL;
    if ((rc = rx_compile(which, &v[0], &v[1], &v[2], &re, c->err)) != 0)
        goto done;
    if (!re) {
        if (which == RX_MATCH) {
            set_bool(out, false);
        } else if (which == RX_FIND) {
            set_null(out);
        } else {
            bson_t b;
            bson_init(&b);
            rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
        }
        goto done;
    }
    if (!(md = pcre2_match_data_create_from_pattern(re, NULL))) {
        rc = mf_error_oom(c->err);
        goto done;
    }
    size_t pos = 0, cp = 0, len = v[0].value.v_utf8.len;
    bool found;
    if (which == RX_MATCH) {
        if ((rc = rx_next(which, re, md, &v[0], &pos, &cp, NULL, &found, c->err)) == 0)
            set_bool(out, found);
    } else if (which == RX_FIND) {
        bson_t doc;
        bson_init(&doc);
        rc = rx_next(which, re, md, &v[0], &pos, &cp, &doc, &found, c->err);
        if (rc == 0 && found)
            rc = mfi_set_steal(out, &doc, BSON_TYPE_DOCUMENT, c->err);
        else
            bson_destroy(&doc);
        if (rc == 0 && !found)
            set_null(out);
    } else {
        bson_t arr;
        uint32_t k = 0;
        bson_init(&arr);
        do { /* at least once: an empty input may match */
            bson_t doc;
            bson_init(&doc);
            rc = rx_next(which, re, md, &v[0], &pos, &cp, &doc, &found, c->err);
            if (rc != 0 || !found) {
                bson_destroy(&doc);
                break;
            }
            char kb[16];
            const char *key;
            size_t kl = mf_uint32_to_key(k++, &key, kb, sizeof kb);
            bson_append_document(&arr, key, (int)kl, &doc);
            bson_destroy(&doc);
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t mlen = ov[1] - ov[0];
            if (mlen == 0) { /* an empty match: on by one code point */
                pos += pos < len ? cp_len((unsigned char)v[0].value.v_utf8.str[pos]) : 1;
                cp++;
            } else {
                cp += cp_count(v[0].value.v_utf8.str + pos, mlen);
                pos += mlen;
            }
        } while (pos < len);
        if (rc == 0)
            rc = mfi_set_steal(out, &arr, BSON_TYPE_ARRAY, c->err);
        else
            bson_destroy(&arr);
    }
done:
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    mfi_free_all(v, 3);
    return rc;
}

static int op_regexmatch(const node *n, ctx *c, val *out) { return rx_eval(n, c, out, RX_MATCH); }
static int op_regexfind(const node *n, ctx *c, val *out) { return rx_eval(n, c, out, RX_FIND); }
static int op_regexfindall(const node *n, ctx *c, val *out)
{
    return rx_eval(n, c, out, RX_FIND_ALL);
}

const op_def mfi_expr_regex_ops[] = {
    {"$regexFind", op_regexfind, 0, 0, parse_regex},
    {"$regexFindAll", op_regexfindall, 0, 0, parse_regex},
    {"$regexMatch", op_regexmatch, 0, 0, parse_regex},
};
const size_t mfi_expr_nregex_ops = sizeof mfi_expr_regex_ops / sizeof mfi_expr_regex_ops[0];
