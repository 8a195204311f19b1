"""Install / start a loopback-only RabbitMQ and create the users the scenarios need.

Everything here is idempotent: calling ensure_broker() twice is cheap.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

HOST4 = "127.0.0.1"
HOST6 = "::1"
PORT = 5672
TLS_PORT = 5671        # RabbitMQ's own TLS listener (Erlang/OTP ssl)
STUNNEL_PORT = 5676    # stunnel4 (OpenSSL) terminating TLS in front of BACKEND_PORT
BACKEND_PORT = 5673    # plain listener only stunnel talks to: in no capture filter, so the
                       # stunnel-to-broker copy of a connection is not in the samples

USER = "amqpcap"
PASSWORD = "S3cr3t-Pa55w0rd!"
VHOST = "amqpcap"
# Restricted user: may only configure/write/read resources named "ro.*" in VHOST,
# and has no access at all to FORBIDDEN_VHOST.
RUSER = "amqpcap-restricted"
RPASSWORD = "R3str1cted-Pa55!"
FORBIDDEN_VHOST = "amqpcap-forbidden"

CONF_DIR = Path("/tmp/amqpcap-rabbitmq")
TLS_DIR = CONF_DIR / "tls"
TLS_NAME = "rabbit.amqpcap.test"       # the server certificate's CN and SAN, the clients' SNI
CERT_SUBJECT = f"CN={TLS_NAME},O=amqpcap samples"
CA_SUBJECT = "CN=amqpcap test CA,O=amqpcap samples"
CONF = f"""\
listeners.tcp.1 = {HOST4}:{PORT}
listeners.tcp.2 = {HOST6}:{PORT}
listeners.tcp.3 = {HOST4}:{BACKEND_PORT}
listeners.ssl.default = {HOST4}:{TLS_PORT}
loopback_users = none
log.console = false
log.file.level = info
"""
# The listener's ssl_options are all in advanced.config: RabbitMQ 3.10 does not merge an
# advanced.config ssl_options into rabbitmq.conf's ssl_options.* (it replaces the whole list, and the
# listener then started without a certificate), and rabbitmq.conf cannot say key_update_at,
# supported_groups, session_tickets or cipher strings for RSA key exchange. The cipher list is Erlang's default for TLS 1.3 and 1.2 (ECDHE with GCM, ChaCha20, CBC with SHA,
# SHA256, SHA384) plus RSA key exchange (TLS_RSA_WITH_AES_*), which Erlang leaves out of its default.
TLS_CIPHERS = [
    "TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256",
    "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-RSA-AES256-SHA384", "ECDHE-RSA-AES128-SHA256", "ECDHE-RSA-AES256-SHA", "ECDHE-RSA-AES128-SHA",
    "AES256-GCM-SHA384", "AES128-GCM-SHA256", "AES256-SHA256", "AES128-SHA256", "AES128-SHA",
]
# The listener's Erlang ssl options beyond rabbitmq.conf's (defaults; a scenario may ask for others
# with ensure_broker(tls_options={...}) and gets these back at the next ensure_broker()).
TLS_DEFAULT_OPTIONS = {
    "cacertfile": str(TLS_DIR / "ca.pem"),
    "certfile": str(TLS_DIR / "server.pem"),
    "keyfile": str(TLS_DIR / "server.key"),
    "verify": "verify_none",
    "fail_if_no_peer_cert": False,
    "versions": ["tlsv1.3", "tlsv1.2"],
    "ciphers": TLS_CIPHERS,
    "alpn_preferred_protocols": ["amqp"],   # binaries in Erlang
    "session_tickets": "stateless",         # TLS 1.3 NewSessionTicket, PSK resumption
    "reuse_sessions": True,                 # TLS 1.2 session-id cache (Erlang's default)
}


def _env() -> dict:
    env = dict(os.environ)
    env.update(
        RABBITMQ_CONFIG_FILE=str(CONF_DIR / "rabbitmq.conf"),
        RABBITMQ_ADVANCED_CONFIG_FILE=str(CONF_DIR / "advanced.config"),
        # keep epmd and Erlang distribution on loopback as well
        ERL_EPMD_ADDRESS="127.0.0.1",
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
    )
    return env


def ctl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", *args], env=_env(), check=check,
                          capture_output=True, text=True, timeout=120)


def _apt_install(*pkgs: str) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *pkgs], check=True, env=env)


def ensure_tools() -> None:
    missing = [p for p, exe in (("rabbitmq-server", "rabbitmq-server"), ("tcpdump", "tcpdump"),
                                ("tshark", "tshark")) if shutil.which(exe) is None]
    if missing:
        _apt_install(*missing)


def is_running() -> bool:
    return ctl("status", check=False).returncode == 0


def ensure_broker(tls_options: dict | None = None, conf_settings: dict | None = None,
                  rabbit_env: dict | None = None) -> tuple[str, str]:
    """tls_options: Erlang ssl options for the TLS listener over TLS_DEFAULT_OPTIONS (e.g.
    {"key_update_at": 32768}). conf_settings: rabbitmq.conf lines added to CONF (e.g.
    {"consumer_timeout": 3000}); rabbit_env: more of the rabbit application's environment in
    advanced.config, beside ssl_options (e.g. {"channel_tick_interval": 1000}). The broker is restarted
    when the configuration it runs with is not the one asked for, so a scenario's own options are
    undone by the next ensure_broker(). Returns the (rabbitmq.conf, advanced.config) it runs with."""
    ensure_tools()
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    ensure_tls_material()
    conf = CONF + "".join(f"{k} = {v}\n" for k, v in (conf_settings or {}).items())
    (CONF_DIR / "rabbitmq.conf").write_text(conf)
    advanced = advanced_config(dict(TLS_DEFAULT_OPTIONS, **(tls_options or {})), rabbit_env)
    (CONF_DIR / "advanced.config").write_text(advanced)
    running = CONF_DIR / "running.config"   # what the running node was started with
    wanted = conf + advanced + tls_material_digest()   # new certificates need a restart too
    if is_running() and (not running.exists() or running.read_text() != wanted):
        ctl("stop")
        deadline = time.time() + 60
        while is_running() and time.time() < deadline:
            time.sleep(1)
    if not is_running():
        running.write_text(wanted)
        subprocess.run(["rabbitmq-server", "-detached"], env=_env(), check=True)
        deadline = time.time() + 120
        while True:
            r = ctl("await_startup", "--timeout", "30", check=False)
            if r.returncode == 0:
                break
            if time.time() > deadline:
                raise RuntimeError("RabbitMQ did not start: " + r.stderr)
            time.sleep(2)
    ensure_users()
    return conf, advanced


def stop_broker() -> None:
    """rabbitmqctl stop (and stunnel, if a TLS scenario started it); waits until the node is down."""
    stop_stunnel()
    if is_running():
        ctl("stop", check=False)
        deadline = time.time() + 60
        while is_running() and time.time() < deadline:
            time.sleep(1)


def _erl(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str) and v.isidentifier() and v.islower():
        return v                                      # an atom: stateless, disabled, ...
    raise TypeError(v)


def advanced_config(opts: dict, rabbit_env: dict | None = None) -> str:
    """rabbit's ssl_options in Erlang terms: strings for ciphers, binaries for ALPN, atoms else;
    then rabbit_env's other rabbit settings (integers, booleans, atoms)."""
    items = []
    for k, v in opts.items():
        if k in ("cacertfile", "certfile", "keyfile"):
            val = f'"{v}"'
        elif k == "versions":
            val = "[" + ", ".join(f"'{x}'" for x in v) + "]"
        elif k == "ciphers":
            val = "[" + ", ".join(f'"{c}"' for c in v) + "]"
        elif k == "alpn_preferred_protocols":
            val = "[" + ", ".join(f'<<"{p}">>' for p in v) + "]"
        elif k == "supported_groups":
            val = "[" + ", ".join(v) + "]"
        else:
            val = _erl(v)
        items.append(f"    {{{k}, {val}}}")
    env = "".join(f",\n  {{{k}, {_erl(v)}}}" for k, v in (rabbit_env or {}).items())
    return "[{rabbit, [{ssl_options, [\n" + ",\n".join(items) + "\n]}" + env + "]}].\n"


def ensure_tls_material() -> dict:
    """A self-signed test CA and a server certificate it signed (RSA 2048, so RSA key exchange
    works), made once into TLS_DIR. Test material only, never in the repository."""
    paths = {"ca": TLS_DIR / "ca.pem", "cert": TLS_DIR / "server.pem", "key": TLS_DIR / "server.key",
             "bundle": TLS_DIR / "stunnel.pem"}
    if all(p.exists() for p in paths.values()):
        return paths
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    TLS_DIR.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    later = now + datetime.timedelta(days=3650)

    def name(cn):  # CN first in the DER: OpenSSL prints "CN = ..., O = ...", RFC 4514 "O=...,CN=..."
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "amqpcap samples")])
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (x509.CertificateBuilder().subject_name(name("amqpcap test CA")).issuer_name(name("amqpcap test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(later)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    import ipaddress
    cert = (x509.CertificateBuilder().subject_name(name(TLS_NAME)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(later)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(TLS_NAME),
                                                        x509.IPAddress(ipaddress.ip_address(HOST4))]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)  # noqa: E731
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    paths["ca"].write_bytes(pem(ca))
    paths["cert"].write_bytes(pem(cert))
    paths["key"].write_bytes(key_pem)
    paths["bundle"].write_bytes(pem(cert) + key_pem)
    for p in paths.values():       # the broker runs as the rabbitmq user (Debian's wrapper)
        p.chmod(0o644)
    return paths


def tls_material_digest() -> str:
    import hashlib
    return "% " + hashlib.sha256(b"".join((TLS_DIR / n).read_bytes() for n in ("ca.pem", "stunnel.pem"))).hexdigest()


def tls_listeners() -> str:
    r = subprocess.run(["rabbitmq-diagnostics", "listeners", "-q"], env=_env(), capture_output=True,
                       text=True, timeout=120)
    return r.stdout


def ensure_users() -> None:
    vhosts = ctl("list_vhosts", "-q").stdout.split()
    for vh in (VHOST, FORBIDDEN_VHOST):
        if vh not in vhosts:
            ctl("add_vhost", vh)
    users = [line.split("\t")[0] for line in ctl("list_users", "-q").stdout.splitlines()]
    for u, p in ((USER, PASSWORD), (RUSER, RPASSWORD)):
        if u not in users:
            ctl("add_user", u, p)
        else:
            ctl("change_password", u, p)
    # "user-id" property validation needs nothing special; tags are irrelevant.
    ctl("set_permissions", "-p", VHOST, USER, ".*", ".*", ".*")
    ctl("set_permissions", "-p", "/", USER, ".*", ".*", ".*")
    ctl("set_permissions", "-p", VHOST, RUSER, "^ro\\..*", "^ro\\..*", "^ro\\..*")
    # no permissions at all for anybody on FORBIDDEN_VHOST (clear leftovers)
    for u in (USER, RUSER):
        ctl("clear_permissions", "-p", FORBIDDEN_VHOST, u, check=False)


def reset_vhost() -> None:
    """Fresh vhost (no leftover queues/exchanges/bindings) before every scenario."""
    ctl("delete_vhost", VHOST, check=False)
    ensure_users()


def broker_version() -> str:
    r = ctl("version", check=False)
    v = r.stdout.strip() if r.returncode == 0 else ""
    return f"RabbitMQ {v}" if v else "RabbitMQ unknown"


def connection_count() -> int:
    r = ctl("list_connections", "-q", "name", check=False)
    return len([l for l in r.stdout.splitlines() if l.strip()])


def wait_no_connections(timeout: float = 15.0) -> None:
    """Wait until the broker has no client connections (isolation between scenarios)."""
    deadline = time.time() + timeout
    while connection_count() and time.time() < deadline:
        time.sleep(0.3)


def env_value(key: str) -> str:
    """The running node's application:get_env(rabbit, key), as rabbitmqctl eval prints it."""
    return ctl("eval", f"application:get_env(rabbit, {key}).", check=False).stdout.strip()


def log_path() -> Path:
    import socket
    return Path("/var/log/rabbitmq") / f"rabbit@{socket.gethostname().split('.')[0]}.log"


def log_size() -> int:
    """The broker log's size now: log_since(log_size()) is what the node logs from here on."""
    p = log_path()
    return p.stat().st_size if p.exists() else 0


def log_since(offset: int) -> str:
    p = log_path()
    if not p.exists():
        return ""
    with open(p, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def delete_queue(name: str, vhost: str = VHOST) -> None:
    ctl("delete_queue", "-p", vhost, name, check=False)


def close_all_connections(reason: str) -> None:
    ctl("close_all_connections", reason, check=False)


def plugins(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmq-plugins", *args], env=_env(), check=True,
                          capture_output=True, text=True, timeout=180)


def enable_plugins(*names: str) -> None:
    """Enable plugins that ship with the broker (idempotent; online, no restart). They stay
    enabled: rabbitmq_shovel and rabbitmq_amqp1_0 leave AMQP 0-9-1 on 5672 as it was (the AMQP 1.0
    plugin only takes connections that send an AMQP 1.0 / SASL protocol header)."""
    enabled = plugins("list", "-q", "-E", "-m").stdout.split()
    missing = [n for n in names if n not in enabled]
    if missing:
        plugins("enable", *missing)
    ctl("await_startup", "--timeout", "60")


def plugin_version(name: str) -> str:
    for line in plugins("list", "-q", f"^{name}$").stdout.splitlines():
        if name in line.split():
            return line.split()[-1]
    return "unknown"


# ------------------------------------------------------------------ stunnel4: OpenSSL's TLS server
STUNNEL_CONF = f"""\
; amqpcap sample recorder: TLS on {HOST4}:{STUNNEL_PORT} (OpenSSL), plain AMQP to {HOST4}:{BACKEND_PORT}
foreground = no
pid = {TLS_DIR}/stunnel.pid
output = {TLS_DIR}/stunnel.log
debug = notice
[amqps-openssl]
accept = {HOST4}:{STUNNEL_PORT}
connect = {HOST4}:{BACKEND_PORT}
cert = {TLS_DIR}/server.pem
key = {TLS_DIR}/server.key
sslVersionMin = TLSv1.2
sslVersionMax = TLSv1.3
ciphers = ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES128-SHA256:ECDHE-RSA-AES256-SHA384:AES128-GCM-SHA256
ciphersuites = TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
sessionResume = yes
"""


def stunnel_running() -> bool:
    pid = TLS_DIR / "stunnel.pid"
    try:
        os.kill(int(pid.read_text().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def ensure_stunnel() -> None:
    """stunnel4 on STUNNEL_PORT, (re)started when its configuration changed. OpenSSL does what
    Erlang's TLS does not: encrypt-then-MAC (RFC 7366) and TLS 1.2 session tickets (RFC 5077)."""
    if shutil.which("stunnel4") is None:
        _apt_install("stunnel4")
    ensure_tls_material()
    conf = TLS_DIR / "stunnel.conf"
    wanted = STUNNEL_CONF + "; " + tls_material_digest() + "\n"
    if stunnel_running() and conf.exists() and conf.read_text() == wanted:
        return
    stop_stunnel()
    conf.write_text(wanted)
    subprocess.run(["stunnel4", str(conf)], check=True, capture_output=True, timeout=30)
    deadline = time.time() + 15
    while not stunnel_running():
        if time.time() > deadline:
            raise RuntimeError("stunnel did not start: " + (TLS_DIR / "stunnel.log").read_text()[-2000:])
        time.sleep(0.2)


def stop_stunnel() -> None:
    pid = TLS_DIR / "stunnel.pid"
    if stunnel_running():
        n = int(pid.read_text().strip())
        os.kill(n, 15)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                os.kill(n, 0)
            except OSError:
                break
            time.sleep(0.1)


def stunnel_version() -> str:
    r = subprocess.run(["stunnel4", "-version"], capture_output=True, text=True)
    line = next((l for l in (r.stdout + r.stderr).splitlines() if l.startswith("stunnel ")), "stunnel ?")
    return " ".join(line.split()[:2])


def stunnel_openssl() -> str:
    r = subprocess.run(["stunnel4", "-version"], capture_output=True, text=True)
    line = next((l for l in (r.stdout + r.stderr).splitlines() if l.startswith("Running")), "")
    return " ".join(line.split()[2:4]) or "OpenSSL ?"


def erlang_versions() -> str:
    """Erlang/OTP's full version and its ssl application's, as installed (the broker runs on them)."""
    r = subprocess.run(["erl", "-noshell", "-eval",
                        'io:format("~s ~s", [string:trim(element(2, file:read_file(filename:join([code:root_dir(), '
                        '"releases", erlang:system_info(otp_release), "OTP_VERSION"])))), '
                        'filename:basename(code:lib_dir(ssl))]), halt().'], capture_output=True, text=True, timeout=60)
    parts = r.stdout.split()
    return f"Erlang/OTP {parts[0]}, {parts[1].replace('-', ' ')}" if len(parts) == 2 else "Erlang/OTP unknown"
