/*
 * geo_s2.cc -- geo.h over Google's S2 geometry: the one C++ file of the
 * query layer (docs/geo.md says why S2, and why C++ here only).
 *
 * What it follows (mongod 7.0, read for behaviour, not copied):
 *
 *   GeoParser            the GeoJSON and legacy parsers, their checks in
 *                        their order and their BadValue messages;
 *   GeometryContainer    parseFromStorage (GeoJSON, else a legacy pair),
 *                        parseFromQuery ($box, $center, $polygon,
 *                        $centerSphere, $geometry), contains, intersects;
 *   GeoExpression        the $geoWithin / $geoIntersects operand;
 *   GeoMatchExpression   a stored value projected into the query's CRS,
 *                        then contains / intersects.
 *
 * Coordinate reference systems, as mongod's: FLAT (legacy pairs, $box,
 * $polygon, $center: planar x/y), SPHERE (GeoJSON, $centerSphere: S2 on
 * the unit sphere) and STRICT_SPHERE (a Polygon whose crs is
 * "urn:x-mongodb:crs:strictwinding:EPSG:4326": one loop, its winding
 * kept, so it may cover more than a hemisphere).  A point keeps both its
 * flat pair and its S2 point, so a GeoJSON point answers a $box and a
 * legacy pair with valid longitude/latitude answers a $geometry.
 *
 * A point on S2's side is tested as mongod tests it: as its leaf cell
 * (S2Cell(point)), so a point on a polygon's edge is within it.
 *
 * Differences kept: mongod links an old S2 (2011); Debian's is 0.10.
 * Where mongod's message carries the old library's own words ("Loop is
 * not valid: ... <reason>", "Polygon isn't valid: <reason> ..."), the
 * reason here is the new library's.
 */
#include <bson/bson.h> /* before the extern "C" block: it includes C++ headers */

extern "C" {
#include "geo.h"
#include "../bsonx/bsonx.h"
}

#include <s2/s1angle.h>
#include <s2/s1chord_angle.h>
#include <s2/s2cap.h>
#include <s2/s2cell.h>
#include <s2/s2cell_id.h>
#include <s2/s2error.h>
#include <s2/s2latlng.h>
#include <s2/s2loop.h>
#include <s2/s2metrics.h>
#include <s2/s2polygon.h>
#include <s2/s2polyline.h>
#include <s2/s2region_coverer.h>
#include <s2/s2region_intersection.h>
#include <s2/s2region_union.h>

#include <cmath>
#include <cstdarg>
#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

namespace {

enum Crs { FLAT, SPHERE, STRICT_SPHERE };

struct Flat {
    double x = 0, y = 0;
};

/* A status: 0 or BadValue with its message. */
struct Status {
    int code = 0;
    std::string msg;
    bool ok() const { return code == 0; }
};

Status bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
Status bad(const char *fmt, ...)
{
    char buf[MF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    Status s;
    s.code = MF_BadValue;
    s.msg = buf;
    return s;
}

/* ------------------------------------------------------- BSON helpers */

const char *type_name(const bson_iter_t *it)
{
    if (!it)
        return "missing";
    return mf_bsonx_type_alias(bson_iter_type(it));
}

/* An element's value as mongod's BSONElement::toString(false) writes it. */
std::string val_str(const bson_iter_t *it)
{
    if (!it)
        return "EOO";
    char buf[512];
    mf_bsonx_elem_to_string(it, false, buf, sizeof buf);
    return buf;
}

/* An element with its name, as BSONElement::toString() ("a: 1"). */
std::string elem_str(const bson_iter_t *it)
{
    char buf[512];
    mf_bsonx_elem_to_string(it, true, buf, sizeof buf);
    return buf;
}

std::string doc_str(const bson_t *doc)
{
    char buf[512];
    mf_bsonx_to_string(doc, buf, sizeof buf);
    return buf;
}

bool is_number(const bson_iter_t *it)
{
    if (!it)
        return false;
    bson_type_t t = bson_iter_type(it);
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

double number(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return (double)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: return bson_iter_double(it);
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t d;
        char s[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &d);
        bson_decimal128_to_string(&d, s);
        return strtod(s, nullptr);
    }
    default: return 0;
    }
}

bool is_obj(const bson_iter_t *it)
{
    return it && (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it));
}

/* An iterator that can live in a std::vector: libbson aligns bson_iter_t
 * to 128 bytes by an attribute on its typedef, which a template argument
 * loses (a vector of bson_iter_t is misaligned: UBSan,
 * /query/geo/within_and_intersects). */
struct alignas(bson_iter_t) It {
    bson_iter_t it;
};
typedef std::vector<It> Kids;

/* The elements of a document or array value (copies of iterators). */
Kids children(const bson_iter_t *it)
{
    Kids out;
    It c;
    if (is_obj(it) && bson_iter_recurse(it, &c.it))
        while (bson_iter_next(&c.it))
            out.push_back(c);
    return out;
}

/* The field `name` of the document value `it`: found into *out. */
bool field(const bson_iter_t *doc, const char *name, bson_iter_t *out)
{
    bson_iter_t c;
    if (!is_obj(doc) || !bson_iter_recurse(doc, &c))
        return false;
    return bson_iter_find(&c, name) && (*out = c, true);
}

/* The document `it` holds, as a view. */
std::string obj_str(const bson_iter_t *it)
{
    bson_t view;
    if (!mf_bsonx_doc_view(it, &view)) {
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_ARRAY(it))
            return val_str(it);
        bson_iter_array(it, &len, &data);
        if (!bson_init_static(&view, data, len))
            return val_str(it);
    }
    return doc_str(&view);
}

/* ---------------------------------------------------------- shapes */

bool valid_lng_lat(double lng, double lat)
{
    return lat >= -90 && lat <= 90 && lng >= -180 && lng <= 180;
}

S2Point to_s2(double lng, double lat)
{
    return S2LatLng::FromDegrees(lat, lng).Normalized().ToPoint();
}

struct Point {
    Crs crs = FLAT;
    Flat flat;
    S2Point p;
    S2Cell cell;
    /* Into SPHERE (mongod's ShapeProjection::projectInto). */
    void to_sphere()
    {
        if (crs != FLAT)
            return;
        p = to_s2(flat.x, flat.y);
        cell = S2Cell(p);
        crs = SPHERE;
    }
    bool can_project(Crs to) const
    {
        return crs == to || crs == SPHERE || valid_lng_lat(flat.x, flat.y);
    }
};

struct Poly {
    Crs crs = SPHERE;
    std::unique_ptr<S2Polygon> s2; /* SPHERE, and STRICT_SPHERE's one loop */
    std::vector<Flat> flat;        /* FLAT ($polygon) */
};

struct Cap {
    Crs crs = FLAT;
    Flat center;
    double radius = 0;
    S2Cap cap;
};

struct Box {
    Flat min, max;
};

/* A geometry: one shape, or the parts of a Multi* or GeometryCollection
 * (kind says which).  Points, lines and polygons of a collection are
 * each kept in the list of their kind, a Multi*'s members in theirs, as
 * mongod's containment and intersection read them the same either way. */
enum Kind { K_POINT, K_LINE, K_POLYGON, K_BOX, K_CAP, K_MULTIPOINT, K_MULTILINE,
            K_MULTIPOLYGON, K_COLLECTION };

struct Geometry {
    Kind kind = K_POINT;
    std::vector<Point> points;
    std::vector<std::unique_ptr<S2Polyline>> lines;
    std::vector<Poly> polys;
    Box box;
    Cap cap;

    Crs native_crs() const
    {
        switch (kind) {
        case K_POINT: return points[0].crs;
        case K_POLYGON: return polys[0].crs;
        case K_BOX: return FLAT;
        case K_CAP: return cap.crs;
        default: return SPHERE;
        }
    }
    bool can_project(Crs to) const
    {
        if (kind == K_POINT)
            return points[0].can_project(to);
        if (kind == K_POLYGON)
            return polys[0].crs == to || (polys[0].crs == STRICT_SPHERE && to == SPHERE);
        return native_crs() == to;
    }
    void project(Crs to)
    {
        if (kind == K_POINT && to == SPHERE)
            points[0].to_sphere();
        if (kind == K_POINT && to == FLAT)
            points[0].crs = FLAT;
        /* a strict polygon is kept as it is: its S2 polygon is already the
         * loop with its winding, which is what SPHERE operations read */
        if (kind == K_POLYGON && polys[0].crs == STRICT_SPHERE && to == SPHERE)
            polys[0].crs = SPHERE;
    }
    bool supports_contains() const
    {
        return kind == K_POLYGON || kind == K_BOX || kind == K_CAP || kind == K_MULTIPOLYGON ||
               (kind == K_COLLECTION && !polys.empty());
    }
};

/* ------------------------------------------------------------ parsers */

/* mongod's parseFlatPointCoordinates + parseFlatPoint. */
Status parse_flat_point(const bson_iter_t *elem, Flat *out, bool allow_more)
{
    if (!is_obj(elem))
        return bad("Point must be an array or object, instead got type %s", type_name(elem));
    Kids kids = children(elem);
    const bson_iter_t *x = kids.size() > 0 ? &kids[0].it : nullptr;
    const bson_iter_t *y = kids.size() > 1 ? &kids[1].it : nullptr;
    if (!is_number(x))
        return bad("Point must only contain numeric elements, instead got type %s", type_name(x));
    if (!is_number(y))
        return bad("Point must only contain numeric elements, instead got type %s", type_name(y));
    if (!allow_more && kids.size() > 2)
        return bad("Point must only contain two numeric elements");
    out->x = number(x);
    out->y = number(y);
    if (!std::isfinite(out->x) || !std::isfinite(out->y))
        return bad("Point coordinates must be finite numbers");
    return Status();
}

Status coord_to_point(double lng, double lat, S2Point *out)
{
    if (!valid_lng_lat(lng, lat))
        return bad("Longitude/latitude is out of bounds, lng: %g lat: %g", lng, lat);
    *out = to_s2(lng, lat);
    return Status();
}

Status parse_geojson_coordinate(const bson_iter_t *elem, S2Point *out)
{
    if (!elem || !BSON_ITER_HOLDS_ARRAY(elem))
        return bad("GeoJSON coordinates must be an array, instead got type %s", type_name(elem));
    Flat f;
    Status s = parse_flat_point(elem, &f, true);
    if (!s.ok())
        return s;
    return coord_to_point(f.x, f.y, out);
}

Status parse_coordinates(const bson_iter_t *elem, std::vector<S2Point> *out)
{
    if (!elem || !BSON_ITER_HOLDS_ARRAY(elem))
        return bad("GeoJSON coordinates must be an array of coordinates, instead got type %s",
                   type_name(elem));
    for (const It &ci : children(elem)) {
        const bson_iter_t &c = ci.it;
        S2Point p;
        Status s = parse_geojson_coordinate(&c, &p);
        if (!s.ok())
            return s;
        out->push_back(p);
    }
    return Status();
}

void erase_duplicates(std::vector<S2Point> *v)
{
    if (v->size() < 2)
        return;
    size_t i = 0;
    while (i < v->size() - 1) {
        if ((*v)[i] == (*v)[i + 1])
            v->erase(v->begin() + i + 1);
        else
            i++;
    }
}

std::string s2_reason(const S2Error &e)
{
    return e.text();
}

/* How many vertices loops a and b share. */
int shared_vertices(const S2Loop &a, const S2Loop &b)
{
    std::set<std::vector<double>> va;
    for (int i = 0; i < a.num_vertices(); i++)
        va.insert({a.vertex(i).x(), a.vertex(i).y(), a.vertex(i).z()});
    int n = 0;
    for (int i = 0; i < b.num_vertices(); i++)
        n += va.count({b.vertex(i).x(), b.vertex(i).y(), b.vertex(i).z()}) ? 1 : 0;
    return n;
}

/* mongod's parseGeoJSONPolygonCoordinates (with validation). */
Status parse_polygon_coords(const bson_iter_t *elem, std::unique_ptr<S2Polygon> *out)
{
    if (!elem || !BSON_ITER_HOLDS_ARRAY(elem))
        return bad("Polygon coordinates must be an array, instead got type %s", type_name(elem));
    std::vector<std::unique_ptr<S2Loop>> loops;
    Kids rings = children(elem);
    for (const It &ri : rings) {
        const bson_iter_t &ring = ri.it;
        std::vector<S2Point> pts;
        Status s = parse_coordinates(&ring, &pts);
        if (!s.ok())
            return s;
        if (pts.empty())
            return bad("Loop has no vertices: %s", val_str(&ring).c_str());
        if (pts.front() != pts.back())
            return bad("Loop is not closed, first vertex does not equal last vertex: %s",
                       val_str(&ring).c_str());
        erase_duplicates(&pts);
        pts.pop_back();
        if (pts.size() < 3)
            return bad("Loop must have at least 3 different vertices, %zu unique vertices were "
                       "provided: %s",
                       pts.size(), val_str(&ring).c_str());
        loops.push_back(std::make_unique<S2Loop>(pts, S2Debug::DISABLE));
        S2Loop *loop = loops.back().get();
        S2Error e;
        if (loop->FindValidationError(&e))
            return bad("Loop is not valid: %s %s", val_str(&ring).c_str(), s2_reason(e).c_str());
        loop->Normalize();
        if (loops.size() > 1 && !loops[0]->Contains(*loop))
            return bad("Secondary loops not contained by first exterior loop - secondary loops "
                       "must be holes: %s first loop: %s",
                       val_str(&ring).c_str(), val_str(&rings[0].it).c_str());
    }
    if (loops.empty())
        return bad("Polygon has no loops.");
    auto poly = std::make_unique<S2Polygon>(std::move(loops), S2Debug::DISABLE);
    S2Error e;
    if (poly->FindValidationError(&e))
        return bad("Polygon isn't valid: %s %s", s2_reason(e).c_str(), elem_str(elem).c_str());
    for (int i = 1; i < poly->num_loops(); i++) {
        int parent = poly->GetParent(i);
        if (parent >= 0 && shared_vertices(*poly->loop(parent), *poly->loop(i)) > 1)
            return bad("Loop %d shares more than one vertex with its parent loop %d: %s", i, parent,
                       elem_str(elem).c_str());
    }
    if (poly->GetLastDescendant(0) < poly->num_loops() - 1)
        return bad("Only one exterior polygon loop is allowed: %s", elem_str(elem).c_str());
    for (int i = 0; i < poly->num_loops(); i++)
        if (poly->loop(i)->depth() > 1)
            return bad("Polygon interior loops cannot be nested: %s", elem_str(elem).c_str());
    *out = std::move(poly);
    return Status();
}

/* mongod's parseBigSimplePolygonCoordinates: one loop, winding kept. */
Status parse_big_polygon_coords(const bson_iter_t *elem, std::unique_ptr<S2Polygon> *out)
{
    if (!elem || !BSON_ITER_HOLDS_ARRAY(elem))
        return bad("Coordinates of polygon must be an array, instead got type %s",
                   type_name(elem));
    Kids rings = children(elem);
    if (rings.size() != 1)
        return bad("Only one simple loop is allowed in a big polygon, instead provided %zu loops: %s",
                   rings.size(), val_str(elem).c_str());
    std::vector<S2Point> pts;
    Status s = parse_coordinates(&rings[0].it, &pts);
    if (!s.ok())
        return s;
    if (pts.empty())
        return bad("Loop has no vertices: %s", val_str(&rings[0].it).c_str());
    if (pts.front() != pts.back())
        return bad("Loop is not closed, first vertex does not equal last vertex: %s",
                   val_str(&rings[0].it).c_str());
    erase_duplicates(&pts);
    pts.pop_back();
    if (pts.size() < 3)
        return bad("Loop must have at least 3 different vertices, %zu unique vertices were "
                   "provided: %s",
                   pts.size(), val_str(elem).c_str());
    auto loop = std::make_unique<S2Loop>(pts, S2Debug::DISABLE);
    S2Error e;
    if (loop->FindValidationError(&e))
        return bad("Loop is not valid: %s %s", val_str(elem).c_str(), s2_reason(e).c_str());
    *out = std::make_unique<S2Polygon>(std::move(loop), S2Debug::DISABLE);
    return Status();
}

/* mongod's parseGeoJSONCRS: the object `obj` (a GeoJSON document). */
Status parse_crs(const bson_iter_t *obj, Crs *crs, bool allow_strict)
{
    *crs = SPHERE;
    bson_iter_t c;
    if (!field(obj, "crs", &c))
        return Status();
    if (!is_obj(&c))
        return bad("GeoJSON CRS must be an object, instead got type %s", type_name(&c));
    bson_iter_t t;
    if (!field(&c, "type", &t) || !BSON_ITER_HOLDS_UTF8(&t) ||
        strcmp(bson_iter_utf8(&t, nullptr), "name") != 0)
        return bad("GeoJSON CRS must have field \"type\": \"name\"");
    bson_iter_t props;
    bool has_props = field(&c, "properties", &props);
    if (!has_props || !is_obj(&props))
        return bad("CRS must have field \"properties\" which is an object, instead got type %s",
                   type_name(has_props ? &props : nullptr));
    bson_iter_t name;
    bool has_name = field(&props, "name", &name);
    if (!has_name || !BSON_ITER_HOLDS_UTF8(&name))
        return bad("In CRS, \"properties.name\" must be a string, instead got type %s",
                   type_name(has_name ? &name : nullptr));
    const char *n = bson_iter_utf8(&name, nullptr);
    if (strcmp(n, "urn:ogc:def:crs:OGC:1.3:CRS84") == 0 || strcmp(n, "EPSG:4326") == 0) {
        *crs = SPHERE;
    } else if (strcmp(n, "urn:x-mongodb:crs:strictwinding:EPSG:4326") == 0) {
        if (!allow_strict)
            return bad("Strict winding order CRS is only supported by polygon");
        *crs = STRICT_SPHERE;
    } else {
        return bad("Unknown CRS name: %s", n);
    }
    return Status();
}

Status parse_line_coords(const bson_iter_t *elem, std::unique_ptr<S2Polyline> *out)
{
    std::vector<S2Point> v;
    Status s = parse_coordinates(elem, &v);
    if (!s.ok())
        return s;
    erase_duplicates(&v);
    if (v.size() < 2)
        return bad("GeoJSON LineString must have at least 2 vertices, instead got %zu vertices: %s",
                   v.size(), val_str(elem).c_str());
    auto line = std::make_unique<S2Polyline>(v, S2Debug::DISABLE);
    S2Error e;
    if (line->FindValidationError(&e))
        return bad("GeoJSON LineString is not valid: %s %s", s2_reason(e).c_str(),
                   val_str(elem).c_str());
    *out = std::move(line);
    return Status();
}

enum GeoJsonType { GJ_UNKNOWN, GJ_POINT, GJ_LINESTRING, GJ_POLYGON, GJ_MULTIPOINT,
                   GJ_MULTILINESTRING, GJ_MULTIPOLYGON, GJ_COLLECTION };

GeoJsonType geojson_type(const bson_iter_t *obj)
{
    bson_iter_t t;
    if (!field(obj, "type", &t) || !BSON_ITER_HOLDS_UTF8(&t))
        return GJ_UNKNOWN;
    static const struct {
        const char *name;
        GeoJsonType type;
    } names[] = {{"Point", GJ_POINT}, {"LineString", GJ_LINESTRING}, {"Polygon", GJ_POLYGON},
                 {"MultiPoint", GJ_MULTIPOINT}, {"MultiLineString", GJ_MULTILINESTRING},
                 {"MultiPolygon", GJ_MULTIPOLYGON}, {"GeometryCollection", GJ_COLLECTION}};
    const char *s = bson_iter_utf8(&t, nullptr);
    for (const auto &n : names)
        if (strcmp(s, n.name) == 0)
            return n.type;
    return GJ_UNKNOWN;
}

/* "coordinates" of `obj`, or null. */
bool coords_of(const bson_iter_t *obj, bson_iter_t *out)
{
    return field(obj, "coordinates", out);
}

Status parse_geojson_point(const bson_iter_t *obj, Point *out)
{
    Crs crs;
    Status s = parse_crs(obj, &crs, false);
    if (!s.ok())
        return s;
    bson_iter_t c;
    bool has = coords_of(obj, &c);
    s = parse_flat_point(has ? &c : nullptr, &out->flat, true);
    if (!s.ok())
        return s;
    if (!valid_lng_lat(out->flat.x, out->flat.y))
        return bad("Longitude/latitude is out of bounds, lng: %g lat: %g", out->flat.x,
                   out->flat.y);
    out->crs = FLAT;
    out->to_sphere();
    return Status();
}

Status parse_geojson_line(const bson_iter_t *obj, Geometry *g)
{
    Crs crs;
    Status s = parse_crs(obj, &crs, false);
    if (!s.ok())
        return s;
    bson_iter_t c;
    bool has = coords_of(obj, &c);
    std::unique_ptr<S2Polyline> line;
    s = parse_line_coords(has ? &c : nullptr, &line);
    if (s.ok())
        g->lines.push_back(std::move(line));
    return s;
}

Status parse_geojson_polygon(const bson_iter_t *obj, Geometry *g)
{
    Poly p;
    Status s = parse_crs(obj, &p.crs, true);
    if (!s.ok())
        return s;
    bson_iter_t c;
    bool has = coords_of(obj, &c);
    if (p.crs == STRICT_SPHERE)
        s = parse_big_polygon_coords(has ? &c : nullptr, &p.s2);
    else
        s = parse_polygon_coords(has ? &c : nullptr, &p.s2);
    if (s.ok())
        g->polys.push_back(std::move(p));
    return s;
}

Status parse_multipoint(const bson_iter_t *obj, Geometry *g)
{
    Crs crs;
    Status s = parse_crs(obj, &crs, false);
    if (!s.ok())
        return s;
    bson_iter_t c;
    bool has = coords_of(obj, &c);
    std::vector<S2Point> pts;
    s = parse_coordinates(has ? &c : nullptr, &pts);
    if (!s.ok())
        return s;
    if (pts.empty())
        return bad("MultiPoint coordinates must have at least 1 element");
    for (const S2Point &p : pts) {
        Point pt;
        pt.crs = SPHERE;
        pt.p = p;
        pt.cell = S2Cell(p);
        S2LatLng ll(p);
        pt.flat.x = ll.lng().degrees();
        pt.flat.y = ll.lat().degrees();
        g->points.push_back(pt);
    }
    return Status();
}

Status parse_multiline(const bson_iter_t *obj, Geometry *g)
{
    Crs crs;
    Status s = parse_crs(obj, &crs, false);
    if (!s.ok())
        return s;
    bson_iter_t c;
    bool has = coords_of(obj, &c);
    if (!has || !BSON_ITER_HOLDS_ARRAY(&c))
        return bad("MultiLineString coordinates must be an array, instead got type %s",
                   type_name(has ? &c : nullptr));
    size_t n = 0;
    for (const It &li : children(&c)) {
        const bson_iter_t &l = li.it;
        std::unique_ptr<S2Polyline> line;
        s = parse_line_coords(&l, &line);
        if (!s.ok())
            return s;
        g->lines.push_back(std::move(line));
        n++;
    }
    if (n == 0)
        return bad("MultiLineString coordinates must have at least 1 element");
    return Status();
}

Status parse_multipolygon(const bson_iter_t *obj, Geometry *g)
{
    Crs crs;
    Status s = parse_crs(obj, &crs, false);
    if (!s.ok())
        return s;
    bson_iter_t c;
    bool has = coords_of(obj, &c);
    if (!has || !BSON_ITER_HOLDS_ARRAY(&c))
        return bad("MultiPolygon coordinates must be an array, instead got type %s",
                   type_name(has ? &c : nullptr));
    size_t n = 0;
    for (const It &pi : children(&c)) {
        const bson_iter_t &pc = pi.it;
        Poly p;
        s = parse_polygon_coords(&pc, &p.s2);
        if (!s.ok())
            return s;
        g->polys.push_back(std::move(p));
        n++;
    }
    if (n == 0)
        return bad("MultiPolygon coordinates must have at least 1 element");
    return Status();
}

Status parse_geojson(const bson_iter_t *obj, Geometry *g);

Status parse_collection(const bson_iter_t *obj, Geometry *g)
{
    bson_iter_t c;
    bool has = field(obj, "geometries", &c);
    if (!has || !BSON_ITER_HOLDS_ARRAY(&c))
        return bad("GeometryCollection geometries must be an array, instead got type %s",
                   type_name(has ? &c : nullptr));
    Kids geoms = children(&c);
    if (geoms.empty())
        return bad("GeometryCollection geometries must have at least 1 element");
    for (size_t i = 0; i < geoms.size(); i++) {
        const bson_iter_t *e = &geoms[i].it;
        if (!BSON_ITER_HOLDS_DOCUMENT(e))
            return bad("Element %zu of \"geometries\" must be an object, instead got type %s: %s", i,
                       type_name(e), val_str(e).c_str());
        GeoJsonType t = geojson_type(e);
        if (t == GJ_UNKNOWN)
            return bad("Unknown GeoJSON type: %s", val_str(e).c_str());
        if (t == GJ_COLLECTION)
            return bad("GeometryCollections cannot be nested: %s", val_str(e).c_str());
        Status s;
        if (t == GJ_POINT) {
            Point p;
            s = parse_geojson_point(e, &p);
            if (s.ok())
                g->points.push_back(p);
        } else if (t == GJ_POLYGON) {
            /* a strict-winding polygon inside a collection: mongod parses
             * it too; it is kept as any polygon */
            s = parse_geojson_polygon(e, g);
        } else {
            s = parse_geojson(e, g);
        }
        if (!s.ok())
            return s;
    }
    return Status();
}

/* mongod's GeometryContainer::parseFromGeoJSON, into `g` (whose kind it
 * sets when `g` is empty). */
Status parse_geojson(const bson_iter_t *obj, Geometry *g)
{
    GeoJsonType t = geojson_type(obj);
    switch (t) {
    case GJ_UNKNOWN: return bad("unknown GeoJSON type: %s", obj_str(obj).c_str());
    case GJ_POINT: {
        g->kind = K_POINT;
        Point p;
        Status s = parse_geojson_point(obj, &p);
        if (s.ok())
            g->points.push_back(p);
        return s;
    }
    case GJ_LINESTRING: g->kind = K_LINE; return parse_geojson_line(obj, g);
    case GJ_POLYGON: g->kind = K_POLYGON; return parse_geojson_polygon(obj, g);
    case GJ_MULTIPOINT: g->kind = K_MULTIPOINT; return parse_multipoint(obj, g);
    case GJ_MULTILINESTRING: g->kind = K_MULTILINE; return parse_multiline(obj, g);
    case GJ_MULTIPOLYGON: g->kind = K_MULTIPOLYGON; return parse_multipolygon(obj, g);
    case GJ_COLLECTION: g->kind = K_COLLECTION; return parse_collection(obj, g);
    }
    return bad("unknown GeoJSON type");
}

/* mongod's parseFromGeoJSON for a whole value (kinds inside a collection
 * keep the collection's kind). */
Status parse_geojson_value(const bson_iter_t *obj, Geometry *g)
{
    GeoJsonType t = geojson_type(obj);
    Status s = parse_geojson(obj, g);
    if (t == GJ_COLLECTION)
        g->kind = K_COLLECTION;
    return s;
}

/* mongod's parseFromStorage. */
Status parse_stored(const bson_iter_t *elem, Geometry *g)
{
    if (!is_obj(elem))
        return bad("geo element must be an array or object: %s", elem_str(elem).c_str());
    if (BSON_ITER_HOLDS_DOCUMENT(elem)) {
        Status s = parse_geojson_value(elem, g);
        if (s.ok())
            return s;
        /* perhaps a legacy point in a document, {x: 1, y: 2} */
        Point p;
        if (parse_flat_point(elem, &p.flat, true).ok()) {
            *g = Geometry();
            g->kind = K_POINT;
            g->points.push_back(p);
            return Status();
        }
        return s;
    }
    g->kind = K_POINT;
    Point p;
    Status s = parse_flat_point(elem, &p.flat, true);
    if (s.ok())
        g->points.push_back(p);
    return s;
}

/* mongod's parseFromQuery: `elem` is one element of the operator's
 * document ($box: [...], $geometry: {...}). */
Status parse_query_shape(const bson_iter_t *elem, Geometry *g)
{
    const char *k = bson_iter_key(elem);
    bool known = is_obj(elem) && (strcmp(k, "$box") == 0 || strcmp(k, "$center") == 0 ||
                                  strcmp(k, "$polygon") == 0 || strcmp(k, "$centerSphere") == 0 ||
                                  strcmp(k, "$geometry") == 0);
    if (!known)
        return bad("unknown geo specifier: %s", elem_str(elem).c_str());
    Kids kids = children(elem);
    auto kid = [&](size_t i) -> const bson_iter_t * { return i < kids.size() ? &kids[i].it : nullptr; };
    if (strcmp(k, "$box") == 0) {
        Flat a, b;
        Status s = parse_flat_point(kid(0), &a, false);
        if (!s.ok())
            return s;
        s = parse_flat_point(kid(1), &b, false);
        if (!s.ok())
            return s;
        g->kind = K_BOX;
        g->box.min = {std::min(a.x, b.x), std::min(a.y, b.y)};
        g->box.max = {std::max(a.x, b.x), std::max(a.y, b.y)};
        return Status();
    }
    if (strcmp(k, "$center") == 0 || strcmp(k, "$centerSphere") == 0) {
        bool sphere = k[7] == 'S';
        Flat c;
        Status s = parse_flat_point(kid(0), &c, false);
        if (!s.ok())
            return s;
        S2Point center;
        if (sphere) {
            s = coord_to_point(c.x, c.y, &center);
            if (!s.ok())
                return s;
        }
        const bson_iter_t *r = kid(1);
        if (!is_number(r) || !(number(r) >= 0))
            return bad("Radius must be a non-negative number: %s", val_str(r).c_str());
        if (kids.size() > 2)
            return bad("Only 2 fields allowed for circular region, but more were provided");
        g->kind = K_CAP;
        g->cap.center = c;
        g->cap.radius = number(r);
        g->cap.crs = sphere ? SPHERE : FLAT;
        if (sphere)
            g->cap.cap = S2Cap(center, S1ChordAngle(S1Angle::Radians(std::min(g->cap.radius, M_PI))));
        return Status();
    }
    if (strcmp(k, "$polygon") == 0) {
        Poly p;
        p.crs = FLAT;
        for (const It &ci : kids) {
            const bson_iter_t &c = ci.it;
            Flat f;
            Status s = parse_flat_point(&c, &f, false);
            if (!s.ok())
                return s;
            p.flat.push_back(f);
        }
        if (p.flat.size() < 3)
            return bad("Polygon must have at least 3 points, instead got %zu vertices", p.flat.size());
        g->kind = K_POLYGON;
        g->polys.push_back(std::move(p));
        return Status();
    }
    /* $geometry: a legacy pair or GeoJSON */
    if (BSON_ITER_HOLDS_ARRAY(elem) || (!kids.empty() && is_number(&kids[0].it))) {
        g->kind = K_POINT;
        Point p;
        if (!BSON_ITER_HOLDS_ARRAY(elem) && !is_obj(elem))
            return bad("Point must be an array or object, instead got type %s", type_name(elem));
        Status s = parse_flat_point(elem, &p.flat, false);
        if (s.ok())
            g->points.push_back(p);
        return s;
    }
    return parse_geojson_value(elem, g);
}

/* ------------------------------------------------------ the predicates */

/* mongod's distanceCompare <= 0. */
bool distance_within(Flat a, Flat b, double radius)
{
    double dx = b.x - a.x, dy = b.y - a.y;
    if (dx == 0)
        return (b.y > a.y ? b.y - (a.y + radius) : a.y - (b.y + radius)) <= 0;
    if (dy == 0)
        return (b.x > a.x ? b.x - (a.x + radius) : a.x - (b.x + radius)) <= 0;
    return std::sqrt(dx * dx + dy * dy) - radius <= 0;
}

/* mongod's Polygon::contains(p, 0) > 0 for a $polygon. */
bool flat_polygon_contains(const std::vector<Flat> &pts, Flat p)
{
    int counter = 0;
    size_t n = pts.size();
    Flat p1 = pts[0];
    for (size_t i = 1; i <= n; i++) {
        Flat p2 = pts[i % n];
        if ((p.y == p1.y && p.x == p1.x) || (p.y == p2.y && p.x == p2.x))
            return true;
        if (p1.y == p2.y && p.y == p1.y && p.x >= std::min(p1.x, p2.x) &&
            p.x <= std::max(p1.x, p2.x))
            return true;
        if (p.y > std::min(p1.y, p2.y) && p.y <= std::max(p1.y, p2.y) &&
            p.x <= std::max(p1.x, p2.x) && p1.y != p2.y) {
            double xinters = (p.y - p1.y) * (p2.x - p1.x) / (p2.y - p1.y) + p1.x;
            if (p1.x == p2.x && p.x == p1.x)
                return true;
            if (p1.x == p2.x || p.x <= xinters)
                counter++;
        }
        p1 = p2;
    }
    return counter % 2 == 1;
}

double min_distance_rad(const S2Point &p, const S2Polyline &line)
{
    int next;
    return S1Angle(p, line.Project(p, &next)).radians();
}

double min_distance_rad(const S2Point &p, const S2Polygon &poly)
{
    return S1Angle(p, poly.Project(p)).radians();
}

bool poly_contains_point(const S2Polygon &poly, const Point &pt)
{
    return poly.Contains(pt.p) || poly.MayIntersect(pt.cell);
}

bool poly_contains_line(const S2Polygon &poly, const S2Polyline &line)
{
    auto clipped = poly.IntersectWithPolyline(line);
    if (clipped.size() != 1)
        return false;
    return clipped[0]->NearlyCovers(line, S1Angle::Degrees(1e-10));
}

bool poly_line_intersect(const S2Polyline &line, const S2Polygon &poly)
{
    return !poly.IntersectWithPolyline(line).empty();
}

/* The query's polygons that containment reads: a Polygon, a
 * MultiPolygon's, a GeometryCollection's. */
struct Within {
    const Geometry &q;
    bool point(const Point &pt) const
    {
        if (q.kind == K_CAP)
            return q.cap.cap.MayIntersect(pt.cell);
        for (const Poly &p : q.polys)
            if (poly_contains_point(*p.s2, pt))
                return true;
        return false;
    }
    bool line(const S2Polyline &l) const
    {
        if (q.kind == K_CAP) {
            S2Cap comp = q.cap.cap.Complement();
            return !(min_distance_rad(comp.center(), l) < comp.GetRadius().radians());
        }
        for (const Poly &p : q.polys) {
            if (q.kind == K_POLYGON && q.polys[0].crs == STRICT_SPHERE ? p.s2->Contains(l)
                                                                         : poly_contains_line(*p.s2, l))
                return true;
        }
        return false;
    }
    bool polygon(const S2Polygon &other) const
    {
        if (q.kind == K_CAP) {
            S2Cap comp = q.cap.cap.Complement();
            return !(min_distance_rad(comp.center(), other) < comp.GetRadius().radians());
        }
        for (const Poly &p : q.polys)
            if (p.s2->Contains(other))
                return true;
        return false;
    }
};

/* mongod's GeometryContainer::contains(other), `q` the query. */
bool contains(const Geometry &q, const Geometry &d)
{
    if (q.native_crs() == FLAT) {
        if (d.kind != K_POINT)
            return false;
        Flat p = d.points[0].flat;
        if (q.kind == K_BOX)
            return p.x >= q.box.min.x && p.x <= q.box.max.x && p.y >= q.box.min.y &&
                   p.y <= q.box.max.y;
        if (q.kind == K_POLYGON)
            return flat_polygon_contains(q.polys[0].flat, p);
        if (q.kind == K_CAP)
            return distance_within(q.cap.center, p, q.cap.radius);
        return false;
    }
    Within w{q};
    for (const Point &p : d.points)
        if (!w.point(p))
            return false;
    for (const auto &l : d.lines)
        if (!w.line(*l))
            return false;
    for (const Poly &p : d.polys)
        if (!w.polygon(*p.s2))
            return false;
    return true;
}

/* Whether the query `q` meets the point cell / line / polygon of a
 * stored geometry (mongod's GeometryContainer::intersects overloads). */
bool meets_cell(const Geometry &q, const S2Cell &c)
{
    for (const Point &p : q.points)
        if (p.cell.MayIntersect(c))
            return true;
    for (const auto &l : q.lines)
        if (l->MayIntersect(c))
            return true;
    for (const Poly &p : q.polys)
        if (p.s2->MayIntersect(c))
            return true;
    return false;
}

bool meets_line(const Geometry &q, const S2Polyline &line)
{
    for (const Point &p : q.points)
        if (line.MayIntersect(p.cell))
            return true;
    for (const auto &l : q.lines)
        if (line.Intersects(*l))
            return true;
    for (const Poly &p : q.polys)
        if (poly_line_intersect(line, *p.s2))
            return true;
    return false;
}

bool meets_polygon(const Geometry &q, const S2Polygon &poly)
{
    for (const Point &p : q.points)
        if (poly.MayIntersect(p.cell))
            return true;
    for (const auto &l : q.lines)
        if (poly_line_intersect(*l, poly))
            return true;
    for (const Poly &p : q.polys)
        if (poly.Intersects(*p.s2))
            return true;
    return false;
}

bool intersects(const Geometry &q, const Geometry &d)
{
    if (q.kind == K_CAP || q.kind == K_BOX)
        return false; /* mongod's intersects reads neither */
    for (const Point &p : d.points)
        if (meets_cell(q, p.cell))
            return true;
    for (const auto &l : d.lines)
        if (meets_line(q, *l))
            return true;
    for (const Poly &p : d.polys)
        if (meets_polygon(q, *p.s2))
            return true;
    return false;
}

} /* namespace */

struct mf_geo_query {
    bool within;
    Geometry g;
};

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static int set_status(mf_error *err, const Status &s)
{
    return mf_error_set(err, s.code, "%s", s.msg.c_str());
}

/* mongod's GeoExpression::parseQuery + parseFrom. */
static Status parse_query(const bson_t *section, mf_geo_query *q)
{
    bson_iter_t it;
    bson_iter_init(&it, section);
    if (!bson_iter_next(&it))
        return bad("invalid geo query predicate: %s", doc_str(section).c_str());
    bson_iter_t op = it;
    if (bson_iter_next(&it))
        return bad("can't parse extra field: %s", elem_str(&it).c_str());
    const char *name = bson_iter_key(&op);
    if (strcmp(name, "$geoIntersects") == 0)
        q->within = false;
    else if (strcmp(name, "$geoWithin") == 0 || strcmp(name, "$within") == 0)
        q->within = true;
    else
        return bad("invalid geo query predicate: %s", doc_str(section).c_str());
    if (!BSON_ITER_HOLDS_DOCUMENT(&op))
        return bad("geometry must be an object");
    bool have = false;
    for (const It &ei : children(&op)) {
        const bson_iter_t &e = ei.it;
        if (have && strcmp(name, "$geoWithin") == 0)
            return bad("$geoWithin doesn't accept multiple shapes %s", elem_str(&op).c_str());
        if (strcmp(bson_iter_key(&e), "$uniqueDocs") == 0)
            continue; /* deprecated, ignored as mongod does */
        q->g = Geometry();
        Status s = parse_query_shape(&e, &q->g);
        if (!s.ok())
            return s;
        have = true;
    }
    if (!have)
        return bad("geo query doesn't have any geometry");
    if (q->within && !q->g.supports_contains())
        return bad("$within not supported with provided geometry: %s", doc_str(section).c_str());
    if (q->g.native_crs() == STRICT_SPHERE)
        q->g.project(SPHERE);
    if (!q->within) {
        if (!q->g.can_project(SPHERE))
            return bad("$geoIntersect not supported with provided geometry: %s",
                       doc_str(section).c_str());
        q->g.project(SPHERE);
    }
    return Status();
}

extern "C" int mfi_geo_query_parse(const bson_t *section, mf_geo_query **out, mf_error *err)
{
    *out = nullptr;
    try {
        auto q = std::make_unique<mf_geo_query>();
        Status s = parse_query(section, q.get());
        if (!s.ok())
            return set_status(err, s);
        *out = q.release();
        return 0;
    } catch (const std::bad_alloc &) {
        return oom(err);
    }
}

extern "C" bool mfi_geo_query_matches(const mf_geo_query *q, const bson_iter_t *v)
{
    try {
        if (!is_obj(v))
            return false;
        Geometry d;
        if (!parse_stored(v, &d).ok())
            return false;
        /* a strict-winding (big) polygon is never matched */
        if (d.kind == K_POLYGON && d.polys[0].crs == STRICT_SPHERE)
            return false;
        Crs crs = q->g.native_crs();
        if (!d.can_project(crs))
            return false;
        d.project(crs);
        return q->within ? contains(q->g, d) : intersects(q->g, d);
    } catch (const std::bad_alloc &) {
        return false;
    }
}

extern "C" void mfi_geo_query_free(mf_geo_query *q)
{
    delete q;
}

/* mongod's parsePoint for a query (parseQueryPoint): a legacy pair, two
 * numbers only, or a GeoJSON Point. */
static Status parse_query_point(const bson_iter_t *elem, Point *out)
{
    if (!is_obj(elem))
        return bad("Point must be an array or object, instead got type %s", type_name(elem));
    Kids kids = children(elem);
    if (BSON_ITER_HOLDS_ARRAY(elem) || (!kids.empty() && is_number(&kids[0].it))) {
        out->crs = FLAT;
        return parse_flat_point(elem, &out->flat, false);
    }
    bson_iter_t t;
    if (field(elem, "type", &t)) {
        GeoJsonType gt = geojson_type(elem);
        if (gt != GJ_POINT) {
            static const char *const names[] = {"unknown", "Point", "LineString", "Polygon",
                                                "MultiPoint", "MultiLineString", "MultiPolygon",
                                                "GeometryCollection"};
            return bad("Expected geojson geometry with type Point, but got type %s", names[gt]);
        }
    }
    return parse_geojson_point(elem, out);
}

/* mongod's GeoNearExpression::parseLegacyQuery: whether it found the
 * point; a failed uassert is an error at once (*rc). */
/* What a near query asks, as mongod's GeoNearExpression keeps it. */
struct NearArgs {
    double min_distance = 0;
    double max_distance = std::numeric_limits<double>::max();
};

static bool near_legacy(const bson_t *section, Status *st, Point *centroid, bool *sphere,
                        NearArgs *args)
{
    bool has_geometry = false;
    bson_iter_t it;
    bson_iter_init(&it, section);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$near") == 0 || strcmp(k, "$geoNear") == 0 || strcmp(k, "$nearSphere") == 0) {
            if (!is_obj(&it))
                return false;
            Point p;
            double max_distance = 0;
            bool three = false;
            bool ok = parse_query_point(&it, &p).ok();
            if (!ok) {
                Kids kids = children(&it);
                ok = kids.size() == 3 && is_number(&kids[0].it) && is_number(&kids[1].it) &&
                     is_number(&kids[2].it);
                if (ok) {
                    p = Point();
                    p.flat = {number(&kids[0].it), number(&kids[1].it)};
                    max_distance = number(&kids[2].it);
                    three = true;
                }
            }
            if (ok) {
                if (!(max_distance >= 0.0)) {
                    st->code = 18522;
                    st->msg = "max distance must be non-negative";
                    return false;
                }
                has_geometry = true;
                *centroid = p;
                *sphere = strcmp(k, "$nearSphere") == 0;
                if (three)
                    args->max_distance = max_distance;
            }
        } else if (strcmp(k, "$minDistance") == 0 || strcmp(k, "$maxDistance") == 0) {
            bool is_min = k[2] == 'i';
            if (!is_number(&it)) {
                st->code = is_min ? 16893 : 16895;
                st->msg = std::string(k) + " must be a number";
                return false;
            }
            if (!(number(&it) >= 0.0)) {
                st->code = is_min ? 16894 : 16896;
                st->msg = std::string(k) + " must be non-negative";
                return false;
            }
            (is_min ? args->min_distance : args->max_distance) = number(&it);
        } else if (strcmp(k, "$uniqueDocs") != 0) {
            st->code = 34413;
            st->msg = std::string("invalid argument in geo near query: ") + k;
            return false;
        }
    }
    return has_geometry;
}

/* mongod's GeoNearExpression::parseNewQuery. */
static Status near_new(const bson_t *section, Point *centroid, bool *sphere, NearArgs *args)
{
    bson_iter_t it;
    bson_iter_init(&it, section);
    if (!bson_iter_next(&it))
        return bad("empty geo near query object");
    bson_iter_t e = it;
    if (bson_iter_next(&it))
        return bad("geo near accepts just one argument when querying for a GeoJSON point. Extra "
                   "field found: %s",
                   elem_str(&it).c_str());
    if (!is_obj(&e))
        return bad("geo near query argument is not an object");
    const char *k = bson_iter_key(&e);
    if (strcmp(k, "$near") != 0 && strcmp(k, "$geoNear") != 0 && strcmp(k, "$nearSphere") != 0)
        return bad("invalid geo near query operator: %s", k);
    *sphere = strcmp(k, "$nearSphere") == 0;
    bool has_geometry = false;
    for (const It &ai : children(&e)) {
        const bson_iter_t &a = ai.it;
        const char *name = bson_iter_key(&a);
        if (strcmp(name, "$geometry") == 0) {
            if (is_obj(&a)) {
                Point p;
                Status s = parse_query_point(&a, &p);
                if (!s.ok())
                    return bad("invalid point in geo near query $geometry argument: %s  %s",
                               obj_str(&a).c_str(), s.msg.c_str());
                if (p.crs != SPHERE)
                    return bad("$near requires geojson point, given %s", obj_str(&a).c_str());
                has_geometry = true;
                *centroid = p;
            }
        } else if (strcmp(name, "$minDistance") == 0 || strcmp(name, "$maxDistance") == 0) {
            if (!is_number(&a))
                return bad("%s must be a number", name);
            double x = number(&a);
            if (!(x >= 0.0 && std::isfinite(x)))
                return bad("%s must be non-negative", name);
            (name[2] == 'i' ? args->min_distance : args->max_distance) = x;
        } else {
            return bad("invalid argument in geo near query: %s", name);
        }
    }
    if (!has_geometry)
        return bad("$geometry is required for geo near query");
    return Status();
}

/* mongod's GeoNearExpression::parseFrom. */
static Status near_parse(const bson_t *section, mf_geo_near *out)
{
    Status st;
    Point centroid;
    bool sphere = false;
    NearArgs args;
    if (!near_legacy(section, &st, &centroid, &sphere, &args)) {
        if (!st.ok())
            return st;
        args = NearArgs();
        sphere = false;
        Status s = near_new(section, &centroid, &sphere, &args);
        if (!s.ok())
            return s;
    }
    out->near_sphere = sphere;
    out->min_distance = args.min_distance;
    out->max_distance = args.max_distance;
    out->x = out->old_x = centroid.flat.x;
    out->y = out->old_y = centroid.flat.y;
    if (sphere) {
        /* a flat point must be on the sphere for $nearSphere (a GeoJSON
         * one always is); its distances are then radians */
        if (!centroid.can_project(SPHERE))
            return bad("Legacy point is out of bounds for spherical query");
        out->radians = centroid.crs != SPHERE;
        out->wrapping = centroid.crs == SPHERE;
        centroid.to_sphere();
    } else {
        out->radians = false;
        out->wrapping = centroid.crs == SPHERE;
    }
    out->sphere = centroid.crs == SPHERE;
    if (out->sphere) {
        S2LatLng ll(centroid.p);
        out->x = ll.lng().degrees();
        out->y = ll.lat().degrees();
    }
    return Status();
}

extern "C" int mfi_geo_near_check(const bson_t *section, mf_error *err)
{
    mf_geo_near n;
    return mfi_geo_near_parse(section, &n, err);
}

extern "C" int mfi_geo_near_parse(const bson_t *section, mf_geo_near *out, mf_error *err)
{
    try {
        *out = mf_geo_near();
        Status s = near_parse(section, out);
        return s.ok() ? 0 : set_status(err, s);
    } catch (const std::bad_alloc &) {
        return oom(err);
    }
}

/* The distance in radians from `c` to the nearest point of a geometry on
 * the sphere (0 inside a polygon). */
static double sphere_distance(const S2Point &c, const Geometry &g)
{
    double best = std::numeric_limits<double>::infinity();
    for (const Point &p : g.points)
        best = std::min(best, S1Angle(c, p.p).radians());
    for (const auto &l : g.lines)
        best = std::min(best, min_distance_rad(c, *l));
    for (const Poly &p : g.polys)
        best = std::min(best, min_distance_rad(c, *p.s2));
    return best;
}

extern "C" bool mfi_geo_near_distance(const mf_geo_near *n, const bson_iter_t *v, double *out)
{
    try {
        if (!is_obj(v))
            return false;
        Geometry g;
        if (!parse_stored(v, &g).ok())
            return false;
        if (!n->sphere) {
            /* a flat query: points only, by their x/y (a 2d index's) */
            if (g.kind != K_POINT)
                return false;
            double dx = g.points[0].flat.x - n->x, dy = g.points[0].flat.y - n->y;
            *out = std::sqrt(dx * dx + dy * dy);
            return true;
        }
        if (g.native_crs() == STRICT_SPHERE || !g.can_project(SPHERE))
            return false;
        g.project(SPHERE);
        double d = sphere_distance(to_s2(n->x, n->y), g);
        if (!std::isfinite(d))
            return false;
        *out = d;
        return true;
    } catch (const std::bad_alloc &) {
        return false;
    }
}

static int cells_with_parents(const S2Region &r, const mf_s2_params *p, mf_geo_interval **out,
                              size_t *n);

extern "C" int mfi_geo_ring_cells(const mf_geo_near *n, double inner, double outer,
                                  const mf_s2_params *p, mf_geo_interval **out, size_t *cnt)
{
    *out = nullptr;
    *cnt = 0;
    try {
        S2Point c = to_s2(n->x, n->y);
        std::vector<std::unique_ptr<S2Region>> parts;
        parts.push_back(std::make_unique<S2Cap>(
            S2Cap(c, S1ChordAngle(S1Angle::Radians(std::min(outer, M_PI))))));
        if (inner > 0)
            parts.push_back(std::make_unique<S2Cap>(
                S2Cap(c, S1ChordAngle(S1Angle::Radians(std::min(inner, M_PI)))).Complement()));
        std::unique_ptr<S2Region> r;
        if (parts.size() == 1)
            r = std::move(parts[0]);
        else
            r = std::make_unique<S2RegionIntersection>(std::move(parts));
        return cells_with_parents(*r, p, out, cnt);
    } catch (const std::bad_alloc &) {
        free(*out);
        *out = nullptr;
        *cnt = 0;
        return -1;
    }
}

extern "C" bool mfi_geo_stored_point(const bson_iter_t *v, double *x, double *y)
{
    try {
        Geometry g;
        if (!parse_stored(v, &g).ok() || g.kind != K_POINT || g.points.empty())
            return false;
        *x = g.points[0].flat.x;
        *y = g.points[0].flat.y;
        return true;
    } catch (const std::bad_alloc &) {
        return false;
    }
}

extern "C" int mfi_geo_check_stored(const bson_iter_t *v, mf_error *err)
{
    try {
        Geometry d;
        Status s = parse_stored(v, &d);
        return s.ok() ? 0 : set_status(err, s);
    } catch (const std::bad_alloc &) {
        return oom(err);
    }
}

/* ------------------------------------------- the 2dsphere index kind */

/* mongod's kRadiusOfEarthInMeters */
static const double kEarthRadiusMeters = 6378.1 * 1000;

extern "C" void mfi_geo_s2_defaults(mf_s2_params *out)
{
    out->coarsest = S2::kAvgEdge.GetClosestLevel(2000 * 1000.0 / kEarthRadiusMeters);
    out->finest = S2::kAvgEdge.GetClosestLevel(110.0 / kEarthRadiusMeters);
    out->max_cells = 20;
}

/* The region of a geometry on the sphere, as mongod's
 * GeometryContainer::getS2Region: a point is its leaf cell, a Multi* or
 * a collection the union of its parts'.  NULL for a flat shape. */
static std::unique_ptr<S2Region> region_of(const Geometry &g)
{
    if (g.native_crs() == FLAT)
        return nullptr;
    std::vector<std::unique_ptr<S2Region>> parts;
    for (const Point &p : g.points)
        parts.push_back(std::make_unique<S2Cell>(p.cell));
    for (const auto &l : g.lines)
        parts.emplace_back(l->Clone());
    for (const Poly &p : g.polys)
        parts.emplace_back(p.s2->Clone());
    if (g.kind == K_CAP)
        parts.push_back(std::make_unique<S2Cap>(g.cap.cap));
    if (parts.size() == 1)
        return std::move(parts[0]);
    return std::make_unique<S2RegionUnion>(std::move(parts));
}

static std::vector<S2CellId> cover(const S2Region &r, int min_level, int max_level, int max_cells)
{
    S2RegionCoverer::Options o;
    o.set_min_level(std::max(0, std::min(min_level, S2CellId::kMaxLevel)));
    o.set_max_level(std::max(o.min_level(), std::min(max_level, S2CellId::kMaxLevel)));
    o.set_max_cells(std::max(1, max_cells));
    S2RegionCoverer coverer(o);
    std::vector<S2CellId> cells;
    coverer.GetCovering(r, &cells);
    return cells;
}

extern "C" int mfi_geo_index_cells(const bson_iter_t *v, const mf_s2_params *p, int64_t **cells,
                                   size_t *n, mf_error *err)
{
    *cells = nullptr;
    *n = 0;
    try {
        Geometry g;
        Status s = parse_stored(v, &g);
        if (!s.ok())
            return set_status(err, s);
        if (g.native_crs() == STRICT_SPHERE)
            return set_status(err, bad("can't index geometry with strict winding order"));
        if (!g.can_project(SPHERE))
            return set_status(err, bad("can't project geometry into spherical CRS: %s",
                                       val_str(v).c_str()));
        g.project(SPHERE);
        std::unique_ptr<S2Region> r = region_of(g);
        if (!r)
            return set_status(err, bad("can't project geometry into spherical CRS: %s",
                                       val_str(v).c_str()));
        /* S2IndexingParams::configureCoverer: a point at the leaf level
         * (version 3), anything else between the index's levels */
        bool point = g.kind == K_POINT;
        std::vector<S2CellId> c =
            point ? cover(*r, S2CellId::kMaxLevel, S2CellId::kMaxLevel, p->max_cells)
                  : cover(*r, p->coarsest, p->finest, p->max_cells);
        if (c.empty())
            return 0;
        *cells = static_cast<int64_t *>(malloc(c.size() * sizeof **cells));
        if (!*cells)
            return oom(err);
        for (size_t i = 0; i < c.size(); i++)
            (*cells)[i] = static_cast<int64_t>(c[i].id());
        *n = c.size();
        return 0;
    } catch (const std::bad_alloc &) {
        free(*cells);
        *cells = nullptr;
        *n = 0;
        return oom(err);
    }
}

/* A region's covering as query bounds (mongod's cover2dsphere and
 * S2CellIdsToIntervalsWithParents), into `*out` (malloc'd). */
static int cells_with_parents(const S2Region &r, const mf_s2_params *p, mf_geo_interval **out,
                              size_t *n)
{
    /* mongod's internalQueryS2GeoCoarsestLevel, ...FinestLevel and
     * ...MaxCells: 0, 23, 20 */
    std::vector<S2CellId> c = cover(r, 0, 23, 20);
    std::set<S2CellId> parents;
    for (S2CellId id : c)
        for (S2CellId up = id; up.level() > p->coarsest;) {
            up = up.parent();
            parents.insert(up);
        }
    std::vector<mf_geo_interval> v;
    v.reserve(parents.size() + c.size());
    for (S2CellId id : parents)
        v.push_back({static_cast<int64_t>(id.id()), static_cast<int64_t>(id.id())});
    for (S2CellId id : c)
        v.push_back({static_cast<int64_t>(id.range_min().id()),
                     static_cast<int64_t>(id.range_max().id())});
    /* disjoint: no cell's range holds an ancestor's id, and a normal
     * covering's cells do not overlap */
    std::sort(v.begin(), v.end(),
              [](const mf_geo_interval &a, const mf_geo_interval &b) { return a.lo < b.lo; });
    if (v.empty())
        return 0;
    *out = static_cast<mf_geo_interval *>(malloc(v.size() * sizeof **out));
    if (!*out)
        return -1;
    std::copy(v.begin(), v.end(), *out);
    *n = v.size();
    return 0;
}

extern "C" int mfi_geo_query_cells(const mf_geo_query *q, const mf_s2_params *p,
                                   mf_geo_interval **out, size_t *n, bool *usable)
{
    *out = nullptr;
    *n = 0;
    *usable = false;
    try {
        std::unique_ptr<S2Region> r = region_of(q->g);
        if (!r)
            return 0;
        *usable = true;
        return cells_with_parents(*r, p, out, n);
    } catch (const std::bad_alloc &) {
        free(*out);
        *out = nullptr;
        *n = 0;
        return -1;
    }
}

extern "C" double mfi_geo_cell_edge(int level)
{
    return S2::kAvgEdge.GetValue(std::max(0, std::min(level, S2CellId::kMaxLevel)));
}

/* ------------------------------------------ for the "2d" index kind */

static_assert(sizeof(Flat) == 2 * sizeof(double) && std::is_standard_layout<Flat>::value,
              "a $polygon's vertices are read as x, y pairs");

/* mongod's GeometryContainer::R2BoxRegion::buildBounds, for the shapes
 * QueryPlannerIXSelect gives a 2d field: a WITHIN query with a box, a
 * flat polygon or a cap ($center, $centerSphere). */
extern "C" void mfi_geo_query_flat(const mf_geo_query *q, mfi_geo_flat *out)
{
    *out = mfi_geo_flat();
    const Geometry &g = q->g;
    if (!q->within)
        return;
    if (g.kind == K_BOX) {
        out->kind = MFI_GEO_FLAT_BOX;
        out->min_x = g.box.min.x, out->min_y = g.box.min.y;
        out->max_x = g.box.max.x, out->max_y = g.box.max.y;
    } else if (g.kind == K_POLYGON && g.polys[0].crs == FLAT) {
        const std::vector<Flat> &v = g.polys[0].flat;
        out->kind = MFI_GEO_FLAT_POLYGON;
        out->xy = reinterpret_cast<const double *>(v.data());
        out->n = v.size();
        out->min_x = out->max_x = v[0].x;
        out->min_y = out->max_y = v[0].y;
        for (const Flat &f : v) {
            out->min_x = std::min(out->min_x, f.x), out->max_x = std::max(out->max_x, f.x);
            out->min_y = std::min(out->min_y, f.y), out->max_y = std::max(out->max_y, f.y);
        }
    } else if (g.kind == K_CAP && g.cap.crs == FLAT) {
        out->kind = MFI_GEO_FLAT_CIRCLE;
        out->x = g.cap.center.x, out->y = g.cap.center.y, out->radius = g.cap.radius;
        out->min_x = out->x - out->radius, out->min_y = out->y - out->radius;
        out->max_x = out->x + out->radius, out->max_y = out->y + out->radius;
    } else if (g.kind == K_CAP) {
        S2LatLngRect r = g.cap.cap.GetRectBound();
        double lng_lo = r.lng_lo().degrees(), lng_hi = r.lng_hi().degrees();
        out->kind = MFI_GEO_FLAT_CAP;
        out->x = g.cap.center.x, out->y = g.cap.center.y, out->radius = g.cap.radius;
        out->min_x = std::min(lng_lo, lng_hi), out->max_x = std::max(lng_lo, lng_hi);
        out->min_y = r.lat_lo().degrees(), out->max_y = r.lat_hi().degrees();
    }
}
