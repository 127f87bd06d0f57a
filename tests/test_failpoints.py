"""configureFailPoint "failCommand": mongod 7.0's fail point for drivers'
tests (csrc/command/failpoint.c), over pymongo and the raw wire.

Every mode (alwaysOn, off, {times}, {skip}, {activationProbability}) and
data field (failCommands, errorCode, closeConnection, blockConnection +
blockTimeMS, appName, errorLabels, writeConcernError, failInternalCommands,
failLocalClients, failAllCommands, threadName, namespace), the reply shapes
with their BSON types and field order, and the counting across threads.
"""
from __future__ import annotations

import threading
import time

import bson
import pymongo
import pytest
from bson.int64 import Int64
from pymongo.errors import AutoReconnect, OperationFailure

import multifora
import wirelib

FAIL_MSG = "Failing command via 'failCommand' failpoint"


def fail_point(client, mode, data=None):
    cmd = {"configureFailPoint": "failCommand", "mode": mode}
    if data is not None:
        cmd["data"] = data
    return client.admin.command(cmd)


def fail_point_error(client, cmd) -> OperationFailure:
    with pytest.raises(OperationFailure) as info:
        client.admin.command(cmd)
    return info.value


def ping(client):
    return client.admin.command("ping")


def code_of(fn):
    """The error code `fn()` fails with, or None when it succeeds."""
    try:
        fn()
    except OperationFailure as exc:
        return exc.code
    return None


@pytest.fixture
def raw(server):
    """A raw wire connection to the server (no handshake sent)."""
    with wirelib.Conn(server.port) as conn:
        yield conn


def raw_doc(conn, doc, request_id=1):
    """The reply's body, in field order, with the BSON number types kept."""
    reply = conn.roundtrip(wirelib.op_msg(wirelib.body_section(doc), request_id=request_id))
    body = reply.raw[21:]
    return bson.decode(body[:int.from_bytes(body[:4], "little")],
                       codec_options=bson.CodecOptions(document_class=dict))


# ------------------------------------------------------------- availability

def test_configure_fail_point_needs_test_commands(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    try:
        with pymongo.MongoClient(srv.uri) as c:
            exc = fail_point_error(c, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                                       "data": {"failCommands": ["ping"], "errorCode": 2}})
            assert exc.code == 59
            assert exc.details["errmsg"] == "no such command: 'configureFailPoint'"
            assert ping(c) == {"ok": 1.0}
    finally:
        srv.stop()


def test_unknown_fail_point_is_fail_point_set_failed(client):
    exc = fail_point_error(client, {"configureFailPoint": "noSuchPoint", "mode": "off"})
    assert (exc.code, exc.details["codeName"]) == (266, "FailPointSetFailed")
    assert exc.details["errmsg"] == "noSuchPoint not found"


def test_configure_fail_point_is_admin_only(client):
    with pytest.raises(OperationFailure) as info:
        client.db.command({"configureFailPoint": "failCommand", "mode": "off"})
    assert info.value.code == 13
    assert info.value.details["errmsg"] == \
        "configureFailPoint may only be run against the admin database."


# --------------------------------------------------------------- the modes

def test_always_on_error_reply_shape_on_the_wire(raw):
    assert raw_doc(raw, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                         "data": {"failCommands": ["find"], "errorCode": 2},
                         "$db": "admin"}) == {"count": 0, "ok": 1.0}
    for i in range(3):
        doc = raw_doc(raw, {"find": "c", "$db": "db"}, request_id=10 + i)
        assert list(doc.items()) == [("ok", 0.0), ("errmsg", FAIL_MSG), ("code", 2),
                                     ("codeName", "BadValue")]
        assert type(doc["code"]) is int and type(doc["ok"]) is float
    # Other commands are untouched.
    assert raw_doc(raw, {"count": "c", "$db": "db"})["ok"] == 1.0
    reply = raw_doc(raw, {"configureFailPoint": "failCommand", "mode": "off", "$db": "admin"})
    assert reply == {"count": 3, "ok": 1.0}
    assert type(reply["count"]) is int  # an Int32, as mongod's appendNumber
    assert raw_doc(raw, {"find": "c", "$db": "db"})["ok"] == 1.0


def test_times_counts_down_then_turns_off(client):
    assert fail_point(client, {"times": 2}, {"failCommands": ["insert"], "errorCode": 8}) == \
        {"count": 0, "ok": 1.0}
    for _ in range(2):
        with pytest.raises(OperationFailure) as info:
            client.db.c.insert_one({})
        assert (info.value.code, info.value.details["codeName"]) == (8, "UnknownError")
        assert info.value.details["errmsg"] == FAIL_MSG
    client.db.c.insert_one({"_id": 1})
    client.db.c.insert_one({"_id": 2})
    assert client.db.c.count_documents({}) == 2
    # count is the times entered since the server started, across settings.
    assert fail_point(client, {"times": 1}, {"failCommands": ["insert"], "errorCode": 8}) == \
        {"count": 2, "ok": 1.0}
    assert code_of(lambda: client.db.c.insert_one({})) == 8
    assert fail_point(client, "off") == {"count": 3, "ok": 1.0}


def test_times_zero_still_fires_once_as_in_mongod(client):
    # FailPoint::_slowShouldFailOpenBlock decrements before it turns off.
    fail_point(client, {"times": 0}, {"failCommands": ["ping"], "errorCode": 2})
    assert code_of(lambda: ping(client)) == 2
    assert code_of(lambda: ping(client)) is None


def test_times_counts_only_commands_that_match(client):
    fail_point(client, {"times": 1}, {"failCommands": ["insert"], "errorCode": 8})
    for _ in range(3):
        client.db.c.find_one()
        ping(client)
    assert code_of(lambda: client.db.c.insert_one({})) == 8
    assert code_of(lambda: client.db.c.insert_one({})) is None


def test_skip_lets_n_through_then_fails_for_good(client):
    fail_point(client, {"skip": 2}, {"failCommands": ["ping"], "errorCode": 2})
    assert [code_of(lambda: ping(client)) for _ in range(5)] == [None, None, 2, 2, 2]
    assert fail_point(client, "off")["count"] == 3
    assert code_of(lambda: ping(client)) is None


def test_times_wins_over_skip_in_one_mode_document(client):
    fail_point(client, {"skip": 5, "times": 1}, {"failCommands": ["ping"], "errorCode": 2})
    assert [code_of(lambda: ping(client)) for _ in range(3)] == [2, None, None]


def test_activation_probability_zero_and_one(client):
    fail_point(client, {"activationProbability": 0}, {"failCommands": ["ping"], "errorCode": 2})
    assert all(code_of(lambda: ping(client)) is None for _ in range(20))
    fail_point(client, {"activationProbability": 1.0}, {"failCommands": ["ping"], "errorCode": 2})
    assert all(code_of(lambda: ping(client)) == 2 for _ in range(20))


def test_activation_probability_half_fires_some_of_the_time(client):
    fail_point(client, {"activationProbability": 0.5}, {"failCommands": ["ping"], "errorCode": 2})
    codes = [code_of(lambda: ping(client)) for _ in range(200)]
    failed = codes.count(2)
    assert 40 < failed < 160, failed  # binomial(200, .5): 5+ sigma either side
    assert fail_point(client, "off")["count"] == failed


def test_off_disables_and_keeps_the_count(client):
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": 2})
    assert code_of(lambda: ping(client)) == 2
    assert fail_point(client, "off") == {"count": 1, "ok": 1.0}
    assert ping(client) == {"ok": 1.0}
    # Setting off again reports the same count; off ignores its data.
    assert fail_point(client, "off", {"failCommands": ["ping"], "errorCode": 2}) == \
        {"count": 1, "ok": 1.0}
    assert ping(client) == {"ok": 1.0}


MODE_ERRORS = [
    ({}, 20, "When setting a failpoint, you must supply a 'mode'"),
    ({"mode": "sometimes"}, 2, "unknown mode: sometimes"),
    ({"mode": 1}, 14, "'mode' must be a string or JSON object"),
    ({"mode": {"often": 1}}, 2,
     "'mode' must be one of 'off', 'alwaysOn', '{times:n}', '{skip:n}' or "
     "'{activationProbability:p}'"),
    ({"mode": {"times": -1}}, 2, "'times' option to 'mode' must be positive"),
    ({"mode": {"skip": -3}}, 2, "'skip' option to 'mode' must be positive"),
    ({"mode": {"times": 2**31}}, 2, "'times' option to 'mode' is too large"),
    ({"mode": {"times": "2"}}, 14,
     'Expected field "times" to have numeric type, but found string'),
    ({"mode": {"times": 1.5}}, 2,
     'Expected field "times" to have a value exactly representable as a 64-bit integer, '
     'but found times: 1.5'),
    ({"mode": {"activationProbability": "x"}}, 14,
     "the 'activationProbability' option to 'mode' must be a double between 0 and 1"),
    ({"mode": {"activationProbability": 1.5}}, 2,
     "activationProbability must be between 0.0 and 1.0; found 1.5"),
    ({"mode": "alwaysOn", "data": 5}, 14, "the 'data' option must be a JSON object"),
]


@pytest.mark.parametrize("cmd,code,errmsg", MODE_ERRORS)
def test_mode_and_data_errors(client, cmd, code, errmsg):
    exc = fail_point_error(client, {"configureFailPoint": "failCommand", **cmd})
    assert (exc.code, exc.details["errmsg"]) == (code, errmsg)
    # A refused setting leaves the fail point as it was (off).
    assert ping(client) == {"ok": 1.0}


def test_whole_times_given_as_double_is_accepted(client):
    assert fail_point(client, {"times": 1.0}, {"failCommands": ["ping"], "errorCode": 2}) == \
        {"count": 0, "ok": 1.0}
    assert code_of(lambda: ping(client)) == 2
    assert code_of(lambda: ping(client)) is None


# ------------------------------------------------------- which commands fail

def test_only_named_commands_fail_and_aliases_count(client):
    fail_point(client, "alwaysOn",
               {"failCommands": ["isMaster", "findAndModify", "nosuchcommand"], "errorCode": 2})
    assert code_of(lambda: client.admin.command("isMaster")) == 2
    assert code_of(lambda: client.admin.command("ismaster")) == 2     # alias of isMaster
    assert code_of(lambda: client.admin.command("hello")) is None     # a command of its own
    assert code_of(lambda: client.db.command(
        {"findandmodify": "c", "query": {}, "remove": True})) == 2
    assert code_of(lambda: client.db.command({"find": "c"})) is None


def test_an_alias_in_fail_commands_names_the_command(client):
    fail_point(client, "alwaysOn", {"failCommands": ["ismaster"], "errorCode": 2})
    assert code_of(lambda: client.admin.command("isMaster")) == 2


def test_configure_fail_point_itself_is_never_failed(client):
    fail_point(client, "alwaysOn", {"failCommands": ["configureFailPoint"], "errorCode": 2})
    assert fail_point(client, "off") == {"count": 0, "ok": 1.0}


def test_fail_all_commands(raw):
    """Any command fails, `times` of them.  On a raw connection: a driver's
    monitor sends hellos of its own, which would use up some of the three
    (it did, once, on a loaded machine)."""
    assert raw_doc(raw, {"configureFailPoint": "failCommand", "mode": {"times": 3},
                         "data": {"failAllCommands": True, "errorCode": 2},
                         "$db": "admin"})["ok"] == 1.0
    for cmd in ({"ping": 1, "$db": "admin"}, {"find": "c", "$db": "db"},
                {"count": "c", "$db": "db"}):
        r = raw_doc(raw, cmd)
        assert (r["ok"], r["code"], r["errmsg"]) == (0.0, 2, FAIL_MSG), cmd
    assert raw_doc(raw, {"ping": 1, "$db": "admin"}) == {"ok": 1.0}


def test_without_code_close_or_block_nothing_happens(client):
    fail_point(client, "alwaysOn", {"failCommands": ["ping"]})
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": "2"})  # not a number
    assert ping(client) == {"ok": 1.0}
    assert fail_point(client, "off")["count"] == 0


def test_error_code_zero_fails_nothing(client):
    fail_point(client, {"times": 1}, {"failCommands": ["ping"], "errorCode": 0})
    assert ping(client) == {"ok": 1.0}
    # It still entered the fail point (and used up its one time).
    assert fail_point(client, "off")["count"] == 1


def test_unnamed_error_code_is_location(client):
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": 424242})
    exc = fail_point_error(client, {"ping": 1})
    assert (exc.code, exc.details["codeName"]) == (424242, "Location424242")


def test_error_code_of_a_double_is_its_integer(client):
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": 26.0})
    exc = fail_point_error(client, {"ping": 1})
    assert (exc.code, exc.details["codeName"]) == (26, "NamespaceNotFound")


def test_command_errors_before_the_fail_point_win(client):
    # Unknown commands and admin-only checks come first, as in mongod.
    fail_point(client, "alwaysOn", {"failCommands": ["listDatabases"], "errorCode": 2})
    with pytest.raises(OperationFailure) as info:
        client.db.command("listDatabases")
    assert info.value.code == 13
    assert fail_point(client, "off")["count"] == 0


# ------------------------------------------------------------------- labels

def test_error_labels_come_first_in_the_error_reply(raw):
    raw_doc(raw, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                  "data": {"failCommands": ["insert"], "errorCode": 11600,
                           "errorLabels": ["RetryableWriteError", "Other"]},
                  "$db": "admin"})
    doc = raw_doc(raw, {"insert": "c", "documents": [{"_id": 1}], "$db": "db"})
    assert list(doc.items()) == [
        ("errorLabels", ["RetryableWriteError", "Other"]), ("ok", 0.0), ("errmsg", FAIL_MSG),
        ("code", 11600), ("codeName", "InterruptedAtShutdown")]


def test_empty_error_labels_give_no_field(client):
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": 2, "errorLabels": []})
    exc = fail_point_error(client, {"ping": 1})
    assert "errorLabels" not in exc.details
    assert exc.details == {"ok": 0.0, "errmsg": FAIL_MSG, "code": 2, "codeName": "BadValue"}


def test_pymongo_sees_the_labels(client):
    fail_point(client, {"times": 1},
               {"failCommands": ["find"], "errorCode": 2, "errorLabels": ["MyLabel"]})
    with pytest.raises(OperationFailure) as info:
        client.db.c.find_one()
    assert info.value.has_error_label("MyLabel")


# ----------------------------------------------------------- closeConnection

def test_close_connection_pymongo_reconnects(client):
    client.db.c.insert_one({"_id": 1})
    fail_point(client, {"times": 1}, {"failCommands": ["find"], "closeConnection": True})
    with pytest.raises(AutoReconnect):
        client.db.command({"find": "c"})  # runCommand is never retried
    assert client.db.c.find_one() == {"_id": 1}
    assert fail_point(client, "off")["count"] == 1


def test_close_connection_a_retryable_read_retries(client):
    client.db.c.insert_one({"_id": 1})
    fail_point(client, {"times": 1}, {"failCommands": ["find"], "closeConnection": True})
    # pymongo retries the read once on a new connection, which succeeds.
    assert client.db.c.find_one() == {"_id": 1}
    assert fail_point(client, "off")["count"] == 1


def test_close_connection_closes_only_that_connection(server, raw):
    with wirelib.Conn(server.port) as other:
        raw_doc(raw, {"configureFailPoint": "failCommand", "mode": {"times": 1},
                      "data": {"failCommands": ["ping"], "closeConnection": True},
                      "$db": "admin"})
        raw.send(wirelib.op_msg(wirelib.body_section({"ping": 1, "$db": "admin"})))
        assert raw.is_closed()   # no reply, EOF
        assert raw_doc(other, {"ping": 1, "$db": "admin"}) == {"ok": 1.0}


def test_close_connection_wins_over_error_code(raw):
    raw_doc(raw, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                  "data": {"failCommands": ["ping"], "closeConnection": True, "errorCode": 2},
                  "$db": "admin"})
    raw.send(wirelib.op_msg(wirelib.body_section({"ping": 1, "$db": "admin"})))
    assert raw.is_closed()


def test_close_connection_on_op_query_hello(server):
    with wirelib.Conn(server.port) as setter, wirelib.Conn(server.port) as victim:
        raw_doc(setter, {"configureFailPoint": "failCommand", "mode": {"times": 1},
                         "data": {"failCommands": ["isMaster"], "closeConnection": True},
                         "$db": "admin"})
        victim.send(wirelib.op_query("admin.$cmd", {"isMaster": 1}))
        assert victim.is_closed()


# ----------------------------------------------------------- blockConnection

def test_block_connection_delays_then_runs(client):
    fail_point(client, {"times": 1},
               {"failCommands": ["ping"], "blockConnection": True, "blockTimeMS": 400})
    t0 = time.monotonic()
    assert ping(client) == {"ok": 1.0}
    took = time.monotonic() - t0
    assert 0.38 <= took < 3.0, took
    t0 = time.monotonic()
    ping(client)
    assert time.monotonic() - t0 < 0.3


def test_block_connection_then_error(client):
    fail_point(client, {"times": 1}, {"failCommands": ["ping"], "blockConnection": True,
                                      "blockTimeMS": 250, "errorCode": 2})
    t0 = time.monotonic()
    assert code_of(lambda: ping(client)) == 2
    assert time.monotonic() - t0 >= 0.24


def test_block_connection_blocks_only_that_connection(server):
    slow = pymongo.MongoClient(server.uri, appname="slow")
    fast = pymongo.MongoClient(server.uri, appname="fast")
    try:
        ping(slow), ping(fast)
        fail_point(fast, "alwaysOn", {"failCommands": ["ping"], "appName": "slow",
                                      "blockConnection": True, "blockTimeMS": 1500})
        done = {}

        def run():
            t0 = time.monotonic()
            ping(slow)
            done["slow"] = time.monotonic() - t0

        th = threading.Thread(target=run)
        th.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        assert ping(fast) == {"ok": 1.0}
        assert time.monotonic() - t0 < 0.5
        th.join()
        assert done["slow"] >= 1.45
    finally:
        fail_point(fast, "off")
        slow.close()
        fast.close()


@pytest.mark.parametrize("data,errmsg", [
    ({"blockConnection": True}, "must specify 'blockTimeMS' when 'blockConnection' is true"),
    ({"blockConnection": True, "blockTimeMS": "x"},
     "must specify 'blockTimeMS' when 'blockConnection' is true"),
    ({"blockConnection": True, "blockTimeMS": -1}, "'blockTimeMS' must be non-negative"),
])
def test_block_connection_needs_block_time(client, data, errmsg):
    fail_point(client, {"times": 1}, {"failCommands": ["ping"], **data})
    exc = fail_point_error(client, {"ping": 1})
    assert (exc.code, exc.details["errmsg"]) == (72, errmsg)
    assert ping(client) == {"ok": 1.0}


# ------------------------------------------------------------------ appName

def test_app_name_filters_connections(server):
    a = pymongo.MongoClient(server.uri, appname="appA")
    b = pymongo.MongoClient(server.uri, appname="appB")
    n = pymongo.MongoClient(server.uri)
    try:
        fail_point(n, {"times": 2}, {"failCommands": ["ping"], "errorCode": 2,
                                     "appName": "appA"})
        # Other clients neither fail nor use up the times.
        for _ in range(3):
            assert ping(b) == {"ok": 1.0}
            assert ping(n) == {"ok": 1.0}
        assert code_of(lambda: ping(a)) == 2
        assert code_of(lambda: ping(a)) == 2
        assert ping(a) == {"ok": 1.0}
    finally:
        a.close(), b.close(), n.close()


def test_app_name_from_a_raw_hello(server):
    with wirelib.Conn(server.port) as named, wirelib.Conn(server.port) as anon:
        hello = {"hello": 1, "client": {"application": {"name": "rawApp"},
                                        "driver": {"name": "t", "version": "1"},
                                        "os": {"type": "Linux"}}, "$db": "admin"}
        assert raw_doc(named, hello)["ok"] == 1.0
        raw_doc(anon, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                       "data": {"failCommands": ["ping"], "errorCode": 2, "appName": "rawApp"},
                       "$db": "admin"})
        assert raw_doc(named, {"ping": 1, "$db": "admin"})["code"] == 2
        assert raw_doc(anon, {"ping": 1, "$db": "admin"}) == {"ok": 1.0}


def test_app_name_of_the_failing_hello_itself(server):
    # The first hello's metadata is read before the fail point looks.
    with wirelib.Conn(server.port) as setter, wirelib.Conn(server.port) as conn:
        raw_doc(setter, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                         "data": {"failCommands": ["hello"], "errorCode": 2,
                                  "appName": "monitorMe"},
                         "$db": "admin"})
        doc = raw_doc(conn, {"hello": 1, "client": {"application": {"name": "monitorMe"}},
                             "$db": "admin"})
        assert doc["code"] == 2
        assert raw_doc(setter, {"hello": 1, "$db": "admin"})["ok"] == 1.0


# ------------------------------------------------------- writeConcernError

WCE = {"code": 100, "codeName": "UnsatisfiableWriteConcern", "errmsg": "Not enough data-bearing nodes"}


def test_write_concern_error_reply_shape(raw):
    raw_doc(raw, {"configureFailPoint": "failCommand", "mode": {"times": 1},
                  "data": {"failCommands": ["insert"], "writeConcernError": WCE},
                  "$db": "admin"})
    doc = raw_doc(raw, {"insert": "c", "documents": [{"_id": 1}], "$db": "db"})
    assert list(doc.items()) == [("n", 1), ("writeConcernError", WCE), ("ok", 1.0)]
    # The write happened.
    found = raw_doc(raw, {"find": "c", "$db": "db"})
    assert found["cursor"]["firstBatch"] == [{"_id": 1}]
    doc = raw_doc(raw, {"insert": "c", "documents": [{"_id": 2}], "$db": "db"})
    assert list(doc.items()) == [("n", 1), ("ok", 1.0)]


def test_write_concern_error_with_labels_after_ok(raw):
    raw_doc(raw, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                  "data": {"failCommands": ["delete"], "writeConcernError": WCE,
                           "errorLabels": ["RetryableWriteError"]},
                  "$db": "admin"})
    doc = raw_doc(raw, {"delete": "c", "deletes": [{"q": {}, "limit": 0}], "$db": "db"})
    assert list(doc.items()) == [("n", 0), ("writeConcernError", WCE), ("ok", 1.0),
                                 ("errorLabels", ["RetryableWriteError"])]


def test_write_concern_error_on_a_failing_write_goes_first(raw):
    raw_doc(raw, {"create": "c", "$db": "db"})
    raw_doc(raw, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                  "data": {"failCommands": ["create"], "writeConcernError": WCE},
                  "$db": "admin"})
    doc = raw_doc(raw, {"create": "c", "$db": "db"})
    assert list(doc.items()) == [("writeConcernError", WCE), ("ok", 0.0),
                                 ("errmsg", "Collection db.c already exists."), ("code", 48),
                                 ("codeName", "NamespaceExists")]


def test_write_concern_error_leaves_reads_alone(client):
    client.db.c.insert_one({"_id": 1})
    fail_point(client, {"times": 1},
               {"failCommands": ["find", "aggregate", "insert"], "writeConcernError": WCE})
    assert client.db.c.find_one() == {"_id": 1}
    assert list(client.db.c.aggregate([{"$match": {}}])) == [{"_id": 1}]
    # ...and does not use up the times on them.
    reply = client.db.command({"insert": "c", "documents": [{"_id": 2}]})
    assert reply["writeConcernError"] == WCE


def test_write_concern_error_on_aggregate_with_out(client):
    client.db.c.insert_one({"_id": 1})
    fail_point(client, "alwaysOn", {"failCommands": ["aggregate"], "writeConcernError": WCE})
    reply = client.db.command({"aggregate": "c", "pipeline": [{"$out": "d"}], "cursor": {}})
    assert reply["writeConcernError"] == WCE
    assert client.db.d.find_one() == {"_id": 1}


def test_pymongo_raises_write_concern_error(client):
    fail_point(client, {"times": 1}, {"failCommands": ["update"], "writeConcernError": WCE})
    with pytest.raises(pymongo.errors.WriteConcernError) as info:
        client.db.c.update_one({"_id": 1}, {"$set": {"x": 1}}, upsert=True)
    assert info.value.code == 100
    assert client.db.c.find_one() == {"_id": 1, "x": 1}


def test_error_code_wins_over_write_concern_error(client):
    fail_point(client, {"times": 1}, {"failCommands": ["insert"], "errorCode": 2,
                                      "writeConcernError": WCE})
    with pytest.raises(OperationFailure) as info:
        client.db.command({"insert": "c", "documents": [{"_id": 1}]})
    assert info.value.code == 2
    assert "writeConcernError" not in info.value.details
    assert client.db.c.count_documents({}) == 0


# ---------------------------------------------- internal and local clients

INTERNAL_HELLO = {"hello": 1, "internalClient": {"minWireVersion": 0, "maxWireVersion": 21},
                  "$db": "admin"}


def test_internal_clients_only_with_fail_internal_commands(server):
    with wirelib.Conn(server.port) as internal, wirelib.Conn(server.port) as user:
        assert raw_doc(internal, INTERNAL_HELLO)["ok"] == 1.0
        raw_doc(user, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                       "data": {"failCommands": ["ping"], "errorCode": 2}, "$db": "admin"})
        assert raw_doc(internal, {"ping": 1, "$db": "admin"}) == {"ok": 1.0}
        assert raw_doc(user, {"ping": 1, "$db": "admin"})["code"] == 2
        raw_doc(user, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                       "data": {"failCommands": ["ping"], "errorCode": 2,
                                "failInternalCommands": True}, "$db": "admin"})
        assert raw_doc(internal, {"ping": 1, "$db": "admin"})["code"] == 2


def test_in_process_commands_are_local_clients(server, client):
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": 2})
    assert server.command("admin", {"ping": 1}) == {"ok": 1.0}
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": 2,
                                    "failLocalClients": True})
    # Still an internal thread in mongod's eyes: needs failInternalCommands too.
    assert server.command("admin", {"ping": 1}) == {"ok": 1.0}
    fail_point(client, "alwaysOn", {"failCommands": ["ping"], "errorCode": 2,
                                    "failLocalClients": True, "failInternalCommands": True})
    with pytest.raises(multifora.server.CommandError) as info:
        server.command("admin", {"ping": 1})
    assert info.value.code == 2


# ------------------------------------------------ threadName and namespace

def test_thread_name_is_conn_and_the_connection_id(server):
    with wirelib.Conn(server.port) as one, wirelib.Conn(server.port) as two:
        conn_id = raw_doc(one, {"hello": 1, "$db": "admin"})["connectionId"]
        raw_doc(two, {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                      "data": {"failCommands": ["ping"], "errorCode": 2,
                               "threadName": f"conn{conn_id}"}, "$db": "admin"})
        assert raw_doc(one, {"ping": 1, "$db": "admin"})["code"] == 2
        assert raw_doc(two, {"ping": 1, "$db": "admin"}) == {"ok": 1.0}


def test_namespace_filters_by_collection(client):
    client.db.a.insert_one({"_id": 1})
    client.db.b.insert_one({"_id": 1})
    fail_point(client, "alwaysOn", {"failCommands": ["find"], "errorCode": 2,
                                    "namespace": "db.a"})
    assert code_of(lambda: client.db.a.find_one()) == 2
    assert client.db.b.find_one() == {"_id": 1}
    assert client.other.a.find_one() is None


# ----------------------------------------------------------- concurrency

def test_times_is_exact_across_threads(server):
    clients = [pymongo.MongoClient(server.uri, maxPoolSize=2) for _ in range(4)]
    try:
        fail_point(clients[0], {"times": 37}, {"failCommands": ["ping"], "errorCode": 2})
        failures = []
        lock = threading.Lock()

        def run(c):
            n = 0
            for _ in range(40):
                if code_of(lambda: ping(c)) == 2:
                    n += 1
            with lock:
                failures.append(n)

        threads = [threading.Thread(target=run, args=(c,)) for c in clients for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(failures) == 37
        assert fail_point(clients[0], "off")["count"] == 37
    finally:
        for c in clients:
            c.close()


def test_count_type_is_int32(raw):
    reply = raw.roundtrip(wirelib.op_msg(wirelib.body_section(
        {"configureFailPoint": "failCommand", "mode": "off", "$db": "admin"})))
    assert bson.decode(reply.raw[21:])["count"] == 0
    body = reply.raw[21:]
    # "count" is BSON type 0x10 (int32), as mongod appends a small number.
    assert body[4] == 0x10 and body[5:11] == b"count\x00"
    assert not isinstance(bson.decode(body)["count"], Int64)


# ------------------------------------------------- every fail point built

# The fail points built here (docs/failpoints.md): each reads its mode and
# data as mongod's FailPoint::parseBSON does, and counts its own entries.
BUILT = ["failCommand", "failGetMoreAfterCursorCheckout", "hangIndexBuildBeforeCommit",
         "maxTimeAlwaysTimeOut", "onPrimaryTransactionalWrite"]

# What drivers' and the specifications' test suites configure, or mongod's
# twin of one, that is not built: a standalone never reaches them, so they
# are unknown here, as a name mongod does not have is (never set and
# ignored).
NOT_BUILT = ["stopReplProducer", "maxTimeNeverTimeOut"]


@pytest.mark.parametrize("name", BUILT)
@pytest.mark.parametrize("cmd,code,errmsg", MODE_ERRORS)
def test_every_fail_point_reads_its_mode_as_mongod(client, name, cmd, code, errmsg):
    exc = fail_point_error(client, {"configureFailPoint": name, **cmd})
    assert (exc.code, exc.details["errmsg"]) == (code, errmsg)


@pytest.mark.parametrize("name", BUILT)
def test_every_fail_point_takes_every_mode_and_counts_its_own(client, name):
    for mode in ({"times": 2}, {"skip": 1}, {"activationProbability": 0.5}, "alwaysOn",
                 {"times": 0}, "off"):
        reply = client.admin.command({"configureFailPoint": name, "mode": mode,
                                      "data": {"anything": 1}})
        assert reply == {"count": 0, "ok": 1.0}, mode
    # Already entered as often as asked: returns at once.
    assert client.admin.command({"waitForFailPoint": name, "timesEntered": 0,
                                 "maxTimeMS": 1000}) == {"ok": 1.0}
    with pytest.raises(OperationFailure) as info:
        client.admin.command({"waitForFailPoint": name, "timesEntered": 1, "maxTimeMS": 20})
    assert info.value.code == 50


def test_each_fail_point_has_its_own_count(client):
    fail_point(client, {"times": 1}, {"failCommands": ["ping"], "errorCode": 2})
    assert code_of(lambda: ping(client)) == 2
    for name in BUILT[1:]:
        assert client.admin.command("configureFailPoint", name, mode="off")["count"] == 0
    assert fail_point(client, "off")["count"] == 1


@pytest.mark.parametrize("name", NOT_BUILT)
def test_fail_points_not_built_are_unknown(client, name):
    exc = fail_point_error(client, {"configureFailPoint": name, "mode": "alwaysOn"})
    assert (exc.code, exc.details["errmsg"]) == (266, f"{name} not found")
    exc = fail_point_error(client, {"waitForFailPoint": name, "timesEntered": 1,
                                    "maxTimeMS": 10})
    assert (exc.code, exc.details["errmsg"]) == (266, f"{name} not found")


def _build_index(server, name):
    with pymongo.MongoClient(server.uri) as c:
        c.t.c.create_index(name)


def test_hang_index_build_skip_lets_the_first_build_by(server, client):
    # {skip: 1}: the first build's check passes by; the second one's check
    # and every evaluation of its pause fire until the fail point is off.
    client.t.c.insert_many([{"a": i, "b": i} for i in range(10)])
    admin = client.admin
    assert admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                         mode={"skip": 1})["count"] == 0
    # not held (were it, its time limit would end the wait with an error)
    client.t.c.create_index("a", maxTimeMS=5000)
    t = threading.Thread(target=_build_index, args=(server, "b"))
    t.start()
    try:
        admin.command("waitForFailPoint", "hangIndexBuildBeforeCommit", timesEntered=2,
                      maxTimeMS=30000)
        time.sleep(0.3)
        assert t.is_alive()
    finally:
        assert admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                             mode="off")["count"] == 2
        t.join(timeout=30)
    assert sorted(i["name"] for i in client.t.c.list_indexes()) == ["_id_", "a_1", "b_1"]


def test_hang_index_build_activation_probability_zero_never_holds(client):
    client.t.c.insert_many([{"a": i} for i in range(10)])
    client.admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                         mode={"activationProbability": 0.0})
    client.t.c.create_index("a", maxTimeMS=5000)
    assert client.admin.command("configureFailPoint", "hangIndexBuildBeforeCommit",
                                mode="off")["count"] == 0
