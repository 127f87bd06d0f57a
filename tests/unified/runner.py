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

import gridfs
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
from pymongo.operations import SearchIndexModel
from pymongo.server_api import ServerApi
from pymongo.write_concern import WriteConcern

try:
    from pymongo.client_session_shared import _TxnState
except ImportError:  # pymongo before 4.11
    from pymongo.client_session import _TxnState

from .matcher import MISSING, MatchError, exact_equal, match

__all__ = ["Skipped", "SpecFailure", "UnifiedRunner", "Unsupported", "load_spec",
           "SCHEMA_MAJOR", "SCHEMA_MAX"]

SCHEMA_MAJOR = 1
# The newest schema version whose features this runner has (the format's
# rule: a file declaring a newer minor version is refused, not half-run).
SCHEMA_MAX = (1, 28)
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
    """Raise if the file's schemaVersion is not 1.0 .. SCHEMA_MAX."""
    version = spec.get("schemaVersion")
    parsed = parse_version(version) if version is not None else None
    if parsed is None or parsed[0] != SCHEMA_MAJOR or parsed[:2] > SCHEMA_MAX:
        raise ValueError(f"schemaVersion {version!r} is not supported (this runner reads "
                         f"{SCHEMA_MAJOR}.0 to {SCHEMA_MAX[0]}.{SCHEMA_MAX[1]})")


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


# The connection pool (CMAP) events a client entity may observe: the unified
# format's name -> pymongo's ConnectionPoolListener method.
_CMAP_EVENTS = {
    "poolCreatedEvent": "pool_created", "poolReadyEvent": "pool_ready",
    "poolClearedEvent": "pool_cleared", "poolClosedEvent": "pool_closed",
    "connectionCreatedEvent": "connection_created", "connectionReadyEvent": "connection_ready",
    "connectionClosedEvent": "connection_closed",
    "connectionCheckOutStartedEvent": "connection_check_out_started",
    "connectionCheckOutFailedEvent": "connection_check_out_failed",
    "connectionCheckedOutEvent": "connection_checked_out",
    "connectionCheckedInEvent": "connection_checked_in",
}
_COMMAND_EVENTS = ("commandStartedEvent", "commandSucceededEvent", "commandFailedEvent")


class PoolRecorder(monitoring.ConnectionPoolListener):
    """Collects a client's connection pool events of the observed kinds, and
    counts the connections checked out now (for assertNumberConnectionsCheckedOut,
    so it is attached to every client entity, observing or not)."""

    def __init__(self, observe):
        self.observe = set(observe)
        self.events: list = []
        self.checked_out = 0
        self.enabled = True

    def _add(self, kind: str, event) -> None:
        if self.enabled and kind in self.observe:
            self.events.append((kind, event))


def _pool_method(kind: str):
    def method(self, event) -> None:
        if kind == "connectionCheckedOutEvent":
            self.checked_out += 1
        elif kind == "connectionCheckedInEvent":
            self.checked_out -= 1
        self._add(kind, event)
    method.__name__ = _CMAP_EVENTS[kind]
    return method


for _kind, _name in _CMAP_EVENTS.items():
    setattr(PoolRecorder, _name, _pool_method(_kind))


class ClientEntity:
    def __init__(self, client: pymongo.MongoClient, recorder: Optional[EventRecorder],
                 pool: PoolRecorder):
        self.client = client
        self.recorder = recorder   # command events; None: the client observes none
        self.pool = pool           # connection pool events


class SessionEntity:
    def __init__(self, session, client_id: str):
        self.session = session
        self.client_id = client_id
        self.lsid = session.session_id


class BucketEntity:
    """A GridFS bucket (pymongo's GridFSBucket) over a database entity."""

    def __init__(self, bucket: gridfs.GridFSBucket, db: Database, name: str):
        self.bucket = bucket
        self.db = db
        self.name = name


class CursorEntity:
    """A find or command cursor whose server-side cursor already exists.

    pymongo runs a find lazily: ``prefetch`` fetches its first document at
    creation, handed out by the first iteration.  A command cursor exists
    once the command returned, so it needs none (and a tailable one could
    wait for ever)."""

    def __init__(self, cursor, prefetch: bool = True):
        self.cursor = cursor
        self.buffered: list = []
        if prefetch:
            try:
                self.buffered.append(next(cursor))
            except StopIteration:
                pass

    def next(self):
        """The next document, waiting for one; StopIteration when exhausted."""
        if self.buffered:
            return self.buffered.pop(0)
        return next(self.cursor)

    def next_once(self):
        """The next document, or None after one round trip without one."""
        if self.buffered:
            return self.buffered.pop(0)
        if hasattr(self.cursor, "try_next"):
            return self.cursor.try_next()
        try:
            return next(self.cursor)
        except StopIteration:
            return None

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
            if kind not in _COMMAND_EVENTS and kind not in _CMAP_EVENTS:
                raise Unsupported(f"observing {kind} (command and connection pool events "
                                  f"are observed, not server/topology ones)")
        kw = dict(self.runner.client_kwargs)
        kw.update(spec.get("uriOptions") or {})
        recorder = None
        command_kinds = [k for k in observe if k in _COMMAND_EVENTS]
        if command_kinds or "ignoreCommandMonitoringEvents" in spec:
            recorder = EventRecorder(command_kinds, spec.get("ignoreCommandMonitoringEvents") or [],
                                     bool(spec.get("observeSensitiveCommands")))
        pool = PoolRecorder(k for k in observe if k in _CMAP_EVENTS)
        kw["event_listeners"] = [pool] + ([recorder] if recorder else [])
        if "serverApi" in spec:
            api = spec["serverApi"]
            kw["server_api"] = ServerApi(api["version"], strict=api.get("strict"),
                                         deprecation_errors=api.get("deprecationErrors"))
        return ClientEntity(pymongo.MongoClient(self.runner.uri, **kw), recorder, pool)

    def _make_database(self, spec) -> Database:
        client = self._entity(spec["client"], ClientEntity).client
        return client.get_database(spec["databaseName"],
                                   **_collection_options(spec.get("databaseOptions")))

    def _make_collection(self, spec) -> Collection:
        db = self._entity(spec["database"], Database)
        return db.get_collection(spec["collectionName"],
                                 **_collection_options(spec.get("collectionOptions")))

    def _make_bucket(self, spec) -> BucketEntity:
        db = self._entity(spec["database"], Database)
        opts = dict(spec.get("bucketOptions") or {})
        name = opts.pop("bucketName", "fs")
        kw = {}
        if "chunkSizeBytes" in opts:
            kw["chunk_size_bytes"] = opts.pop("chunkSizeBytes")
        # The concerns and read preference apply to the bucket's two
        # collections: set them on the database the bucket is made from.
        db_kw = _collection_options({k: opts.pop(k) for k in
                                     ("readConcern", "writeConcern", "readPreference")
                                     if k in opts})
        opts.pop("disableMD5", None)  # pymongo 4 never computes an MD5
        if opts:
            raise Unsupported(f"bucket option(s) {sorted(opts)}")
        if db_kw:
            db = db.with_options(**db_kw)
        return BucketEntity(gridfs.GridFSBucket(db, bucket_name=name, **kw), db, name)

    def _make_session(self, spec) -> SessionEntity:
        client = self._entity(spec["client"], ClientEntity).client
        opts = dict(spec.get("sessionOptions") or {})
        kw = {}
        if "causalConsistency" in opts:
            kw["causal_consistency"] = opts.pop("causalConsistency")
        if "snapshot" in opts:
            kw["snapshot"] = opts.pop("snapshot")
        if "defaultTransactionOptions" in opts:
            from pymongo.client_session import TransactionOptions
            kw["default_transaction_options"] = TransactionOptions(
                **self._transaction_options(dict(opts.pop("defaultTransactionOptions"))))
        # snapshotTime: the cluster time a snapshot session reads at (a
        # newer option than pymongo 4.20 has): set where pymongo keeps the
        # time it takes from its first read, which its later reads send
        # as atClusterTime
        snapshot_time = opts.pop("snapshotTime", None)
        if opts:
            raise Unsupported(f"session option(s) {sorted(opts)}")
        session = client.start_session(**kw)
        if snapshot_time is not None:
            if not hasattr(session, "_snapshot_time"):
                raise Unsupported("session option snapshotTime: this pymongo keeps no snapshot time")
            session._snapshot_time = self._entity(snapshot_time)
        return SessionEntity(session, spec["client"])

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
                SessionEntity: "session", CursorEntity: "cursor",
                BucketEntity: "bucket"}.get(type(target))
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

    def _coll_dropIndexes(self, coll, a):
        coll.drop_indexes(**self._kwargs("dropIndexes", a, {"comment": "comment"}))

    def _coll_listIndexes(self, coll, a):
        with coll.list_indexes(**self._kwargs("listIndexes", a, {"comment": "comment"})) as c:
            return list(c)

    def _coll_rename(self, coll, a):
        to = a.pop("to")
        coll.rename(to, **self._kwargs("rename", a, {"dropTarget": "dropTarget",
                                                     "comment": "comment"}))

    def _coll_drop(self, coll, a):
        coll.drop(**self._kwargs("drop", a, {"comment": "comment"}))

    _MAP_REDUCE = ("map", "reduce", "out", "query", "sort", "limit", "finalize", "scope",
                   "jsMode", "verbose", "bypassDocumentValidation", "collation", "comment")

    def _coll_mapReduce(self, coll, a):
        # pymongo 4 has no map_reduce helper: the command, as drivers send it.
        cmd = {"mapReduce": coll.name}
        for key in self._MAP_REDUCE:
            if key in a:
                cmd[key] = a.pop(key)
        kw = self._kwargs("mapReduce", a, {})
        reply = coll.database.command(cmd, read_preference=ReadPreference.PRIMARY,
                                      codec_options=coll.codec_options, **kw)
        return reply["results"] if "results" in reply else reply

    @staticmethod
    def _search_model(model: Mapping) -> SearchIndexModel:
        unknown = set(model) - {"definition", "name", "type"}
        if unknown:
            raise Unsupported(f"search index model field(s) {sorted(unknown)}")
        return SearchIndexModel(model["definition"], name=model.get("name"),
                                type=model.get("type"))

    def _coll_createSearchIndex(self, coll, a):
        model = self._search_model(a.pop("model"))
        return coll.create_search_index(model, **self._kwargs("createSearchIndex", a, {}))

    def _coll_createSearchIndexes(self, coll, a):
        models = [self._search_model(m) for m in a.pop("models")]
        return coll.create_search_indexes(models, **self._kwargs("createSearchIndexes", a, {}))

    def _coll_dropSearchIndex(self, coll, a):
        name = a.pop("name")
        coll.drop_search_index(name, **self._kwargs("dropSearchIndex", a, {}))

    def _coll_updateSearchIndex(self, coll, a):
        name, definition = a.pop("name"), a.pop("definition")
        coll.update_search_index(name, definition, **self._kwargs("updateSearchIndex", a, {}))

    def _coll_listSearchIndexes(self, coll, a):
        name = a.pop("name", None)
        kw = dict(a.pop("aggregationOptions", None) or {})
        kw.update(self._kwargs("listSearchIndexes", a, {}))
        with coll.list_search_indexes(name, **kw) as cursor:
            return list(cursor)

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
        return db.create_collection(name, check_exists=False, **kw, **a)

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
        return CursorEntity(self._cursor_command(db, a), prefetch=False)

    def _cursor_command(self, db, a):
        command = a.pop("command")
        a.pop("commandName", None)
        # The server makes the cursor tailable from the command itself;
        # getMore's batchSize is the cursor's.
        a.pop("cursorType", None)
        batch_size = a.pop("batchSize", None)
        if "readPreference" in a:
            a["readPreference"] = _read_preference(a["readPreference"])
        kw = self._kwargs("runCursorCommand", a, {"readPreference": "read_preference",
                                                   "comment": "comment",
                                                   "maxTimeMS": "max_await_time_ms"})
        cursor = db.cursor_command(command, **kw)
        if batch_size is not None:
            cursor.batch_size(batch_size)
        return cursor

    # -- client, session and cursor operations --------------------------

    def _client_listDatabases(self, ent, a):
        kw = self._kwargs("listDatabases", a, {"filter": "filter", "nameOnly": "nameOnly",
                                                "authorizedDatabases": "authorizedDatabases",
                                                "comment": "comment"})
        with ent.client.list_databases(**kw) as cursor:
            return list(cursor)

    def _client_dropDatabase(self, ent, a):
        name = a.pop("database")
        ent.client.drop_database(name, **self._kwargs("dropDatabase", a, {"comment": "comment"}))

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

    def _transaction_options(self, a) -> dict:
        kw = {}
        if "readConcern" in a:
            kw["read_concern"] = _read_concern(a.pop("readConcern"))
        if "writeConcern" in a:
            kw["write_concern"] = _write_concern(a.pop("writeConcern"))
        if "readPreference" in a:
            kw["read_preference"] = _read_preference(a.pop("readPreference"))
        if "maxCommitTimeMS" in a:
            kw["max_commit_time_ms"] = a.pop("maxCommitTimeMS")
        if a:
            raise Unsupported(f"transaction option(s) {sorted(a)}")
        return kw

    def _session_startTransaction(self, ent, a):
        ent.session.start_transaction(**self._transaction_options(a))

    def _session_commitTransaction(self, ent, a):
        ent.session.commit_transaction()

    def _session_abortTransaction(self, ent, a):
        ent.session.abort_transaction()

    def _session_withTransaction(self, ent, a):
        ops = a.pop("callback")

        def callback(_session):
            for i, op in enumerate(ops):
                self.operation(i, op)

        ent.session.with_transaction(callback, **self._transaction_options(a))

    def _session_getSnapshotTime(self, ent, a):
        return ent.session._snapshot_time

    # -- GridFS bucket operations -----------------------------------------

    @staticmethod
    def _hex_bytes(value) -> bytes:
        if not (isinstance(value, Mapping) and set(value) == {"$$hexBytes"}):
            raise ValueError(f"an upload source must be {{$$hexBytes: ...}}, not {value!r}")
        return bytes.fromhex(value["$$hexBytes"])

    def _upload_kwargs(self, a) -> dict:
        a.pop("disableMD5", None)  # pymongo 4 never computes an MD5
        for key in ("contentType", "aliases"):
            if key in a:
                raise Unsupported(f"upload: {key} (deprecated; pymongo's GridFSBucket "
                                  f"has no such option)")
        return self._kwargs("upload", a, {"chunkSizeBytes": "chunk_size_bytes",
                                           "metadata": "metadata"})

    def _bucket_upload(self, b, a):
        filename, source = a.pop("filename"), self._hex_bytes(a.pop("source"))
        return b.bucket.upload_from_stream(filename, source, **self._upload_kwargs(a))

    def _bucket_uploadWithId(self, b, a):
        file_id, filename = a.pop("id"), a.pop("filename")
        source = self._hex_bytes(a.pop("source"))
        b.bucket.upload_from_stream_with_id(file_id, filename, source, **self._upload_kwargs(a))

    def _bucket_download(self, b, a):
        file_id = a.pop("id")
        with b.bucket.open_download_stream(file_id, **self._kwargs("download", a, {})) as out:
            return out.read()

    def _bucket_downloadByName(self, b, a):
        filename = a.pop("filename")
        kw = self._kwargs("downloadByName", a, {"revision": "revision"})
        with b.bucket.open_download_stream_by_name(filename, **kw) as out:
            return out.read()

    def _bucket_delete(self, b, a):
        file_id = a.pop("id")
        b.bucket.delete(file_id, **self._kwargs("delete", a, {}))

    def _bucket_deleteByName(self, b, a):
        filename = a.pop("filename")
        b.bucket.delete_by_name(filename, **self._kwargs("deleteByName", a, {}))

    def _bucket_rename(self, b, a):
        file_id, new = a.pop("id"), a.pop("newFilename")
        b.bucket.rename(file_id, new, **self._kwargs("rename", a, {}))

    def _bucket_renameByName(self, b, a):
        filename, new = a.pop("filename"), a.pop("newFilename")
        b.bucket.rename_by_name(filename, new, **self._kwargs("renameByName", a, {}))

    def _bucket_find(self, b, a):
        f = a.pop("filter")
        kw = self._kwargs("find", a, {"batchSize": "batch_size", "limit": "limit",
                                       "maxTimeMS": "max_time_ms", "skip": "skip",
                                       "sort": "sort", "noCursorTimeout": "no_cursor_timeout"})
        # The files collection's documents, as the GridFS spec's find returns.
        return [grid_out._file for grid_out in b.bucket.find(f, **kw)]

    def _bucket_drop(self, b, a):
        kw = self._kwargs("drop", a, {})
        for suffix in ("files", "chunks"):
            b.db.drop_collection(f"{b.name}.{suffix}", **kw)

    # -- change streams -------------------------------------------------

    _WATCH = {"pipeline": "pipeline", "fullDocument": "full_document",
              "fullDocumentBeforeChange": "full_document_before_change",
              "resumeAfter": "resume_after", "startAfter": "start_after",
              "startAtOperationTime": "start_at_operation_time", "batchSize": "batch_size",
              "maxAwaitTimeMS": "max_await_time_ms", "collation": "collation",
              "comment": "comment", "showExpandedEvents": "show_expanded_events"}

    def _watch(self, target, a):
        """A change stream entity: its aggregate is sent now, its events
        come from iterateUntilDocumentOrError / iterateOnce."""
        return CursorEntity(target.watch(**self._kwargs("createChangeStream", a, self._WATCH)),
                            prefetch=False)

    def _client_createChangeStream(self, ent, a):
        return self._watch(ent.client, a)

    def _db_createChangeStream(self, db, a):
        return self._watch(db, a)

    def _coll_createChangeStream(self, coll, a):
        return self._watch(coll, a)

    def _cursor_iterateUntilDocumentOrError(self, cur, a):
        return cur.next()

    def _cursor_iterateOnce(self, cur, a):
        return cur.next_once()

    def _cursor_close(self, cur, a):
        cur.close()

    # -- test runner operations -----------------------------------------

    def _tr_failPoint(self, a):
        client = self._entity(a["client"], ClientEntity).client
        cmd = a["failPoint"]
        try:
            client.admin.command(cmd)
        except OperationFailure as exc:
            # The runner starts the server with test commands enabled, so a
            # refusal is the server's: a failure, not something unsupported.
            raise SpecFailure(f"failPoint {cmd.get('configureFailPoint')!r}: the server "
                              f"refused configureFailPoint: {_describe(exc)}") from None
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

    def _tr_assertNumberConnectionsCheckedOut(self, a):
        got = self._entity(a["client"], ClientEntity).pool.checked_out
        if got != a["connections"]:
            raise SpecFailure(f"{got} connection(s) checked out, expected {a['connections']}")

    def _count_events(self, a) -> int:
        (kind, spec), = a["event"].items()
        if kind in _COMMAND_EVENTS:
            events = self._observed(a["client"], "command")
        elif kind in _CMAP_EVENTS:
            events = self._observed(a["client"], "cmap")
        else:
            raise Unsupported(f"counting {kind} events (command and cmap events only)")
        return sum(1 for k, ev in events if self._event_matches(a["event"], k, ev))

    def _tr_assertEventCount(self, a):
        got = self._count_events(a)
        if got != a["count"]:
            raise SpecFailure(f"{got} event(s) {a['event']}, expected {a['count']}")

    def _tr_waitForEvent(self, a):
        deadline = time.monotonic() + 10.0
        while self._count_events(a) < a["count"]:
            if time.monotonic() > deadline:
                raise SpecFailure(f"waited 10 s for {a['count']} event(s) {a['event']}, "
                                  f"saw {self._count_events(a)}")
            time.sleep(0.01)

    def _session_arg(self, a):
        return self._entity(a["session"], SessionEntity).session

    def _dirty(self, a) -> bool:
        server_session = self._session_arg(a)._server_session
        if server_session is None:
            raise SpecFailure(f"session {a['session']} has ended: no server session to inspect")
        return server_session.dirty

    def _tr_assertSessionDirty(self, a):
        if not self._dirty(a):
            raise SpecFailure(f"session {a['session']} is not dirty, expected dirty")

    def _tr_assertSessionNotDirty(self, a):
        if self._dirty(a):
            raise SpecFailure(f"session {a['session']} is dirty, expected not dirty")

    def _tr_assertSessionPinned(self, a):
        if self._session_arg(a)._pinned_address is None:
            raise SpecFailure(f"session {a['session']} is not pinned to a mongos")

    def _tr_assertSessionUnpinned(self, a):
        if self._session_arg(a)._pinned_address is not None:
            raise SpecFailure(f"session {a['session']} is pinned to a mongos")

    def _tr_assertSessionTransactionState(self, a):
        state = self._session_arg(a)._transaction.state
        names = {_TxnState.NONE: "none", _TxnState.STARTING: "starting",
                 _TxnState.IN_PROGRESS: "in_progress", _TxnState.COMMITTED: "committed",
                 _TxnState.COMMITTED_EMPTY: "committed", _TxnState.ABORTED: "aborted"}
        if names.get(state) != a["state"]:
            raise SpecFailure(f"session {a['session']}'s transaction is {names.get(state)!r}, "
                              f"expected {a['state']!r}")

    # -- after the operations -------------------------------------------

    def stop_observing(self) -> None:
        for ent in self.entities.values():
            if isinstance(ent, ClientEntity):
                ent.pool.enabled = False
                if ent.recorder:
                    ent.recorder.enabled = False

    def disable_fail_points(self) -> None:
        points, self.fail_points = self.fail_points, []
        for client, name in points:
            client.admin.command({"configureFailPoint": name, "mode": "off"})

    def _observed(self, cid: str, etype: str) -> list:
        """The (kind, event) pairs client ``cid`` recorded of ``etype``."""
        ent = self._entity(cid, ClientEntity)
        if etype == "command":
            if ent.recorder is None:
                raise ValueError(f"client {cid!r} observes no command events")
            return ent.recorder.events
        if etype == "cmap":
            return ent.pool.events
        raise Unsupported(f"expectEvents of type {etype} (command and cmap events only)")

    def check_events(self, blocks) -> None:
        for block in blocks:
            etype = block.get("eventType", "command")
            cid = block["client"]
            actual, expected = self._observed(cid, etype), block["events"]
            for i, (exp, (kind, ev)) in enumerate(zip(expected, actual)):
                self._match_event(exp, kind, ev, f"{cid} {etype} event #{i}")
            extra_ok = block.get("ignoreExtraEvents", False)
            if len(actual) < len(expected) or (len(actual) > len(expected) and not extra_ok):
                raise SpecFailure(
                    f"{cid}: expected {len(expected)} {etype} event(s) "
                    f"{[_event_summary(e) for e in expected]}, observed {len(actual)} "
                    f"{[_observed_summary(k, ev) for k, ev in actual]}")

    def _event_matches(self, exp: Mapping, kind: str, ev) -> bool:
        try:
            self._match_event(exp, kind, ev, "")
            return True
        except SpecFailure:
            return False

    def _match_event(self, exp: Mapping, kind: str, ev, where: str) -> None:
        (ekind, spec), = exp.items()
        if ekind != kind:
            raise SpecFailure(f"{where}: expected {ekind} {spec}, observed "
                              f"{_observed_summary(kind, ev)}")
        if kind in _CMAP_EVENTS:
            self._match_pool_event(spec, kind, ev, where)
            return
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

    # The fields a connection pool event's expectation may name, and how
    # pymongo's event carries them.
    _POOL_FIELDS = {
        ("poolClearedEvent", "hasServiceId"): lambda ev: ev.service_id is not None,
        ("poolClearedEvent", "interruptInUseConnections"): lambda ev: ev.interrupt_connections,
        ("connectionClosedEvent", "reason"): lambda ev: ev.reason,
        ("connectionCheckOutFailedEvent", "reason"): lambda ev: ev.reason,
    }

    def _match_pool_event(self, spec: Mapping, kind: str, ev, where: str) -> None:
        for key, want in spec.items():
            get = self._POOL_FIELDS.get((kind, key))
            if get is None:
                raise Unsupported(f"event assertion {kind}.{key}")
            got = get(ev)
            if got != want:
                raise SpecFailure(f"{where}: {kind}.{key} is {got!r}, expected {want!r}")

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
    if kind in _CMAP_EVENTS:
        return kind
    name = spec.get("commandName") or next(iter(spec.get("command") or {}), "?")
    return f"{kind}:{name}"


def _observed_summary(kind: str, ev) -> str:
    return kind if kind in _CMAP_EVENTS else f"{kind}:{ev.command_name}"


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
