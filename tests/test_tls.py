"""TLS (issue 50, part 5): the modes, certificates and client
certificates as mongod 7.0's net.tls options, and MONGODB-X509.

The certificates are made here with the openssl command: a CA, a server
certificate for localhost and 127.0.0.1 signed by it, client certificates
signed by it, and a second CA that signs nothing the server trusts.
"""
import shutil
import subprocess

import pymongo
import pytest
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

import multifora

if not shutil.which("openssl"):
    pytest.skip("the openssl command makes the test certificates; it is not installed",
                allow_module_level=True)

PW = "pw-1"
CLIENT = "CN=client,OU=Clients,O=MultiforaTest,C=US"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}/O=MultiforaTest", cwd=d)


def make_cert(d, ca, name, subject, ext=None, key_password=None):
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", subject, cwd=d)
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2"]
    if ext:
        (d / f"{name}.ext").write_text(ext)
        args += ["-extfile", f"{name}.ext"]
    openssl(*args, cwd=d)
    key = f"{name}.key"
    if key_password:
        openssl("pkey", "-in", key, "-out", f"{name}.enc.key", "-aes256", "-passout",
                f"pass:{key_password}", cwd=d)
        key = f"{name}.enc.key"
    (d / f"{name}.pem").write_text((d / f"{name}.crt").read_text() + (d / key).read_text())
    return str(d / f"{name}.pem")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    c = {
        "ca": str(d / "ca.pem"),
        "other_ca": str(d / "other-ca.pem"),
        "server": make_cert(d, "ca", "server", "/CN=localhost/O=MultiforaTest",
                            "subjectAltName=DNS:localhost,IP:127.0.0.1\n"),
        "server_enc": make_cert(d, "ca", "server2", "/CN=localhost/O=MultiforaTest",
                                "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
                                key_password="secret"),
        "client": make_cert(d, "ca", "client", "/C=US/O=MultiforaTest/OU=Clients/CN=client"),
        "odd": make_cert(d, "ca", "odd", "/O=Multifora, Test/CN=\\#1 a\\+b"),
        "stranger": make_cert(d, "other-ca", "stranger", "/CN=stranger/O=Elsewhere"),
    }
    return c


def start(tmp_path, certs, mode="requireTLS", **kw):
    kw.setdefault("log_level", "warning")
    return multifora.Server(str(tmp_path / "db"), port=0, tls_mode=mode,
                            tls_certificate_key_file=kw.pop("cert", certs["server"]),
                            tls_ca_file=certs["ca"], **kw).start()


def tls_client(srv, certs, cert="client", **kw):
    kw.setdefault("serverSelectionTimeoutMS", 3000)
    if cert:
        kw["tlsCertificateKeyFile"] = certs[cert]
    return pymongo.MongoClient("127.0.0.1", srv.port, directConnection=True, tls=True,
                               tlsCAFile=kw.pop("ca", certs["ca"]), **kw)


def plain_client(srv, **kw):
    return pymongo.MongoClient("127.0.0.1", srv.port, directConnection=True,
                               serverSelectionTimeoutMS=1500, **kw)


def test_require_tls_with_scram(tmp_path, certs):
    srv = start(tmp_path, certs, auth=True)
    c = tls_client(srv, certs)
    c.admin.command("createUser", "u", pwd=PW, roles=["root"])
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1"):
        u = tls_client(srv, certs, username="u", password=PW, authMechanism=mech)
        u.test.c.insert_one({"mech": mech})
        assert u.test.c.count_documents({"mech": mech}) == 1
        u.close()
    # the URI the server gives names TLS and its CA
    assert "tls=true" in srv.uri and "tlsCAFile=" in srv.uri
    with pytest.raises(OperationFailure) as e:
        tls_client(srv, certs, username="u", password="wrong").admin.command("ping")
    assert e.value.code == 18
    # plain text against requireTLS: refused, the connection closed
    with pytest.raises(ServerSelectionTimeoutError):
        plain_client(srv).admin.command("ping")
    log = srv.command("admin", {"getLog": "global"})["log"]
    assert any("The server is configured to only allow SSL connections" in l for l in log)
    c.close()
    srv.stop()


def test_certificates_refused(tmp_path, certs):
    srv = start(tmp_path, certs)
    # the client does not trust the server's CA
    with pytest.raises(ServerSelectionTimeoutError) as e:
        tls_client(srv, certs, ca=certs["other_ca"]).admin.command("ping")
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)
    # no client certificate, or one the server's CA did not sign
    for cert in (None, "stranger"):
        with pytest.raises(ServerSelectionTimeoutError):
            tls_client(srv, certs, cert=cert).admin.command("ping")
    log = "\n".join(srv.command("admin", {"getLog": "global"})["log"])
    assert '"id":23255' in log and "No SSL certificate provided by peer" in log
    assert '"id":23256' in log and "SSL peer certificate validation failed" in log
    srv.stop()


def test_allowed_without_certificates_and_both_modes(tmp_path, certs):
    srv = start(tmp_path, certs, mode="preferTLS",
                tls_allow_connections_without_certificates=True)
    assert tls_client(srv, certs, cert=None).admin.command("ping")["ok"] == 1.0
    assert tls_client(srv, certs).admin.command("ping")["ok"] == 1.0
    assert plain_client(srv).admin.command("ping")["ok"] == 1.0
    log = "\n".join(srv.command("admin", {"getLog": "global"})["log"])
    assert "is not using SSL" in log  # preferTLS notes a plain connection (23838)
    srv.stop()
    srv = start(tmp_path, certs, mode="allowTLS")
    assert tls_client(srv, certs).admin.command("ping")["ok"] == 1.0
    assert plain_client(srv).test.c.insert_one({}).acknowledged
    srv.stop()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (asking for TLS 1.1 at all)
def test_tls_versions(tmp_path, certs):
    import ssl
    import socket
    srv = start(tmp_path, certs)
    for version, ok in ((ssl.TLSVersion.TLSv1_2, True), (ssl.TLSVersion.TLSv1_3, True),
                        (ssl.TLSVersion.TLSv1_1, False)):
        ctx = ssl.create_default_context(cafile=certs["ca"])
        ctx.load_cert_chain(certs["client"])
        try:
            ctx.minimum_version = ctx.maximum_version = version
        except ValueError:
            continue  # this Python's OpenSSL cannot even offer it
        with socket.create_connection(("127.0.0.1", srv.port)) as raw:
            try:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    got = s.version()
                    assert ok, got
                    assert got == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                   ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
            except (ssl.SSLError, ConnectionError):
                assert not ok
    srv.stop()


def test_x509_authentication(tmp_path, certs):
    srv = start(tmp_path, certs, auth=True)
    first = tls_client(srv, certs)
    first.admin.command("createUser", "root", pwd=PW, roles=["root"])
    root = tls_client(srv, certs, username="root", password=PW)
    root["$external"].command("createUser", CLIENT,
                              roles=[{"role": "readWrite", "db": "test"}])
    doc = root.admin.system.users.find_one({"_id": f"$external.{CLIENT}"})
    assert doc["credentials"] == {"external": True}
    # pymongo's MONGODB-X509: speculative in hello, with and without a name
    for kw in ({}, {"username": CLIENT}):
        x = tls_client(srv, certs, authMechanism="MONGODB-X509", **kw)
        x.test.c.insert_one({"by": "x509"})
        status = x.admin.command("connectionStatus")["authInfo"]
        assert status["authenticatedUsers"] == [{"user": CLIENT, "db": "$external"}]
        assert refused_13(x.other.c.find_one)
        x.close()
    # the command itself, on a connection with the certificate
    anon = tls_client(srv, certs)
    reply = anon["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
    assert reply["dbname"] == "$external" and reply["user"] == CLIENT
    anon.close()
    cases = [
        ({"mechanism": "MONGODB-X509", "user": "CN=someone else"}, "$external", 18),
        ({"mechanism": "PLAIN"}, "$external", 18),
        ({"mechanism": "MONGODB-X509"}, "test", 17),
    ]
    for args, db, code in cases:
        c = tls_client(srv, certs)
        with pytest.raises(OperationFailure) as e:
            c[db].command("authenticate", 1, **args)
        assert e.value.code == code, (args, e.value.details)
        c.close()
    # a certificate whose subject has no user; its subject as mongod prints it
    c = tls_client(srv, certs, cert="odd")
    with pytest.raises(OperationFailure) as e:
        c["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
    assert e.value.code == 11
    assert e.value.details["errmsg"] == (
        'Could not find user "CN=\\#1 a\\+b,O=Multifora\\, Test" for db "$external"')
    c.close()
    # without a client certificate there is no subject to authenticate
    srv.stop()
    srv = start(tmp_path, certs, auth=True, tls_allow_connections_without_certificates=True)
    c = tls_client(srv, certs, cert=None)
    with pytest.raises(OperationFailure) as e:
        c["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
    assert e.value.code == 18
    c.close()
    srv.stop()


def refused_13(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code == 13
    return False


def test_startup_errors(tmp_path, certs):
    def fails(**kw):
        with pytest.raises(multifora.MultiforaError) as e:
            multifora.Server(str(tmp_path / "db"), port=0, log_level="error", **kw)
        return e.value

    e = fails(tls_mode="requireTLS", tls_ca_file=certs["ca"])
    assert "need tlsCertificateKeyFile or certificateSelector when TLS is enabled" in str(e)
    e = fails(tls_mode="requireTLS", tls_certificate_key_file=certs["server"])
    assert "The use of TLS without specifying a chain of trust is no longer supported" in str(e)
    e = fails(tls_certificate_key_file=certs["server"])
    assert "need to enable TLS via the sslMode/tlsMode flag" in str(e)
    e = fails(tls_mode="requireTLS", tls_certificate_key_file=certs["ca"] + ".missing",
              tls_ca_file=certs["ca"])
    assert "Can not set up PEM key file." in str(e)
    # an encrypted key: without its password, and with it
    e = fails(tls_mode="requireTLS", tls_certificate_key_file=certs["server_enc"],
              tls_ca_file=certs["ca"])
    assert "Can not set up PEM key file." in str(e)
    with pytest.raises(ValueError):
        multifora.Server(str(tmp_path / "db"), port=0, tls_mode="sometimes")
    srv = start(tmp_path, certs, cert=certs["server_enc"],
                tls_certificate_key_file_password="secret",
                argv=["multifora", "--tlsCertificateKeyFilePassword", "secret"])
    opts = tls_client(srv, certs).admin.command("getCmdLineOpts")
    assert opts["parsed"]["net"]["tls"] == {
        "mode": "requireTLS", "certificateKeyFile": certs["server_enc"],
        "certificateKeyFilePassword": "<password>", "CAFile": certs["ca"]}
    assert opts["argv"] == ["multifora", "--tlsCertificateKeyFilePassword", "<password>"]
    srv.stop()


def test_serve_command_line(tmp_path, certs):
    from conftest import ServedProcess
    sp = ServedProcess(tmp_path / "served", extra=[
        "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", certs["server"],
        "--tlsCAFile", certs["ca"]]).start()
    try:
        assert "tls=true" in sp.uri
        c = pymongo.MongoClient(sp.uri, tlsCertificateKeyFile=certs["client"],
                                serverSelectionTimeoutMS=5000)
        assert c.admin.command("ping")["ok"] == 1.0
        c.close()
    finally:
        sp.kill()
