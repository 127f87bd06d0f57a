"""Schema validation (issue 51): validator, validationLevel and
validationAction on create and collMod; DocumentValidationFailure's errInfo
in mongod 5.0+'s shape; $jsonSchema as a validator and as a query.

The expected errInfo documents are mongod's own, from its
doc_validation_error tests and documentation (written here by hand from
them); they are compared field by field and in order, as a client sees
them.
"""
import random

import bson
import pymongo
import pytest
from bson import Decimal128, Int64
from pymongo.errors import OperationFailure, WriteError


@pytest.fixture
def db(client):
    return client.validation


def ordered(x):
    """A value with its documents' field order made visible: two values
    are equal exactly when they are equal in order."""
    return bson.encode({"": x})


def details_of(db, validator, doc):
    """errInfo.details of inserting `doc` into a fresh collection with
    `validator`; the _id is 1 unless the document has one."""
    db.drop_collection("v")
    db.create_collection("v", validator=validator)
    doc = dict(doc)
    doc.setdefault("_id", 1)
    with pytest.raises(WriteError) as e:
        db.v.insert_one(doc)
    assert e.value.code == 121
    info = e.value.details["errInfo"]
    assert e.value.details["errmsg"] == "Document failed validation"
    assert list(info) == ["failingDocumentId", "details"]
    assert info["failingDocumentId"] == doc["_id"]
    return info["details"]


# ------------------------------------------------- query-operator validators

QUERY_CASES = [
    ({"a": {"$eq": 2}}, {"a": 1},
     {"operatorName": "$eq", "specifiedAs": {"a": {"$eq": 2}}, "reason": "comparison failed",
      "consideredValue": 1}),
    ({"a": {"$eq": 2}}, {"b": 1},
     {"operatorName": "$eq", "specifiedAs": {"a": {"$eq": 2}}, "reason": "field was missing"}),
    ({"a.b": {"$eq": 0}}, {"a": [{"b": [1, 2]}, {"b": [3, 4]}]},
     {"operatorName": "$eq", "specifiedAs": {"a.b": {"$eq": 0}}, "reason": "comparison failed",
      "consideredValues": [1, 2, 3, 4]}),
    ({"a": {"$eq": [1, 2]}}, {"a": []},
     {"operatorName": "$eq", "specifiedAs": {"a": {"$eq": [1, 2]}},
      "reason": "comparison failed", "consideredValues": []}),
    ({"a": {"$ne": 2}}, {"a": 2},
     {"operatorName": "$ne", "specifiedAs": {"a": {"$ne": 2}}, "reason": "comparison succeeded",
      "consideredValue": 2}),
    ({"a": {"$nin": [1, 2, 3]}}, {"a": 3},
     {"operatorName": "$nin", "specifiedAs": {"a": {"$nin": [1, 2, 3]}},
      "reason": "matching value found in array", "consideredValue": 3}),
    ({"a": {"$gt": 0, "$lt": 10}}, {"a": 11},
     {"operatorName": "$and", "clausesNotSatisfied": [
         {"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}},
                                  "reason": "comparison failed", "consideredValue": 11}}]}),
    ({"$and": [{"$and": [{"a": 1}]}, {"$and": [{"b": 1}]}]}, {"a": 1, "b": 2},
     {"operatorName": "$and", "clausesNotSatisfied": [
         {"index": 1, "details": {"operatorName": "$and", "clausesNotSatisfied": [
             {"index": 0, "details": {"operatorName": "$eq", "specifiedAs": {"b": 1},
                                      "reason": "comparison failed",
                                      "consideredValue": 2}}]}}]}),
    ({"$nor": [{"a": {"$gt": 10}}, {"b": {"$lt": 10}}]}, {"a": 9, "b": 9},
     {"operatorName": "$nor", "clausesSatisfied": [
         {"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"b": {"$lt": 10}},
                                  "reason": "comparison succeeded", "consideredValue": 9}}]}),
    ({"a": {"$not": {"$lt": 20, "$gt": 5}}}, {"a": 10},
     {"operatorName": "$not", "details": {"operatorName": "$and", "clausesSatisfied": [
         {"index": 0, "details": {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 20}},
                                  "reason": "comparison succeeded", "consideredValue": 10}},
         {"index": 1, "details": {"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 5}},
                                  "reason": "comparison succeeded", "consideredValue": 10}}]}}),
    ({"a": {"$not": {"$not": {"$lt": 10}}}}, {"a": 11},
     {"operatorName": "$not", "details": {"operatorName": "$not", "details": {
         "operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}},
         "reason": "comparison failed", "consideredValue": 11}}}),
    ({"$and": [{"$or": [{"price": {"$lt": 20}}]},
               {"$nor": [{"qty": {"$gt": 30}}, {"qty": {"$not": {"$lt": 20}}}]}]},
     {"price": 10, "qty": 25},
     {"operatorName": "$and", "clausesNotSatisfied": [
         {"index": 1, "details": {"operatorName": "$nor", "clausesSatisfied": [
             {"index": 1, "details": {"operatorName": "$not", "details": {
                 "operatorName": "$lt", "specifiedAs": {"qty": {"$lt": 20}},
                 "reason": "comparison failed", "consideredValue": 25}}}]}}]}),
    ({"a": {"$exists": True}}, {"b": 1},
     {"operatorName": "$exists", "specifiedAs": {"a": {"$exists": True}},
      "reason": "path does not exist"}),
    ({"a": {"$exists": False}}, {"a": 1},
     {"operatorName": "$exists", "specifiedAs": {"a": {"$exists": False}},
      "reason": "path does exist"}),
    ({"a": {"$type": "double"}}, {"a": ["x", "y", "z"]},
     {"operatorName": "$type", "specifiedAs": {"a": {"$type": "double"}},
      "reason": "type did not match", "consideredValues": ["x", "y", "z"],
      "consideredType": "string"}),
    ({"a": {"$mod": [2, 1]}}, {"a": "two"},
     {"operatorName": "$mod", "specifiedAs": {"a": {"$mod": [2, 1]}},
      "reason": "type did not match", "consideredType": "string",
      "expectedTypes": ["decimal", "double", "int", "long"], "consideredValue": "two"}),
    ({"a": {"$mod": [2, 1]}}, {"a": [0, "two", "four"]},
     {"operatorName": "$mod", "specifiedAs": {"a": {"$mod": [2, 1]}},
      "reason": "$mod did not evaluate to expected remainder",
      "consideredValues": [0, "two", "four"]}),
    ({"$expr": {"$eq": ["$a", "$b"]}}, {"a": 1, "b": 2},
     {"operatorName": "$expr", "specifiedAs": {"$expr": {"$eq": ["$a", "$b"]}},
      "reason": "expression did not match", "expressionResult": False}),
    ({"$expr": {"$divide": [10, 0]}}, {},
     {"operatorName": "$expr", "specifiedAs": {"$expr": {"$divide": [10, 0]}},
      "reason": "failed to evaluate aggregation expression",
      "details": {"code": 16608, "codeName": "Location16608",
                  "errmsg": "can't $divide by zero"}}),
    ({"a": {"$size": 2}}, {"a": 3},
     {"operatorName": "$size", "specifiedAs": {"a": {"$size": 2}},
      "reason": "type did not match", "consideredType": "int", "expectedType": "array",
      "consideredValue": 3}),
    ({"a": {"$all": []}}, {"a": [1, 2, 3]},
     {"operatorName": "$all", "specifiedAs": {"a": {"$all": []}},
      "reason": "expression always evaluates to false"}),
    ({"a": {"$not": {"$elemMatch": {"b": {"$gte": 0}, "c": {"$lt": 10}}}}},
     {"a": [{"b": 0, "c": 0}, {"b": 1, "c": 1}]},
     {"operatorName": "$not", "details": {
         "operatorName": "$elemMatch",
         "specifiedAs": {"a": {"$elemMatch": {"b": {"$gte": 0}, "c": {"$lt": 10}}}},
         "reason": "array did satisfy the child predicate",
         "consideredValue": [{"b": 0, "c": 0}, {"b": 1, "c": 1}]}}),
    ({"a": {"$bitsAnyClear": 3}}, {"a": "someString"},
     {"operatorName": "$bitsAnyClear", "specifiedAs": {"a": {"$bitsAnyClear": 3}},
      "reason": "type did not match", "consideredType": "string",
      "expectedTypes": ["binData", "decimal", "double", "int", "long"],
      "consideredValue": "someString"}),
    ({"a": {"$lt": 0}}, {"a": list(range(20))},
     {"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 0}}, "reason": "comparison failed",
      "consideredValues": list(range(10)), "consideredValuesTruncated": True}),
    ({"$or": [{"phone": {"$type": "string"}}, {"email": {"$regex": "@mongodb\\.com$"}},
              {"status": {"$in": ["Unknown", "Incomplete"]}}]},
     {"email": "info@mongodb.co"},
     {"operatorName": "$or", "clausesNotSatisfied": [
         {"index": 0, "details": {"operatorName": "$type",
                                  "specifiedAs": {"phone": {"$type": "string"}},
                                  "reason": "field was missing"}},
         {"index": 1, "details": {"operatorName": "$regex",
                                  "specifiedAs": {"email": {"$regex": "@mongodb\\.com$"}},
                                  "reason": "regular expression did not match",
                                  "consideredValue": "info@mongodb.co"}},
         {"index": 2, "details": {"operatorName": "$in",
                                  "specifiedAs": {"status": {"$in": ["Unknown", "Incomplete"]}},
                                  "reason": "field was missing"}}]}),
]


@pytest.mark.parametrize("validator,doc,expected", QUERY_CASES)
def test_query_operator_details(db, validator, doc, expected):
    assert ordered(details_of(db, validator, doc)) == ordered(expected)


# ------------------------------------------------------ $jsonSchema validators

SCHEMA_CASES = [
    ({"properties": {"a": {"minimum": 1}}, "title": "example title",
      "description": "example description"}, {"a": 0},
     {"operatorName": "$jsonSchema", "title": "example title",
      "description": "example description", "schemaRulesNotSatisfied": [
          {"operatorName": "properties", "propertiesNotSatisfied": [
              {"propertyName": "a", "details": [
                  {"operatorName": "minimum", "specifiedAs": {"minimum": 1},
                   "reason": "comparison failed", "consideredValue": 0}]}]}]}),
    ({"properties": {"a": {"minimum": 1, "exclusiveMinimum": True}}}, {"a": 1},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "minimum",
                  "specifiedAs": {"minimum": 1, "exclusiveMinimum": True},
                  "reason": "comparison failed", "consideredValue": 1}]}]}]}),
    ({"properties": {"a": {"properties": {"b": {"minimum": 10, "maximum": -10}}}}},
     {"a": {"b": 5}},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "properties", "propertiesNotSatisfied": [
                     {"propertyName": "b", "details": [
                         {"operatorName": "maximum", "specifiedAs": {"maximum": -10},
                          "reason": "comparison failed", "consideredValue": 5},
                         {"operatorName": "minimum", "specifiedAs": {"minimum": 10},
                          "reason": "comparison failed", "consideredValue": 5}]}]}]}]}]}),
    ({"properties": {"a": {"type": "number", "minimum": 1, "title": "property a",
                           "description": "a >= 1"}}}, {"a": "foo"},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "title": "property a", "description": "a >= 1",
              "details": [{"operatorName": "type", "specifiedAs": {"type": "number"},
                           "reason": "type did not match", "consideredValue": "foo",
                           "consideredType": "string"}]}]}]}),
    ({"required": ["a"], "properties": {"a": {"minimum": 1}}}, {},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "required", "specifiedAs": {"required": ["a"]},
          "missingProperties": ["a"]}]}),
    ({"properties": {"a": {"type": "string"}}}, {"a": ["Mihai", "was", "here"]},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "type", "specifiedAs": {"type": "string"},
                  "reason": "type did not match", "consideredValue": ["Mihai", "was", "here"],
                  "consideredType": "array"}]}]}]}),
    ({"not": {"properties": {"a": {"minimum": 3}}}}, {"a": 6},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "not", "reason": "child expression matched"}]}),
    ({"properties": {"a": {"description": "property a", "anyOf": [
        {"bsonType": "number", "description": "number?"}, {"bsonType": "string"}]}}}, {"a": {}},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "description": "property a", "details": [
                 {"operatorName": "anyOf", "schemasNotSatisfied": [
                     {"index": 0, "description": "number?", "details": [
                         {"operatorName": "bsonType", "specifiedAs": {"bsonType": "number"},
                          "reason": "type did not match", "consideredValue": {},
                          "consideredType": "object"}]},
                     {"index": 1, "details": [
                         {"operatorName": "bsonType", "specifiedAs": {"bsonType": "string"},
                          "reason": "type did not match", "consideredValue": {},
                          "consideredType": "object"}]}]}]}]}]}),
    ({"properties": {"a": {"oneOf": [{"minimum": 1}, {"maximum": 3}],
                           "description": "oneOf description"}}}, {"a": 2},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "description": "oneOf description", "details": [
                 {"operatorName": "oneOf", "reason": "more than one subschema matched",
                  "matchingSchemaIndexes": [0, 1]}]}]}]}),
    ({"allOf": [{"properties": {"a": {"minimum": 1}}}, {"properties": {"b": {"minimum": 2}}}]},
     {"a": 1, "b": 0},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "allOf", "schemasNotSatisfied": [
             {"index": 1, "details": [
                 {"operatorName": "properties", "propertiesNotSatisfied": [
                     {"propertyName": "b", "details": [
                         {"operatorName": "minimum", "specifiedAs": {"minimum": 2},
                          "reason": "comparison failed", "consideredValue": 0}]}]}]}]}]}),
    ({"enum": [{"a": 1, "b": 1}, {"a": 0, "b": {"c": [1, 2, 3]}}]}, {"a": 0, "b": 1, "_id": 1},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "enum",
          "specifiedAs": {"enum": [{"a": 1, "b": 1}, {"a": 0, "b": {"c": [1, 2, 3]}}]},
          # an insert validates the stored form, _id first (mongod's unit
          # test matches the document as written)
          "reason": "value was not found in enum", "consideredValue": {"_id": 1, "a": 0, "b": 1}}]}),
    ({"properties": {"a": {"minItems": 2}}}, {"a": [1]},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "minItems", "specifiedAs": {"minItems": 2},
                  "reason": "array did not match specified length", "consideredValue": [1],
                  "numberOfItems": 1}]}]}]}),
    ({"properties": {"a": {"uniqueItems": True}}}, {"a": [1, 2, 3, 3, 4, 4]},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "uniqueItems", "specifiedAs": {"uniqueItems": True},
                  "reason": "found a duplicate item", "consideredValue": [1, 2, 3, 3, 4, 4],
                  "duplicatedValue": 3}]}]}]}),
    ({"properties": {"a": {"items": {"type": "string",
                                     "description": "elements must be of string type"}}}},
     {"a": [1, "A", {}]},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "items", "description": "elements must be of string type",
                  "reason": "At least one item did not match the sub-schema", "itemIndex": 0,
                  "details": [{"operatorName": "type", "specifiedAs": {"type": "string"},
                               "reason": "type did not match", "consideredValue": 1,
                               "consideredType": "int"}]}]}]}]}),
    ({"properties": {"a": {"type": "array", "items": [{"type": "number"}, {"type": "string"}],
                           "additionalItems": {"type": "object"}}}},
     {"a": ["1", 2, {}, {"b": 1}, "Fail"]},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "items", "details": [
                     {"itemIndex": 0, "details": [
                         {"operatorName": "type", "specifiedAs": {"type": "number"},
                          "reason": "type did not match", "consideredValue": "1",
                          "consideredType": "string"}]},
                     {"itemIndex": 1, "details": [
                         {"operatorName": "type", "specifiedAs": {"type": "string"},
                          "reason": "type did not match", "consideredValue": 2,
                          "consideredType": "int"}]}]},
                 {"operatorName": "additionalItems",
                  "reason": "At least one additional item did not match the sub-schema",
                  "itemIndex": 4, "details": [
                      {"operatorName": "type", "specifiedAs": {"type": "object"},
                       "reason": "type did not match", "consideredValue": "Fail",
                       "consideredType": "string"}]}]}]}]}),
    ({"properties": {"a": {"items": [{"type": "number"}, {"type": "string"}],
                           "additionalItems": False}}}, {"a": [1, "First", "Extra element"]},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "a", "details": [
                 {"operatorName": "additionalItems", "specifiedAs": {"additionalItems": False},
                  "reason": "found additional items",
                  "additionalItems": ["Extra element"]}]}]}]}),
    ({"minProperties": 10}, {"_id": 1, "a": 1, "b": 2, "c": 3},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "minProperties", "specifiedAs": {"minProperties": 10},
          "reason": "specified number of properties was not satisfied",
          "numberOfProperties": 4}]}),
    ({"dependencies": {"a": ["b", "c"], "title": "a needs b and c"}}, {"a": 1, "b": 2},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "dependencies", "title": "a needs b and c", "failingDependencies": [
             {"conditionalProperty": "a", "missingProperties": ["c"]}]}]}),
    ({"dependencies": {"a": {"properties": {"b": {"type": "number"}}}, "b": ["a", "c"]}},
     {"a": [0, 1, 2, 3], "b": "foo"},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "dependencies", "failingDependencies": [
             {"conditionalProperty": "a", "details": [
                 {"operatorName": "properties", "propertiesNotSatisfied": [
                     {"propertyName": "b", "details": [
                         {"operatorName": "type", "specifiedAs": {"type": "number"},
                          "reason": "type did not match", "consideredValue": "foo",
                          "consideredType": "string"}]}]}]},
             {"conditionalProperty": "b", "missingProperties": ["c"]}]}]}),
    ({"required": ["a"], "properties": {"b": {"type": "number"}}, "additionalProperties": False},
     {"_id": 0, "b": 2},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "additionalProperties", "specifiedAs": {"additionalProperties": False},
          "additionalProperties": ["_id"]},
         {"operatorName": "required", "specifiedAs": {"required": ["a"]},
          "missingProperties": ["a"]}]}),
    ({"properties": {"a": {"type": "number"}}, "additionalProperties": {"type": "string"}},
     {"_id": "a string, which additionalProperties allows", "a": 1, "b": "not this one",
      "c": "nor this", "d": 1},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "additionalProperties",
          "reason": "at least one additional property did not match the subschema",
          "failingProperty": "d", "details": [
              {"operatorName": "type", "specifiedAs": {"type": "string"},
               "reason": "type did not match", "consideredValue": 1,
               "consideredType": "int"}]}]}),
    ({"patternProperties": {"^a": {"minimum": 3}, "b$": {"maximum": 1}}},
     {"a": 45, "b": 0, "ab": 2},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "patternProperties", "details": [
             {"propertyName": "ab", "regexMatched": "^a", "details": [
                 {"operatorName": "minimum", "specifiedAs": {"minimum": 3},
                  "reason": "comparison failed", "consideredValue": 2}]},
             {"propertyName": "ab", "regexMatched": "b$", "details": [
                 {"operatorName": "maximum", "specifiedAs": {"maximum": 1},
                  "reason": "comparison failed", "consideredValue": 2}]}]}]}),
    ({"type": "number", "properties": {"a": {"type": "string"}}}, {"a": "x"},
     {"operatorName": "$jsonSchema",
      "specifiedAs": {"$jsonSchema": {"type": "number", "properties": {"a": {"type": "string"}}}},
      "reason": "expression always evaluates to false"}),
    # the students example of mongod's documentation
    ({"bsonType": "object", "required": ["name", "year", "major", "address"], "properties": {
        "name": {"bsonType": "string", "description": "must be a string and is required"},
        "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017,
                 "description": "must be an integer in [ 2017, 3017 ] and is required"},
        "major": {"enum": ["Math", "English", "Computer Science", "History", None],
                  "description": "can only be one of the enum values and is required"},
        "gpa": {"bsonType": ["double"], "description": "must be a double if the field exists"},
        "address": {"bsonType": "object", "required": ["city"], "properties": {
            "street": {"bsonType": "string", "description": "must be a string if the field exists"},
            "city": {"bsonType": "string", "description": "must be a string and is required"}}}}},
     {"name": "Alice", "year": 2019, "major": "Software Engineering",
      "address": {"street": 5, "city": "NYC"}},
     {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
         {"operatorName": "properties", "propertiesNotSatisfied": [
             {"propertyName": "major",
              "description": "can only be one of the enum values and is required",
              "details": [{"operatorName": "enum", "specifiedAs": {"enum": [
                  "Math", "English", "Computer Science", "History", None]},
                  "reason": "value was not found in enum",
                  "consideredValue": "Software Engineering"}]},
             {"propertyName": "address", "details": [
                 {"operatorName": "properties", "propertiesNotSatisfied": [
                     {"propertyName": "street",
                      "description": "must be a string if the field exists",
                      "details": [{"operatorName": "bsonType",
                                   "specifiedAs": {"bsonType": "string"},
                                   "reason": "type did not match", "consideredValue": 5,
                                   "consideredType": "int"}]}]}]}]}]}),
]


@pytest.mark.parametrize("schema,doc,expected", SCHEMA_CASES)
def test_json_schema_details(db, schema, doc, expected):
    assert ordered(details_of(db, {"$jsonSchema": schema}, doc)) == ordered(expected)


def test_json_schema_under_nor(db):
    details = details_of(db, {"$nor": [{"$jsonSchema": {"minimum": 1}}]}, {"a": 2})
    assert details == {"operatorName": "$nor", "clausesSatisfied": [
        {"index": 0, "details": {"operatorName": "$jsonSchema", "reason": "schema matched"}}]}


# ------------------------------------------------------- each keyword's edges

def accepted(db, schema, doc):
    db.drop_collection("k")
    db.create_collection("k", validator={"$jsonSchema": schema})
    try:
        db.k.insert_one(dict(doc, _id=1))
        return True
    except WriteError as e:
        assert e.code == 121
        return False


KEYWORD_EDGES = [
    # (schema, document, accepted)
    ({"properties": {"a": {"bsonType": "int"}}}, {"a": 1}, True),
    ({"properties": {"a": {"bsonType": "int"}}}, {"a": Int64(1)}, False),
    ({"properties": {"a": {"bsonType": "number"}}}, {"a": Decimal128("1")}, True),
    ({"properties": {"a": {"type": "number"}}}, {"a": 1.5}, True),
    ({"properties": {"a": {"type": "boolean"}}}, {"a": True}, True),
    ({"properties": {"a": {"type": ["string", "null"]}}}, {"a": None}, True),
    ({"properties": {"a": {"type": "string"}}}, {}, True),  # missing: no rule
    ({"required": ["a"]}, {"a": None}, True),  # null is present
    ({"minProperties": 2}, {"a": 1}, True),  # _id counts
    ({"maxProperties": 1}, {"a": 1}, False),
    ({"properties": {"a": {"minimum": 5}}}, {"a": "text"}, True),  # numbers only
    ({"properties": {"a": {"minimum": 5}}}, {"a": 5}, True),
    ({"properties": {"a": {"minimum": 5, "exclusiveMinimum": True}}}, {"a": 5}, False),
    ({"properties": {"a": {"maximum": 5, "exclusiveMaximum": True}}}, {"a": 4.999}, True),
    ({"properties": {"a": {"maximum": Decimal128("5")}}}, {"a": Int64(6)}, False),
    ({"properties": {"a": {"multipleOf": 0.1}}}, {"a": 0.3}, True),  # decimal arithmetic
    ({"properties": {"a": {"multipleOf": 3}}}, {"a": 10}, False),
    ({"properties": {"a": {"minLength": 3}}}, {"a": "日本語"}, True),  # code points
    ({"properties": {"a": {"maxLength": 2}}}, {"a": "日本語"}, False),
    ({"properties": {"a": {"pattern": "ing"}}}, {"a": "string"}, True),  # unanchored
    ({"properties": {"a": {"pattern": "^x"}}}, {"a": 5}, True),  # strings only
    ({"properties": {"a": {"enum": [1, "x"]}}}, {"a": 1.0}, True),  # by value
    ({"properties": {"a": {"enum": [{"x": 1, "y": 2}]}}}, {"a": {"y": 2, "x": 1}}, True),
    ({"properties": {"a": {"enum": ["str"]}}}, {"a": ["str"]}, False),  # no traversal
    ({"properties": {"a": {"uniqueItems": True}}}, {"a": [{"x": 1, "y": 1}, {"y": 1, "x": 1}]},
     False),
    ({"properties": {"a": {"uniqueItems": True}}}, {"a": [[1, 2], [2, 1]]}, True),
    ({"properties": {"a": {"uniqueItems": True}}}, {"a": [1, Int64(1)]}, False),
    ({"properties": {"a": {"minItems": 1, "maxItems": 2}}}, {"a": []}, False),
    ({"properties": {"a": {"items": [{"type": "string"}]}}}, {"a": []}, True),
    ({"properties": {"a": {"additionalItems": False}}}, {"a": [1, 2]}, True),  # no item list
    ({"properties": {"a": {"items": {"bsonType": "int"}}}}, {"a": [1, [2]]}, False),
    ({"patternProperties": {"^x": {"bsonType": "string"}}, "properties": {"xa": {}}},
     {"xa": 1}, False),  # patterns apply to listed properties too
    ({"additionalProperties": False, "properties": {"_id": {}, "a": {}}}, {"a": 1}, True),
    ({"additionalProperties": False, "patternProperties": {"^_": {}}}, {}, True),
    ({"dependencies": {"a": ["b"]}}, {"b": 1}, True),
    ({"dependencies": {"a": {"required": ["c"]}}}, {"a": 1}, False),
    ({"allOf": [{"minProperties": 1}, {"maxProperties": 3}]}, {"a": 1}, True),
    ({"anyOf": [{"required": ["x"]}, {"required": ["y"]}]}, {"z": 1}, False),
    ({"oneOf": [{}, {}]}, {}, False),
    ({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, {"a": 1}, True),
    ({"properties": {"foo": {"not": {}}}}, {}, True),
    ({"properties": {"foo": {"not": {}}}}, {"foo": 1}, False),
    ({"minimum": 100, "maxLength": 0, "items": {"type": "string"}}, {"a": 1}, True),  # no effect
    ({"bsonType": "array"}, {}, False),  # the top is an object
    ({"type": ["object", "array"]}, {}, True),
    ({"enum": [{"_id": 1, "a": 1}]}, {"a": 1}, True),  # the whole document
    ({"enum": [1, 2]}, {}, False),
]


@pytest.mark.parametrize("schema,doc,ok", KEYWORD_EDGES)
def test_keyword_edges(db, schema, doc, ok):
    assert accepted(db, schema, doc) is ok
    # the same schema as a query agrees
    db.q.drop()
    db.q.insert_one(dict(doc, _id=1))
    assert (db.q.count_documents({"$jsonSchema": schema}) == 1) is ok


SCHEMA_ERRORS = [
    ({"foo": 1}, 9, "Unknown $jsonSchema keyword: foo"),
    ({"$ref": "x"}, 9, "$jsonSchema keyword '$ref' is not currently supported"),
    ({"format": "x"}, 9, "$jsonSchema keyword 'format' is not currently supported"),
    ({"type": "string", "bsonType": "string"}, 9,
     "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'"),
    ({"type": "integer"}, 9, "$jsonSchema type 'integer' is not currently supported."),
    ({"type": "int"}, 2, "Unknown type name alias: int"),
    ({"bsonType": "boolean"}, 2, "Unknown type name alias: boolean"),
    ({"bsonType": 2}, 14, "$jsonSchema keyword 'bsonType' must be either a string or an array "
                          "of strings"),
    ({"type": []}, 9, "$jsonSchema keyword 'type' must name at least one type"),
    ({"type": ["string", "string"]}, 9, "$jsonSchema keyword 'type' has duplicate value: string"),
    ({"required": []}, 9, "$jsonSchema keyword 'required' cannot be an empty array"),
    ({"required": ["a", "a"]}, 9,
     "$jsonSchema keyword 'required' array cannot contain duplicate values"),
    ({"required": "a"}, 14,
     "$jsonSchema keyword 'required' must be an array, but found an element of type string"),
    ({"properties": {"a": 1}}, 14, "Nested schema for $jsonSchema property 'a' must be an object"),
    ({"minimum": "1"}, 14, "$jsonSchema keyword 'minimum' must be a number"),
    ({"exclusiveMinimum": True}, 9,
     "$jsonSchema keyword 'minimum' must be a present if exclusiveMinimum is present"),
    ({"minLength": -1}, 9, "Expected a non-negative number in: minLength: -1"),
    ({"minLength": 1.5}, 9, "Expected an integer: minLength: 1.5"),
    ({"maxItems": "2"}, 9, 'Expected a number in: maxItems: "2"'),
    ({"multipleOf": 0}, 9, "$jsonSchema keyword 'multipleOf' must have a positive value"),
    ({"enum": []}, 9, "$jsonSchema keyword 'enum' cannot be an empty array"),
    ({"enum": [1, 1.0]}, 9, "$jsonSchema keyword 'enum' array cannot contain duplicate values."),
    ({"allOf": []}, 2, "$jsonSchema keyword 'allOf' must be a non-empty array"),
    ({"not": []}, 14,
     "$jsonSchema keyword 'not' must be an object, but found an element of type array"),
    ({"uniqueItems": 1}, 14, "$jsonSchema keyword 'uniqueItems' must be a boolean"),
    ({"title": 1}, 14, "$jsonSchema keyword 'title' must be of type string"),
    ({"properties": {"a": {"pattern": "("}}}, 51091, None),
    ({"patternProperties": {"(": {}}}, 2, None),
    ({"dependencies": {"a": []}}, 9,
     "property 'a' in $jsonSchema keyword 'dependencies' cannot be an empty array"),
    ({"encrypt": {}}, 238, None),
]


@pytest.mark.parametrize("schema,code,msg", SCHEMA_ERRORS)
def test_schema_parse_errors(db, schema, code, msg):
    with pytest.raises(OperationFailure) as e:
        db.create_collection("bad", validator={"$jsonSchema": schema})
    assert e.value.code == code
    if msg:
        assert e.value.details["errmsg"] == msg
    # the same error as a query
    with pytest.raises(OperationFailure) as e:
        list(db.q.find({"$jsonSchema": schema}))
    assert e.value.code == code
    # and through collMod, prefixed as mongod prefixes it
    db.create_collection("m")
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "m", validator={"$jsonSchema": schema})
    assert e.value.code == code
    assert e.value.details["errmsg"].startswith(
        "Parsing of collection validator failed :: caused by :: ")


def test_json_schema_placement(db):
    db.q.insert_many([{"_id": 1, "a": [{"x": 1}, {"x": "s"}]}, {"_id": 2, "a": [{"x": "t"}]}])
    el = {"a": {"$elemMatch": {"$jsonSchema": {"properties": {"x": {"bsonType": "int"}}}}}}
    assert [d["_id"] for d in db.q.find(el)] == [1]
    both = {"$or": [{"$jsonSchema": {"required": ["b"]}}, {"_id": 2}]}
    assert [d["_id"] for d in db.q.find(both)] == [2]
    assert [d["_id"] for d in db.q.aggregate([{"$match": {"$jsonSchema": {
        "properties": {"_id": {"minimum": 2}}}}}])] == [2]
    with pytest.raises(OperationFailure) as e:
        list(db.q.find({"a": {"$jsonSchema": {}}}))
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        list(db.q.find({"$jsonSchema": "x"}))
    assert e.value.code == 14 and "$jsonSchema must be an object" in str(e.value)


# ------------------------------------------------------- options and writes

def options(db, name):
    return db.command("listCollections", filter={"name": name})["cursor"]["firstBatch"][0][
        "options"]


def test_options_as_mongod_keeps_them(db):
    db.create_collection("a", validator={"x": {"$exists": True}}, validationAction="warn")
    assert list(options(db, "a").items()) == [("validator", {"x": {"$exists": True}}),
                                              ("validationAction", "warn")]
    db.create_collection("b", validator={})
    assert options(db, "b") == {}
    # collMod stores a level and an action whatever it was given
    db.command("collMod", "b", validationLevel="moderate")
    assert list(options(db, "b").items()) == [("validationLevel", "moderate"),
                                              ("validationAction", "error")]
    db.command("collMod", "b", validator={"y": 1})
    assert list(options(db, "b").items()) == [("validator", {"y": 1}),
                                              ("validationLevel", "moderate"),
                                              ("validationAction", "error")]
    db.command("collMod", "b", validator={})
    assert "validator" not in options(db, "b")
    # the order of the options beside the others
    db.create_collection("c", capped=True, size=4096, collation={"locale": "fr"},
                         validator={"z": 1})
    assert list(options(db, "c"))[:4] == ["capped", "size", "validator", "collation"]


def test_option_errors(db):
    for kw, code in [({"validator": 1}, 14), ({"validationLevel": "nope"}, 2),
                     ({"validationAction": "ignore"}, 2), ({"validationLevel": 1}, 14)]:
        with pytest.raises(OperationFailure) as e:
            db.create_collection("x", **kw)
        assert e.value.code == code
    for v, code in [({"$where": "true"}, 2), ({"$text": {"$search": "a"}}, 2),
                    ({"a": {"$near": [0, 0]}}, 5626500), ({"a": {"$foo": 1}}, 2)]:
        with pytest.raises(OperationFailure) as e:
            db.create_collection("x", validator=v)
        assert e.value.code == code
    with pytest.raises(OperationFailure) as e:
        db.client.admin.create_collection("x", validator={"a": 1})
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.create_collection("system.js", validator={"a": 1})
    assert e.value.code == 72


def test_levels_and_actions(db, client):
    db.create_collection("c", validator={"n": {"$type": "int"}})
    db.c.insert_one({"_id": 1, "n": "bad"}, bypass_document_validation=True)
    db.c.insert_one({"_id": 2, "n": 2})
    # strict: an update that leaves the document invalid is refused
    with pytest.raises(WriteError):
        db.c.update_one({"_id": 1}, {"$set": {"m": 1}})
    # moderate: an invalid document may stay invalid; a valid one may not become so
    db.command("collMod", "c", validationLevel="moderate")
    db.c.update_one({"_id": 1}, {"$set": {"m": 1}})
    with pytest.raises(WriteError):
        db.c.update_one({"_id": 2}, {"$set": {"n": "x"}})
    with pytest.raises(WriteError):  # inserts are always checked
        db.c.insert_one({"_id": 3, "n": "x"})
    # off: nothing is checked
    db.command("collMod", "c", validationLevel="off")
    db.c.insert_one({"_id": 4, "n": "x"})
    # warn: the write goes on, and the log says why
    db.command("collMod", "c", validationLevel="strict", validationAction="warn")
    db.c.insert_one({"_id": 5, "n": "warned"})
    assert db.c.find_one({"_id": 5})
    log = client.admin.command("getLog", "global")["log"]
    lines = [l for l in log if '"id":20294' in l]
    assert lines and '"warned"' in lines[-1] and "failingDocumentId" in lines[-1]
    # deletes are never checked
    db.command("collMod", "c", validationAction="error")
    db.c.delete_one({"_id": 4})


def test_every_write_path(db):
    db.create_collection("w", validator={"ok": True})
    db.w.insert_one({"_id": 1, "ok": True})
    bad = {"$set": {"ok": False}}
    for fn in (lambda **kw: db.w.update_one({"_id": 1}, bad, **kw),
               lambda **kw: db.w.update_many({}, bad, **kw),
               lambda **kw: db.w.replace_one({"_id": 1}, {"ok": 0}, **kw),
               lambda **kw: db.w.update_one({"_id": 9}, bad, upsert=True, **kw),
               lambda **kw: db.w.find_one_and_update({"_id": 1}, bad, **kw),
               lambda **kw: db.w.find_one_and_replace({"_id": 1}, {"ok": 1}, **kw),
               lambda **kw: db.w.update_one({"_id": 1}, [{"$set": {"ok": "no"}}], **kw)):
        with pytest.raises((WriteError, OperationFailure)) as e:
            fn()
        assert e.value.code == 121
        assert e.value.details["errInfo"]["failingDocumentId"] in (1, 9)
    assert db.w.find_one({"_id": 1}) == {"_id": 1, "ok": True}
    # an unordered batch goes on past a refused document
    with pytest.raises(pymongo.errors.BulkWriteError) as e:
        db.w.insert_many([{"_id": 2, "ok": False}, {"_id": 3, "ok": True}], ordered=False)
    errs = e.value.details["writeErrors"]
    assert [(x["index"], x["code"]) for x in errs] == [(0, 121)]
    assert errs[0]["errInfo"]["details"]["operatorName"] == "$eq"
    assert db.w.find_one({"_id": 3})
    # $out and $merge into a collection with a validator
    db.src.insert_many([{"_id": 10, "ok": False}])
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$merge": {"into": "w"}}]))
    assert e.value.code == 121 and e.value.details["errInfo"]["failingDocumentId"] == 10
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$out": "w"}]))
    assert e.value.code == 121
    assert db.w.count_documents({}) == 2  # $out left the target as it was
    # bypassDocumentValidation lets each of them through
    db.w.update_one({"_id": 1}, bad, bypass_document_validation=True)
    db.w.find_one_and_update({"_id": 3}, bad, bypassDocumentValidation=True)
    list(db.src.aggregate([{"$merge": {"into": "w"}}], bypassDocumentValidation=True))
    assert db.w.count_documents({"ok": False}) == 3
    list(db.src.aggregate([{"$out": "w"}], bypassDocumentValidation=True))
    assert list(db.w.find()) == [{"_id": 10, "ok": False}]
    # and the target keeps its validator through $out
    assert options(db, "w")["validator"] == {"ok": True}


def test_validator_uses_the_collection_collation(db):
    db.create_collection("cc", collation={"locale": "en", "strength": 2},
                         validator={"s": "abc"})
    db.cc.insert_one({"s": "ABC"})
    with pytest.raises(WriteError):
        db.cc.insert_one({"s": "abd"})


def test_validator_survives_restart(tmp_path):
    import multifora
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    c = pymongo.MongoClient(srv.uri)
    c.t.create_collection("p", validator={"$jsonSchema": {"required": ["a"]}})
    c.close()
    srv.stop()
    srv = multifora.Server(str(tmp_path / "db"), port=0).start()
    c = pymongo.MongoClient(srv.uri)
    with pytest.raises(WriteError):
        c.t.p.insert_one({"b": 1})
    c.close()
    srv.stop()


# ----------------------------------------- randomized: validator == query == oracle

def reference(schema, value, top=True):
    """An independent reading of the keywords the generator below uses."""
    def is_num(v):
        return isinstance(v, (int, float, Int64, Decimal128)) and not isinstance(v, bool)
    t = value
    if top and "bsonType" in schema:  # the document is an object, or nothing matches
        kinds = schema["bsonType"] if isinstance(schema["bsonType"], list) else [schema["bsonType"]]
        if "object" not in kinds:
            return False
    if not top and "bsonType" in schema:
        names = {"int": lambda v: isinstance(v, int) and not isinstance(v, (bool, Int64))
                 and -2**31 <= v < 2**31,
                 "string": lambda v: isinstance(v, str), "object": lambda v: isinstance(v, dict),
                 "array": lambda v: isinstance(v, list), "bool": lambda v: isinstance(v, bool),
                 "null": lambda v: v is None, "double": lambda v: isinstance(v, float)}
        kinds = schema["bsonType"] if isinstance(schema["bsonType"], list) else [schema["bsonType"]]
        if not any(names[k](t) for k in kinds):
            return False
    if not top and is_num(t):
        if "minimum" in schema and not t >= schema["minimum"]:
            return False
        if "maximum" in schema and not t <= schema["maximum"]:
            return False
    if not top and isinstance(t, str):
        if "minLength" in schema and len(t) < schema["minLength"]:
            return False
        if "maxLength" in schema and len(t) > schema["maxLength"]:
            return False
    if not top and isinstance(t, list):
        if "minItems" in schema and len(t) < schema["minItems"]:
            return False
        if "items" in schema and not all(reference(schema["items"], x, False) for x in t):
            return False
    if isinstance(t, dict):
        for k in schema.get("required", []):
            if k not in t:
                return False
        for k, sub in schema.get("properties", {}).items():
            if k in t and not reference(sub, t[k], False):
                return False
        if schema.get("additionalProperties") is False:
            if any(k not in schema.get("properties", {}) for k in t):
                return False
    if "enum" in schema and not top:
        if not any(type(e) is type(t) and e == t for e in schema["enum"]):
            return False
    if "enum" in schema and top:  # documents only, compared whole
        if not any(isinstance(e, dict) and e == t for e in schema["enum"]):
            return False
    if "anyOf" in schema and not any(reference(s, t, top) for s in schema["anyOf"]):
        return False
    if "not" in schema and reference(schema["not"], t, top):
        return False
    return True


def random_schema(rng, depth=0):
    s = {}
    kind = rng.choice(["int", "string", "array", "object", None])
    if kind and depth:
        s["bsonType"] = kind if rng.random() < 0.8 else [kind, "null"]
    if kind == "int" or (kind is None and rng.random() < 0.3):
        if rng.random() < 0.6:
            s["minimum"] = rng.randint(-3, 3)
        if rng.random() < 0.6:
            s["maximum"] = rng.randint(0, 6)
    if kind == "string" or (kind is None and rng.random() < 0.3):
        if rng.random() < 0.5:
            s["minLength"] = rng.randint(0, 3)
        if rng.random() < 0.5:
            s["maxLength"] = rng.randint(1, 4)
    if kind == "array" and depth < 2:
        if rng.random() < 0.5:
            s["minItems"] = rng.randint(0, 2)
        if rng.random() < 0.7:
            s["items"] = random_schema(rng, depth + 1)
    if (kind == "object" or depth == 0) and depth < 2:
        props = rng.sample(["a", "b", "c"], rng.randint(0, 3))
        if props:
            s["properties"] = {p: random_schema(rng, depth + 1) for p in props}
        req = rng.sample(["a", "b", "c"], rng.randint(0, 2))
        if req:
            s["required"] = req
    if depth and rng.random() < 0.15:
        s["enum"] = rng.sample([1, 2, "x", "yy", None, True], 3)
    if rng.random() < 0.1 and depth < 2:
        s["anyOf"] = [random_schema(rng, depth + 1), random_schema(rng, depth + 1)]
    if rng.random() < 0.08 and depth < 2:
        s["not"] = random_schema(rng, depth + 1)
    return s


def random_value(rng, depth=0):
    r = rng.random()
    if r < 0.3:
        return rng.randint(-4, 7)
    if r < 0.5:
        return rng.choice(["", "x", "yy", "zzz", "wwww"])
    if r < 0.6:
        return rng.choice([None, True, 1.5])
    if r < 0.8 and depth < 2:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2:
        return {k: random_value(rng, depth + 1) for k in rng.sample(["a", "b", "c"],
                                                                     rng.randint(0, 3))}
    return rng.randint(0, 3)


def test_randomized_validator_query_oracle(db):
    rng = random.Random(51)
    checked = 0
    for round_ in range(60):
        schema = random_schema(rng)
        docs = [dict({k: random_value(rng) for k in rng.sample(["a", "b", "c"],
                                                                rng.randint(0, 3))}, _id=i)
                for i in range(25)]
        db.drop_collection("r")
        db.drop_collection("rv")
        db.r.insert_many(docs)
        queried = {d["_id"] for d in db.r.find({"$jsonSchema": schema}, {"_id": 1})}
        db.create_collection("rv", validator={"$jsonSchema": schema})
        validated = set()
        for d in docs:
            try:
                db.rv.insert_one(d)
                validated.add(d["_id"])
            except WriteError as e:
                assert e.code == 121
                assert e.details["errInfo"]["details"]["operatorName"] == "$jsonSchema"
        oracle = {d["_id"] for d in docs if reference(schema, d)}
        assert queried == validated == oracle, (schema, queried ^ oracle)
        checked += len(docs)
    assert checked == 1500
