"""A runner for MongoDB's unified test format (schema 1.x), driving pymongo.

One test of a file runs as the specification's "Executing a Test" says:

    load file (Extended JSON) -> schemaVersion 1.x?  -> skipReason?
      -> runOnRequirements (file, then test) against the server's
         version/topology/auth/serverless/serverParameters      -> Skipped
      -> initialData: drop, create (createOptions), insert  (internal client,
         the server's default write concern)
      -> createEntities: client / database / collection / session
      -> operations, each: run via pymongo with the spec's argument names
         mapped to pymongo's; then expectError | expectResult |
         saveResultAsEntity | ignoreResultAndError
      -> disable fail points, stop observing events
      -> expectEvents (command events; ignoreExtraEvents)
      -> outcome (collection contents, read with find sorted by _id)
      -> end sessions, close cursors and clients

What a caller gets:

- ``Skipped(reason)``: a requirement the server does not meet (or skipReason);
- ``Unsupported(reason)``: an operation, argument, entity or event kind this
  runner (or pymongo, or the server, for fail points) cannot provide;
- ``SpecFailure`` (an AssertionError): the server's behaviour differs from
  the test's expectation, with the operation and the path of the difference;
- any other exception: a malformed file or a runner bug.

Matching rules live in ``matcher.py``.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import pymongo
from bson import json_util
from bson.json_util import JSONOptions
from pymongo import monitoring
from pymongo.collection import Collection
from pymongo.cursor import CursorType
from pymongo.database import Database
from pymongo.errors import (BulkWriteError, ClientBulkWriteException, OperationFailure,
                            PyMongoError)
from pymongo.read_concern import ReadConcern
from pymongo.read_preferences import ReadPreference, make_read_preference, read_pref_mode_from_name
from pymongo.results import (BulkWriteResult, DeleteResult, InsertManyResult, InsertOneResult,
                             UpdateResult)
from pymongo.server_api import ServerApi
from pymongo.write_concern import WriteConcern

from .matcher import MISSING, MatchError, exact_equal, match

__all__ = ["Skipped", "SpecFailure", "UnifiedRunner", "Unsupported", "load_spec",
           "SCHEMA_MAJOR"]

SCHEMA_MAJOR = 1
_JSON = JSONOptions(tz_aware=False)

# Commands whose events are never observed (command monitoring spec,
# "security"), and the one a fail point issues.
_SENSITIVE = {"authenticate", "saslstart", "saslcontinue", "getnonce", "createuser",
              "updateuser", "copydbgetnonce", "copydbsaslstart", "copydb"}
_HELLO = {"hello", "ismaster"}
# codeName -> code, for error documents that carry a code but no codeName
# (a bulk write's writeErrors); the spec allows comparing codes instead.
_CODES = {"BadValue": 2, "FailedToParse": 9, "TypeMismatch": 14, "IllegalOperation": 20,
          "NamespaceNotFound": 26, "CursorNotFound": 43, "NamespaceExists": 48,
          "MaxTimeMSExpired": 50, "DollarPrefixedFieldName": 52, "CommandNotFound": 59,
          "WriteConcernFailed": 64, "ImmutableField": 66, "InvalidOptions": 72,
          "InvalidNamespace": 73, "DocumentValidationFailure": 121, "APIVersionError": 322,
          "APIStrictError": 323, "APIDeprecationError": 324, "NotWritablePrimary": 10107,
          "DuplicateKey": 11000}
_NOT_ROOT_RESULTS = {"distinct", "listCollectionNames", "listDatabaseNames", "listIndexNames"}


class Unsupported(Exception):
    """Something this runner, pymongo or the server cannot do; ``reason`` says what."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Skipped(Exception):
    """The test does not apply to this server; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SpecFailure(AssertionError):
    """The server did not behave as the test expects."""


def load_spec(path) -> dict:
    """Parse a unified-format file (relaxed or canonical Extended JSON)."""
    return json_util.loads(Path(path).read_text(), json_options=_JSON)


def parse_version(text: str) -> tuple:
    parts = [int(p) for p in str(text).split(".") if p.isdigit()]
    return tuple((parts + [0, 0, 0])[:3])


def check_schema_version(spec: Mapping) -> None:
    """Raise if the file's schemaVersion is not 1.x (the runner supports 1.x)."""
    version = spec.get("schemaVersion")
    if version is None or parse_version(version)[0] != SCHEMA_MAJOR:
        raise ValueError(f"schemaVersion {version!r} is not supported (this runner reads "
                         f"{SCHEMA_MAJOR}.x)")


# ---------------------------------------------------------------- the server

class ServerInfo:
    """What runOnRequirements are checked against."""

    def __init__(self, version_text: str, topology: str, client=None):
        self.version_text = version_text
        self.version = parse_version(version_text)
        self.topology = topology
        self.auth = False       # the runner connects without credentials
        self.serverless = False
        self._client = client   # for serverParameters; None: not known

    @classmethod
    def of(cls, client: pymongo.MongoClient) -> "ServerInfo":
        build = client.admin.command("buildInfo")
        hello = client.admin.command("hello")
        if hello.get("msg") == "isdbgrid":
            topology = "sharded"
        elif hello.get("setName"):
            topology = "replicaset"
        else:
            topology = "single"
        return cls(build.get("version", "0.0.0"), topology, client)

    def parameter(self, name: str) -> Any:
        if self._client is None:
            raise ValueError("server parameters are unknown without a server")
        try:
            reply = self._client.admin.command({"getParameter": 1, name: 1})
        except OperationFailure as exc:
            if exc.code in (59, 72):  # no getParameter, or no such parameter
                return MISSING
            raise
        return reply.get(name, MISSING)

    def unmet(self, req: Mapping) -> Optional[str]:
        """Why ``req`` (one runOnRequirement) is not met, or None."""
        if "minServerVersion" in req and self.version < parse_version(req["minServerVersion"]):
            return f"needs server >= {req['minServerVersion']} (server is {self.version_text})"
        if "maxServerVersion" in req and self.version > parse_version(req["maxServerVersion"]):
            return f"needs server <= {req['maxServerVersion']} (server is {self.version_text})"
        if "topologies" in req:
            tops = set(req["topologies"])
            if "sharded-replicaset" in tops:
                tops.add("sharded")
            if self.topology not in tops:
                return f"needs topology {req['topologies']} (server is {self.topology})"
        if req.get("serverless") == "require":
            return "needs a serverless deployment"
        if req.get("auth") is True or "authMechanism" in req:
            return "needs authentication"
        if req.get("csfle"):
            return "needs client-side field level encryption"
        for name, want in (req.get("serverParameters") or {}).items():
            got = self.parameter(name)
            if got is MISSING or not (exact_equal(want, got) or want == got):
                return f"needs server parameter {name}={want!r} (server has {got!r})"
        return None


def requirements_unmet(reqs, info: ServerInfo) -> Optional[str]:
    """None if any requirement in the list is met, else why none is."""
    if not reqs:
        return None
    reasons = []
    for req in reqs:
        why = info.unmet(req)
        if why is None:
            return None
        reasons.append(why)
    return "runOnRequirements not met: " + " | ".join(reasons)


def skip_reason_before_start(spec: Mapping, test: Mapping, version_text: str,
                             topology: str = "single") -> Optional[str]:
    """Why a test will be skipped, decided without a server from its version
    and topology (so a caller need not start one); None if it may run or if
    deciding needs the server (serverParameters)."""
    if test.get("skipReason"):
        return f"skipReason: {test['skipReason']}"
    info = ServerInfo(version_text, topology)
    for reqs in (spec.get("runOnRequirements"), test.get("runOnRequirements")):
        if reqs and not any("serverParameters" in r for r in reqs):
            why = requirements_unmet(reqs, info)
            if why:
                return why
    return None


# ---------------------------------------------------------------- entities

class EventRecorder(monitoring.CommandListener):
    """Collects a client's command events of the observed kinds."""

    def __init__(self, observe, ignore, observe_sensitive: bool):
        self.observe = set(observe)
        self.ignore = {n.lower() for n in ignore} | {"configurefailpoint"}
        self.observe_sensitive = observe_sensitive
        self.events: list = []
        self.all_started: list = []  # every started event, for the lsid assertions
        self.enabled = True

    def _skip(self, name: str, doc: Mapping) -> bool:
        low = name.lower()
        if low in self.ignore:
            return True
        if not self.observe_sensitive:
            if low in _SENSITIVE or (low in _HELLO and not doc):
                return True
        return False

    def _add(self, kind: str, event, doc) -> None:
        if self.enabled and kind in self.observe and not self._skip(event.command_name, doc):
            self.events.append((kind, event))

    def started(self, event) -> None:
        if self.enabled and not self._skip(event.command_name, event.command):
            self.all_started.append(event)
        self._add("commandStartedEvent", event, event.command)

    def succeeded(self, event) -> None:
        self._add("commandSucceededEvent", event, event.reply)

    def failed(self, event) -> None:
        self._add("commandFailedEvent", event, {"_": 1})


class ClientEntity:
    def __init__(self, client: pymongo.MongoClient, recorder: Optional[EventRecorder]):
        self.client = client
        self.recorder = recorder


class SessionEntity:
    def __init__(self, session, client_id: str):
        self.session = session
        self.client_id = client_id
        self.lsid = session.session_id


class CursorEntity:
    """A find or command cursor whose server-side cursor already exists: the
    first document is fetched at creation (pymongo runs find lazily) and
    handed out by the first iteration."""

    def __init__(self, cursor):
        self.cursor = cursor
        self.buffered: list = []
        try:
            self.buffered.append(next(cursor))
        except StopIteration:
            pass

    def next(self):
        if self.buffered:
            return self.buffered.pop(0)
        return next(self.cursor)

    def close(self):
        try:
            self.cursor.close()
        except PyMongoError:
            pass


def _read_concern(doc):
    return ReadConcern(doc.get("level"))


def _write_concern(doc):
    kw = {}
    for key, name in (("w", "w"), ("j", "j"), ("journal", "j"), ("wtimeoutMS", "wtimeout"),
                      ("fsync", "fsync")):
        if key in doc:
            kw[name] = doc[key]
    unknown = set(doc) - {"w", "j", "journal", "wtimeoutMS", "fsync"}
    if unknown:
        raise Unsupported(f"writeConcern field(s) {sorted(unknown)}")
    return WriteConcern(**kw)


def _read_preference(doc):
    mode = read_pref_mode_from_name(doc["mode"])
    return make_read_preference(mode, doc.get("tagSets"), doc.get("maxStalenessSeconds", -1))


def _collection_options(opts: Mapping) -> dict:
    kw = {}
    for key, value in (opts or {}).items():
        if key == "readConcern":
            kw["read_concern"] = _read_concern(value)
        elif key == "writeConcern":
            kw["write_concern"] = _write_concern(value)
        elif key == "readPreference":
            kw["read_preference"] = _read_preference(value)
        else:
            raise Unsupported(f"collection/database option {key!r}")
    return kw


# ---------------------------------------------------------------- results

def _result_doc(res: Any) -> Any:
    """A pymongo result as the CRUD spec's result document."""
    if isinstance(res, InsertOneResult):
        return {"insertedId": res.inserted_id, "acknowledged": res.acknowledged}
    if isinstance(res, InsertManyResult):
        return {"insertedIds": {str(i): v for i, v in enumerate(res.inserted_ids)},
                "acknowledged": res.acknowledged}
    if not getattr(res, "acknowledged", True):
        return {"acknowledged": False}
    if isinstance(res, UpdateResult):
        raw = res.raw_result or {}
        doc = {"matchedCount": res.matched_count, "modifiedCount": res.modified_count,
               "upsertedCount": 1 if "upserted" in raw else 0}
        if "upserted" in raw:
            doc["upsertedId"] = raw["upserted"]
        return doc
    if isinstance(res, DeleteResult):
        return {"deletedCount": res.deleted_count}
    if isinstance(res, BulkWriteResult):
        return {"insertedCount": res.inserted_count, "matchedCount": res.matched_count,
                "modifiedCount": res.modified_count, "deletedCount": res.deleted_count,
                "upsertedCount": res.upserted_count,
                "upsertedIds": {str(k): v for k, v in res.upserted_ids.items()}}
    return res


def _client_bulk_result(res) -> dict:
    """A pymongo ClientBulkWriteResult as the CRUD spec's BulkWriteResult."""
    if not res.acknowledged:
        return {"acknowledged": False}
    doc = {"insertedCount": res.inserted_count, "upsertedCount": res.upserted_count,
           "matchedCount": res.matched_count, "modifiedCount": res.modified_count,
           "deletedCount": res.deleted_count}
    if res.has_verbose_results:
        doc["insertResults"] = {str(i): {"insertedId": r.inserted_id}
                                for i, r in res.insert_results.items()}
        doc["updateResults"] = {str(i): _result_doc(r) for i, r in res.update_results.items()}
        doc["deleteResults"] = {str(i): _result_doc(r) for i, r in res.delete_results.items()}
    return doc


def _bulk_error_result(details: Mapping) -> dict:
    return {"insertedCount": details.get("nInserted", 0),
            "matchedCount": details.get("nMatched", 0),
            "modifiedCount": details.get("nModified", 0),
            "deletedCount": details.get("nRemoved", 0),
            "upsertedCount": details.get("nUpserted", 0),
            "upsertedIds": {str(u["index"]): u["_id"] for u in details.get("upserted", [])}}


def _is_server_error(exc) -> bool:
    if isinstance(exc, ClientBulkWriteException):
        return (isinstance(exc.error, OperationFailure) or bool(exc.write_errors)
                or bool(exc.write_concern_errors))
    return isinstance(exc, OperationFailure)


def _server_errors(exc) -> list:
    """The server error documents an exception carries: the reply, and for a
    bulk write each write error and write concern error (a client bulk write:
    only its top-level error, as the spec says)."""
    if isinstance(exc, ClientBulkWriteException):
        return _server_errors(exc.error) if exc.error is not None else []
    if not isinstance(exc, OperationFailure):
        return []
    details = exc.details or {}
    if isinstance(exc, BulkWriteError):
        return list(details.get("writeErrors", [])) + list(details.get("writeConcernErrors", []))
    return [details]


def _code_for(name: str) -> int:
    if name not in _CODES:
        raise Unsupported(f"errorCodeName {name}: no codeName in the error and no code known")
    return _CODES[name]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------- the runner

class UnifiedRunner:
    """Runs unified-format tests against the server at ``uri``.

    ``client_kwargs`` go to every MongoClient the runner makes (the internal
    one and each client entity), before a test's own uriOptions.
    """

    def __init__(self, uri: str, **client_kwargs):
        self.uri = uri
        self.client_kwargs = {"serverSelectionTimeoutMS": 5000, **client_kwargs}

    # -- one test -------------------------------------------------------

    def run(self, spec: Mapping, description: str) -> None:
        """Run the test of ``spec`` (a loaded file) named ``description``."""
        tests = [t for t in spec["tests"] if t["description"] == description]
        if len(tests) != 1:
            raise ValueError(f"{len(tests)} tests named {description!r}")
        self.run_test(spec, tests[0])

    def run_test(self, spec: Mapping, test: Mapping) -> None:
        check_schema_version(spec)
        spec, test = copy.deepcopy(spec), copy.deepcopy(test)  # pymongo adds _id to inserts
        if test.get("skipReason"):
            raise Skipped(f"skipReason: {test['skipReason']}")
        internal = pymongo.MongoClient(self.uri, **self.client_kwargs)
        state = _TestState(self, internal)
        try:
            info = ServerInfo.of(internal)
            for reqs in (spec.get("runOnRequirements"), test.get("runOnRequirements")):
                why = requirements_unmet(reqs, info)
                if why:
                    raise Skipped(why)
            state.info = info
            state.initial_data(spec.get("initialData") or [])
            state.create_entities(spec.get("createEntities") or [])
            for i, op in enumerate(test.get("operations", [])):
                state.operation(i, op)
            state.stop_observing()
            state.disable_fail_points()
            if "expectEvents" in test:
                state.check_events(test["expectEvents"])
            if "expectLogMessages" in test:
                raise Unsupported("expectLogMessages: log messages are not observed")
            if "outcome" in test:
                state.check_outcome(test["outcome"])
        finally:
            state.close()


class _TestState:
    """The entity map and everything else one test owns."""

    def __init__(self, runner: UnifiedRunner, internal: pymongo.MongoClient):
        self.runner = runner
        self.internal = internal
        self.info: Optional[ServerInfo] = None
        self.entities: dict = {}
        self.fail_points: list = []

    # -- setup ----------------------------------------------------------

    def initial_data(self, data) -> None:
        for cd in data:
            db = self.internal[cd["databaseName"]]
            name = cd["collectionName"]
            db.drop_collection(name)
            if "createOptions" in cd:
                db.command({"create": name, **cd["createOptions"]})
            docs = cd.get("documents") or []
            if docs:
                db[name].insert_many(docs)
            elif "createOptions" not in cd:
                db.command({"create": name})

    def create_entities(self, items) -> None:
        for item in items:
            if len(item) != 1:
                raise ValueError(f"an entity must have exactly one kind: {item}")
            kind, spec = next(iter(item.items()))
            eid = spec["id"]
            if eid in self.entities:
                raise ValueError(f"entity {eid!r} already exists")
            maker = getattr(self, f"_make_{kind}", None)
            if maker is None:
                raise Unsupported(f"{kind} entities are not supported by this runner")
            self.entities[eid] = maker(spec)

    def _make_client(self, spec) -> ClientEntity:
        for key in ("storeEventsAsEntities", "observeLogMessages"):
            if key in spec:
                raise Unsupported(f"client option {key}")
        observe = spec.get("observeEvents") or []
        for kind in observe:
            if kind not in ("commandStartedEvent", "commandSucceededEvent", "commandFailedEvent"):
                raise Unsupported(f"observing {kind} (only command events are observed)")
        kw = dict(self.runner.client_kwargs)
        kw.update(spec.get("uriOptions") or {})
        recorder = None
        if observe or "ignoreCommandMonitoringEvents" in spec:
            recorder = EventRecorder(observe, spec.get("ignoreCommandMonitoringEvents") or [],
                                     bool(spec.get("observeSensitiveCommands")))
            kw["event_listeners"] = [recorder]
        if "serverApi" in spec:
            api = spec["serverApi"]
            kw["server_api"] = ServerApi(api["version"], strict=api.get("strict"),
                                         deprecation_errors=api.get("deprecationErrors"))
        return ClientEntity(pymongo.MongoClient(self.runner.uri, **kw), recorder)

    def _make_database(self, spec) -> Database:
        client = self._entity(spec["client"], ClientEntity).client
        return client.get_database(spec["databaseName"],
                                   **_collection_options(spec.get("databaseOptions")))

    def _make_collection(self, spec) -> Collection:
        db = self._entity(spec["database"], Database)
        return db.get_collection(spec["collectionName"],
                                 **_collection_options(spec.get("collectionOptions")))

    def _make_session(self, spec) -> SessionEntity:
        client = self._entity(spec["client"], ClientEntity).client
        opts = dict(spec.get("sessionOptions") or {})
        kw = {}
        if "causalConsistency" in opts:
            kw["causal_consistency"] = opts.pop("causalConsistency")
        if "snapshot" in opts:
            kw["snapshot"] = opts.pop("snapshot")
        if opts:
            raise Unsupported(f"session option(s) {sorted(opts)}")
        return SessionEntity(client.start_session(**kw), spec["client"])

    def _entity(self, name: str, kind=None):
        if name not in self.entities:
            raise ValueError(f"no entity named {name!r}")
        ent = self.entities[name]
        if kind is not None and not isinstance(ent, kind):
            raise ValueError(f"entity {name!r} is a {type(ent).__name__}, not a {kind.__name__}")
        return ent

    def _lsid(self, name: str):
        return self._entity(name, SessionEntity).lsid

    def _match(self, expected, actual, *, root: bool, where: str) -> None:
        try:
            match(expected, actual, root=root, entity=self._entity, session_lsid=self._lsid)
        except MatchError as exc:
            raise SpecFailure(f"{where}: {exc}") from None

    # -- operations -----------------------------------------------------

    def operation(self, index: int, op: Mapping) -> None:
        name, obj = op["name"], op["object"]
        where = f"operation #{index} {obj}.{name}"
        args = op.get("arguments") or {}
        if obj == "testRunner":
            handler = getattr(self, f"_tr_{name}", None)
            if handler is None:
                raise Unsupported(f"test runner operation {name}")
            handler(args)
            return
        target = self._entity(obj)
        kind = {ClientEntity: "client", Database: "db", Collection: "coll",
                SessionEntity: "session", CursorEntity: "cursor"}.get(type(target))
        handler = getattr(self, f"_{kind}_{name}", None) if kind else None
        if handler is None:
            raise Unsupported(f"operation {name} on a {kind or type(target).__name__}")
        try:
            result = handler(target, dict(args))
        except (Unsupported, Skipped, SpecFailure):
            raise
        except Exception as exc:  # noqa: BLE001 - judged against expectError below
            if op.get("ignoreResultAndError"):
                return
            if "expectError" in op:
                self._check_error(op["expectError"], exc, where)
                return
            raise SpecFailure(f"{where} raised {_describe(exc)}") from exc
        if op.get("ignoreResultAndError"):
            return
        if "expectError" in op:
            raise SpecFailure(f"{where}: expected an error {op['expectError']}, "
                              f"got the result {result!r}")
        if "expectResult" in op:
            self._match(op["expectResult"], result, root=name not in _NOT_ROOT_RESULTS,
                        where=f"{where} result")
        if "saveResultAsEntity" in op:
            eid = op["saveResultAsEntity"]
            if eid in self.entities:
                raise ValueError(f"entity {eid!r} already exists")
            self.entities[eid] = result

    def _check_error(self, exp: Mapping, exc: BaseException, where: str) -> None:
        def fail(what):
            raise SpecFailure(f"{where}: {what}; the error was {_describe(exc)}") from exc

        server = _is_server_error(exc)
        docs = _server_errors(exc)
        if exp.get("isClientError") is True and server:
            fail("expected a client-side error, got a server error")
        if exp.get("isClientError") is False and not server:
            fail("expected a server error, got a client-side error")
        if "isTimeoutError" in exp and bool(getattr(exc, "timeout", False)) != exp["isTimeoutError"]:
            fail(f"isTimeoutError: {exp['isTimeoutError']}")
        if "errorContains" in exp:
            needle = exp["errorContains"].lower()
            texts = [str(exc)] + [str(d.get("errmsg", "")) for d in docs]
            if not any(needle in t.lower() for t in texts):
                fail(f"the error message does not contain {exp['errorContains']!r}")
        if "errorCode" in exp:
            codes = [d.get("code") for d in docs]
            if not server or exp["errorCode"] not in codes:
                fail(f"expected error code {exp['errorCode']}, the server's codes are {codes}")
        if "errorCodeName" in exp:
            want = exp["errorCodeName"]
            names = [d.get("codeName") for d in docs]
            found = any(str(d["codeName"]).lower() == want.lower() if "codeName" in d
                        else _code_for(want) == d.get("code") for d in docs)
            if not server or not found:
                fail(f"expected codeName {want}, the server's are {names}")
        for label in exp.get("errorLabelsContain", []):
            if not (isinstance(exc, PyMongoError) and exc.has_error_label(label)):
                fail(f"expected the error label {label!r}")
        for label in exp.get("errorLabelsOmit", []):
            if isinstance(exc, PyMongoError) and exc.has_error_label(label):
                fail(f"the error has the label {label!r}, expected it absent")
        if "errorResponse" in exp:
            if not docs:
                fail("errorResponse: the error carries no server response")
            response = docs[0] if isinstance(exc, ClientBulkWriteException) else exc.details
            self._match(exp["errorResponse"], response or {}, root=True,
                        where=f"{where} errorResponse")
        if "expectResult" in exp:
            if isinstance(exc, BulkWriteError):
                partial = _bulk_error_result(exc.details)
            elif isinstance(exc, ClientBulkWriteException) and exc.partial_result is not None:
                partial = _client_bulk_result(exc.partial_result)
            else:
                fail("expectResult: the error carries no partial result")
            self._match(exp["expectResult"], partial, root=True,
                        where=f"{where} error's partial result")
        if "writeErrors" in exp or "writeConcernErrors" in exp:
            if not isinstance(exc, ClientBulkWriteException):
                fail("writeErrors/writeConcernErrors: not a client bulk write error")
            if "writeErrors" in exp:
                got = {str(e.get("idx", e.get("index"))): e for e in exc.write_errors or []}
                if set(got) != set(exp["writeErrors"]):
                    fail(f"write errors at {sorted(got)}, expected {sorted(exp['writeErrors'])}")
                for idx, want in exp["writeErrors"].items():
                    self._match(want, got[idx], root=True, where=f"{where} writeErrors[{idx}]")
            if "writeConcernErrors" in exp:
                want, got = exp["writeConcernErrors"], list(exc.write_concern_errors or [])
                if len(want) != len(got):
                    fail(f"{len(got)} write concern errors, expected {len(want)}")
                for i, (w, g) in enumerate(zip(want, got)):
                    self._match(w, g, root=True, where=f"{where} writeConcernErrors[{i}]")

    # -- argument mapping -------------------------------------------------

    def _kwargs(self, op: str, args: dict, names: Mapping[str, str]) -> dict:
        """Map the spec's argument names to pymongo's; an argument not in
        ``names`` (nor session/rawData) is Unsupported."""
        kw = {}
        for key, value in args.items():
            if key == "session":
                kw["session"] = self._entity(value, SessionEntity).session
            elif key == "rawData":
                # pymongo has no rawData; the CRUD spec has drivers omit it for
                # servers before 8.2 (the "...less than 8.2.0 - ignore" tests).
                if self.info.version >= (8, 2, 0):
                    raise Unsupported(f"{op}: rawData (pymongo has no such option)")
            elif key in names:
                kw[names[key]] = _convert(key, value)
            else:
                raise Unsupported(f"{op}: argument {key!r} is not mapped by this runner")
        return kw

    # -- collection operations ------------------------------------------

    def _coll_insertOne(self, coll, a):
        doc = a.pop("document")
        kw = self._kwargs("insertOne", a, {"bypassDocumentValidation": "bypass_document_validation",
                                            "comment": "comment"})
        return _result_doc(coll.insert_one(doc, **kw))

    def _coll_insertMany(self, coll, a):
        docs = a.pop("documents")
        kw = self._kwargs("insertMany", a, {"ordered": "ordered", "comment": "comment",
                                             "bypassDocumentValidation": "bypass_document_validation"})
        return _result_doc(coll.insert_many(docs, **kw))

    _UPDATE = {"upsert": "upsert", "arrayFilters": "array_filters", "collation": "collation",
               "hint": "hint", "let": "let", "comment": "comment", "sort": "sort",
               "bypassDocumentValidation": "bypass_document_validation"}

    def _coll_updateOne(self, coll, a):
        f, u = a.pop("filter"), a.pop("update")
        return _result_doc(coll.update_one(f, u, **self._kwargs("updateOne", a, self._UPDATE)))

    def _coll_updateMany(self, coll, a):
        f, u = a.pop("filter"), a.pop("update")
        names = {k: v for k, v in self._UPDATE.items() if k != "sort"}
        return _result_doc(coll.update_many(f, u, **self._kwargs("updateMany", a, names)))

    def _coll_replaceOne(self, coll, a):
        f, r = a.pop("filter"), a.pop("replacement")
        names = {k: v for k, v in self._UPDATE.items() if k != "arrayFilters"}
        return _result_doc(coll.replace_one(f, r, **self._kwargs("replaceOne", a, names)))

    _DELETE = {"collation": "collation", "hint": "hint", "let": "let", "comment": "comment"}

    def _coll_deleteOne(self, coll, a):
        f = a.pop("filter")
        return _result_doc(coll.delete_one(f, **self._kwargs("deleteOne", a, self._DELETE)))

    def _coll_deleteMany(self, coll, a):
        f = a.pop("filter")
        return _result_doc(coll.delete_many(f, **self._kwargs("deleteMany", a, self._DELETE)))

    def _coll_bulkWrite(self, coll, a):
        requests = [self._write_model(r) for r in a.pop("requests")]
        kw = self._kwargs("bulkWrite", a, {"ordered": "ordered", "comment": "comment", "let": "let",
                                            "bypassDocumentValidation": "bypass_document_validation"})
        return _result_doc(coll.bulk_write(requests, **kw))

    def _write_model(self, req: Mapping, namespaced: bool = False):
        (kind, a), = req.items()
        a = dict(a)
        models = {"insertOne": pymongo.InsertOne, "updateOne": pymongo.UpdateOne,
                  "updateMany": pymongo.UpdateMany, "replaceOne": pymongo.ReplaceOne,
                  "deleteOne": pymongo.DeleteOne, "deleteMany": pymongo.DeleteMany}
        if kind not in models:
            raise Unsupported(f"bulkWrite model {kind}")
        names = {"document": "document", "filter": "filter", "update": "update",
                 "replacement": "replacement", "upsert": "upsert", "collation": "collation",
                 "hint": "hint", "arrayFilters": "array_filters", "sort": "sort"}
        if namespaced:
            names["namespace"] = "namespace"
        return models[kind](**self._kwargs(f"bulkWrite {kind}", a, names))

    _FIND = {"filter": "filter", "sort": "sort", "projection": "projection", "skip": "skip",
             "limit": "limit", "batchSize": "batch_size", "hint": "hint", "collation": "collation",
             "comment": "comment", "let": "let", "allowDiskUse": "allow_disk_use", "max": "max",
             "min": "min", "maxTimeMS": "max_time_ms", "returnKey": "return_key",
             "showRecordId": "show_record_id", "noCursorTimeout": "no_cursor_timeout",
             "allowPartialResults": "allow_partial_results", "cursorType": "cursor_type",
             "maxAwaitTimeMS": "max_await_time_ms"}

    def _coll_find(self, coll, a):
        with coll.find(**self._kwargs("find", a, self._FIND)) as cursor:
            return list(cursor)

    def _coll_findOne(self, coll, a):
        return coll.find_one(**self._kwargs("findOne", a, self._FIND))

    def _coll_createFindCursor(self, coll, a):
        return CursorEntity(coll.find(**self._kwargs("createFindCursor", a, self._FIND)))

    _FAM = {"projection": "projection", "sort": "sort", "hint": "hint", "let": "let",
            "comment": "comment", "collation": "collation", "maxTimeMS": "maxTimeMS",
            "upsert": "upsert", "returnDocument": "return_document",
            "arrayFilters": "array_filters", "bypassDocumentValidation": "bypassDocumentValidation"}

    def _coll_findOneAndDelete(self, coll, a):
        f = a.pop("filter")
        names = {k: v for k, v in self._FAM.items()
                 if k not in ("upsert", "returnDocument", "arrayFilters", "bypassDocumentValidation")}
        return coll.find_one_and_delete(f, **self._kwargs("findOneAndDelete", a, names))

    def _coll_findOneAndUpdate(self, coll, a):
        f, u = a.pop("filter"), a.pop("update")
        return coll.find_one_and_update(f, u, **self._kwargs("findOneAndUpdate", a, self._FAM))

    def _coll_findOneAndReplace(self, coll, a):
        f, r = a.pop("filter"), a.pop("replacement")
        names = {k: v for k, v in self._FAM.items() if k != "arrayFilters"}
        return coll.find_one_and_replace(f, r, **self._kwargs("findOneAndReplace", a, names))

    def _coll_countDocuments(self, coll, a):
        f = a.pop("filter")
        kw = self._kwargs("countDocuments", a, {"skip": "skip", "limit": "limit",
                                                 "collation": "collation", "hint": "hint",
                                                 "maxTimeMS": "maxTimeMS", "comment": "comment"})
        return coll.count_documents(f, **kw)

    def _coll_estimatedDocumentCount(self, coll, a):
        kw = self._kwargs("estimatedDocumentCount", a, {"maxTimeMS": "maxTimeMS",
                                                         "comment": "comment"})
        return coll.estimated_document_count(**kw)

    def _coll_count(self, coll, a):
        # The deprecated count helper (gone from pymongo 4): the count command.
        cmd = {"count": coll.name}
        rename = {"filter": "query", "skip": "skip", "limit": "limit", "collation": "collation",
                  "hint": "hint", "maxTimeMS": "maxTimeMS", "comment": "comment"}
        session = None
        for key, value in a.items():
            if key == "session":
                session = self._entity(value, SessionEntity).session
            elif key == "rawData":
                self._kwargs("count", {key: value}, {})
            elif key in rename:
                cmd[rename[key]] = value
            else:
                raise Unsupported(f"count: argument {key!r}")
        return coll.database.command(cmd, session=session,
                                     read_preference=coll.read_preference)["n"]

    def _coll_distinct(self, coll, a):
        key = a.pop("fieldName")
        kw = self._kwargs("distinct", a, {"filter": "filter", "comment": "comment",
                                           "hint": "hint", "collation": "collation",
                                           "maxTimeMS": "maxTimeMS"})
        return coll.distinct(key, **kw)

    _AGG = {"let": "let", "comment": "comment", "allowDiskUse": "allowDiskUse",
            "batchSize": "batchSize", "bypassDocumentValidation": "bypassDocumentValidation",
            "collation": "collation", "hint": "hint", "maxTimeMS": "maxTimeMS",
            "maxAwaitTimeMS": "maxAwaitTimeMS"}

    def _coll_aggregate(self, coll, a):
        pipeline = a.pop("pipeline")
        with coll.aggregate(pipeline, **self._kwargs("aggregate", a, self._AGG)) as cursor:
            return list(cursor)

    def _coll_createIndex(self, coll, a):
        keys = list(a.pop("keys").items())
        kw = self._kwargs("createIndex", a, {"name": "name", "unique": "unique",
                                              "commitQuorum": "commitQuorum",
                                              "comment": "comment"})
        return coll.create_index(keys, **kw)

    def _coll_dropIndex(self, coll, a):
        name = a.pop("name")
        coll.drop_index(name, **self._kwargs("dropIndex", a, {"comment": "comment"}))

    def _coll_listIndexes(self, coll, a):
        with coll.list_indexes(**self._kwargs("listIndexes", a, {"comment": "comment"})) as c:
            return list(c)

    def _coll_rename(self, coll, a):
        to = a.pop("to")
        coll.rename(to, **self._kwargs("rename", a, {"dropTarget": "dropTarget",
                                                     "comment": "comment"}))

    def _coll_drop(self, coll, a):
        coll.drop(**self._kwargs("drop", a, {"comment": "comment"}))

    # -- database operations --------------------------------------------

    def _db_runCommand(self, db, a):
        command = a.pop("command")
        a.pop("commandName", None)
        if "readPreference" in a:
            a["readPreference"] = _read_preference(a["readPreference"])
        kw = self._kwargs("runCommand", a, {"readPreference": "read_preference"})
        kw.setdefault("read_preference", ReadPreference.PRIMARY)
        return db.command(command, **kw)

    def _db_aggregate(self, db, a):
        pipeline = a.pop("pipeline")
        with db.aggregate(pipeline, **self._kwargs("aggregate", a, self._AGG)) as cursor:
            return list(cursor)

    def _db_createCollection(self, db, a):
        name = a.pop("collection")
        # Every other argument is one of create's own fields, passed through.
        kw = self._kwargs("createCollection", {k: a.pop(k) for k in ("session", "rawData")
                                               if k in a}, {})
        db.create_collection(name, check_exists=False, **kw, **a)

    def _db_dropCollection(self, db, a):
        name = a.pop("collection")
        db.drop_collection(name, **self._kwargs("dropCollection", a, {"comment": "comment"}))

    def _db_listCollections(self, db, a):
        kw = self._kwargs("listCollections", a, {"filter": "filter", "batchSize": "batchSize",
                                                  "nameOnly": "nameOnly", "comment": "comment",
                                                  "authorizedCollections": "authorizedCollections"})
        with db.list_collections(**kw) as cursor:
            return list(cursor)

    def _db_listCollectionNames(self, db, a):
        kw = self._kwargs("listCollectionNames", a, {"filter": "filter", "comment": "comment",
                                                      "batchSize": "batchSize"})
        return db.list_collection_names(**kw)

    def _db_modifyCollection(self, db, a):
        name = a.pop("collection")
        session = a.pop("session", None)
        return db.command({"collMod": name, **a},
                          session=self._entity(session, SessionEntity).session if session else None)

    def _db_runCursorCommand(self, db, a):
        with self._cursor_command(db, a) as cursor:
            return list(cursor)

    def _db_createCommandCursor(self, db, a):
        return CursorEntity(self._cursor_command(db, a))

    def _cursor_command(self, db, a):
        command = a.pop("command")
        a.pop("commandName", None)
        if "readPreference" in a:
            a["readPreference"] = _read_preference(a["readPreference"])
        kw = self._kwargs("runCursorCommand", a, {"readPreference": "read_preference",
                                                   "comment": "comment",
                                                   "maxTimeMS": "max_await_time_ms"})
        return db.cursor_command(command, **kw)

    # -- client, session and cursor operations --------------------------

    def _client_listDatabases(self, ent, a):
        kw = self._kwargs("listDatabases", a, {"filter": "filter", "nameOnly": "nameOnly",
                                                "authorizedDatabases": "authorizedDatabases",
                                                "comment": "comment"})
        with ent.client.list_databases(**kw) as cursor:
            return list(cursor)

    def _client_listDatabaseNames(self, ent, a):
        return ent.client.list_database_names(**self._kwargs("listDatabaseNames", a,
                                                             {"comment": "comment"}))

    def _client_clientBulkWrite(self, ent, a):
        models = [self._write_model(m, namespaced=True) for m in a.pop("models")]
        if "writeConcern" in a:
            a["writeConcern"] = _write_concern(a["writeConcern"])
        kw = self._kwargs("clientBulkWrite", a, {
            "ordered": "ordered", "comment": "comment", "let": "let",
            "verboseResults": "verbose_results", "writeConcern": "write_concern",
            "bypassDocumentValidation": "bypass_document_validation"})
        return _client_bulk_result(ent.client.bulk_write(models, **kw))

    def _session_endSession(self, ent, a):
        ent.session.end_session()

    def _cursor_iterateUntilDocumentOrError(self, cur, a):
        return cur.next()

    def _cursor_iterateOnce(self, cur, a):
        try:
            return cur.next()
        except StopIteration:
            return None

    def _cursor_close(self, cur, a):
        cur.close()

    # -- test runner operations -----------------------------------------

    def _tr_failPoint(self, a):
        client = self._entity(a["client"], ClientEntity).client
        cmd = a["failPoint"]
        try:
            client.admin.command(cmd)
        except OperationFailure as exc:
            if exc.code == 59:
                raise Unsupported("failPoint: the server has no configureFailPoint command") from exc
            raise
        self.fail_points.append((client, cmd["configureFailPoint"]))

    def _tr_createEntities(self, a):
        self.create_entities(a["entities"])

    def _tr_assertCollectionExists(self, a):
        names = self.internal[a["databaseName"]].list_collection_names()
        if a["collectionName"] not in names:
            raise SpecFailure(f"collection {a['databaseName']}.{a['collectionName']} does not exist")

    def _tr_assertCollectionNotExists(self, a):
        names = self.internal[a["databaseName"]].list_collection_names()
        if a["collectionName"] in names:
            raise SpecFailure(f"collection {a['databaseName']}.{a['collectionName']} exists")

    def _index_names(self, a):
        coll = self.internal[a["databaseName"]][a["collectionName"]]
        return [ix["name"] for ix in coll.list_indexes()]

    def _tr_assertIndexExists(self, a):
        if a["indexName"] not in self._index_names(a):
            raise SpecFailure(f"index {a['indexName']} does not exist")

    def _tr_assertIndexNotExists(self, a):
        if a["indexName"] in self._index_names(a):
            raise SpecFailure(f"index {a['indexName']} exists")

    def _last_two_lsids(self, a):
        rec = self._entity(a["client"], ClientEntity).recorder
        started = rec.all_started if rec else []
        if len(started) < 2:
            raise SpecFailure("fewer than two commands were observed")
        lsids = [e.command.get("lsid") for e in started[-2:]]
        if None in lsids:
            raise SpecFailure("one of the last two commands has no lsid")
        return lsids

    def _tr_assertSameLsidOnLastTwoCommands(self, a):
        x, y = self._last_two_lsids(a)
        if not exact_equal(x, y):
            raise SpecFailure(f"the last two commands have different lsids {x} {y}")

    def _tr_assertDifferentLsidOnLastTwoCommands(self, a):
        x, y = self._last_two_lsids(a)
        if exact_equal(x, y):
            raise SpecFailure(f"the last two commands have the same lsid {x}")

    def _tr_wait(self, a):
        time.sleep(a["ms"] / 1000.0)

    # -- after the operations -------------------------------------------

    def stop_observing(self) -> None:
        for ent in self.entities.values():
            if isinstance(ent, ClientEntity) and ent.recorder:
                ent.recorder.enabled = False

    def disable_fail_points(self) -> None:
        points, self.fail_points = self.fail_points, []
        for client, name in points:
            client.admin.command({"configureFailPoint": name, "mode": "off"})

    def check_events(self, blocks) -> None:
        for block in blocks:
            etype = block.get("eventType", "command")
            if etype != "command":
                raise Unsupported(f"expectEvents of type {etype} (only command events)")
            cid = block["client"]
            rec = self._entity(cid, ClientEntity).recorder
            if rec is None:
                raise ValueError(f"client {cid!r} observes no events")
            actual, expected = rec.events, block["events"]
            for i, (exp, (kind, ev)) in enumerate(zip(expected, actual)):
                self._match_event(exp, kind, ev, f"{cid} event #{i}")
            extra_ok = block.get("ignoreExtraEvents", False)
            if len(actual) < len(expected) or (len(actual) > len(expected) and not extra_ok):
                raise SpecFailure(
                    f"{cid}: expected {len(expected)} event(s) "
                    f"{[_event_summary(e) for e in expected]}, observed {len(actual)} "
                    f"{[f'{k}:{ev.command_name}' for k, ev in actual]}")

    def _match_event(self, exp: Mapping, kind: str, ev, where: str) -> None:
        (ekind, spec), = exp.items()
        if ekind != kind:
            raise SpecFailure(f"{where}: expected {ekind} {spec}, observed {kind} of "
                              f"{ev.command_name}")
        for key, want in spec.items():
            if key == "command":
                self._match(want, ev.command, root=True, where=f"{where} ({ev.command_name}) command")
            elif key == "reply":
                self._match(want, ev.reply, root=True, where=f"{where} ({ev.command_name}) reply")
            elif key in ("commandName", "databaseName"):
                got = ev.command_name if key == "commandName" else ev.database_name
                if got != want:
                    raise SpecFailure(f"{where}: {key} {got!r}, expected {want!r}")
            elif key == "hasServiceId":
                if (ev.service_id is not None) != want:
                    raise SpecFailure(f"{where}: hasServiceId is {not want}")
            elif key == "hasServerConnectionId":
                if (ev.server_connection_id is not None) != want:
                    raise SpecFailure(f"{where}: hasServerConnectionId is {not want}")
            else:
                raise Unsupported(f"event assertion {kind}.{key}")

    def check_outcome(self, outcome) -> None:
        for cd in outcome:
            coll = self.internal[cd["databaseName"]].get_collection(
                cd["collectionName"], read_preference=ReadPreference.PRIMARY,
                read_concern=ReadConcern("local"))
            where = f"outcome {cd['databaseName']}.{cd['collectionName']}"
            try:
                actual = list(coll.find({}, sort=[("_id", 1)]))
            except PyMongoError as exc:
                raise SpecFailure(f"{where}: reading the collection raised {_describe(exc)}") from exc
            expected = cd["documents"]
            if len(actual) != len(expected) or not all(
                    exact_equal(e, x) for e, x in zip(expected, actual)):
                raise SpecFailure(f"{where}: expected {expected}, found {actual}")

    def close(self) -> None:
        for ent in self.entities.values():
            try:
                if isinstance(ent, CursorEntity):
                    ent.close()
                elif isinstance(ent, SessionEntity):
                    ent.session.end_session()
            except PyMongoError:
                pass
        try:
            self.disable_fail_points()
        except PyMongoError:
            pass
        for ent in self.entities.values():
            if isinstance(ent, ClientEntity):
                ent.client.close()
        self.entities.clear()
        self.internal.close()


def _event_summary(exp: Mapping) -> str:
    (kind, spec), = exp.items()
    name = spec.get("commandName") or next(iter(spec.get("command") or {}), "?")
    return f"{kind}:{name}"


def _convert(key: str, value: Any) -> Any:
    if key == "returnDocument":
        low = str(value).lower()
        if low not in ("before", "after"):
            raise ValueError(f"returnDocument {value!r} is neither Before nor After")
        return low == "after"
    if key == "cursorType":
        types = {"tailable": CursorType.TAILABLE, "tailableAwait": CursorType.TAILABLE_AWAIT,
                 "nonTailable": CursorType.NON_TAILABLE}
        return types[value]
    return value
