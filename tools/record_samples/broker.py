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

USER = "amqpcap"
PASSWORD = "S3cr3t-Pa55w0rd!"
VHOST = "amqpcap"
# Restricted user: may only configure/write/read resources named "ro.*" in VHOST,
# and has no access at all to FORBIDDEN_VHOST.
RUSER = "amqpcap-restricted"
RPASSWORD = "R3str1cted-Pa55!"
FORBIDDEN_VHOST = "amqpcap-forbidden"

CONF_DIR = Path("/tmp/amqpcap-rabbitmq")
CONF = f"""\
listeners.tcp.1 = {HOST4}:{PORT}
listeners.tcp.2 = {HOST6}:{PORT}
loopback_users = none
log.console = false
log.file.level = info
"""


def _env() -> dict:
    env = dict(os.environ)
    env.update(
        RABBITMQ_CONFIG_FILE=str(CONF_DIR / "rabbitmq.conf"),
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


def ensure_broker() -> None:
    ensure_tools()
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    (CONF_DIR / "rabbitmq.conf").write_text(CONF)
    if not is_running():
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
