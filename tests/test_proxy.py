"""Proxies in front of a topology's nodes: real haproxy in front of two real MariaDB servers on 127.0.0.1.

ProxySQL is packaged nowhere this project can reach: its adapter is tested as far as that allows (the
refusals, the config text it writes).
"""
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil
import pymysql
import pytest

from dbsweep.engines import chown_tree, family
from dbsweep.errors import ConfigError
from dbsweep.topology import proxies
from dbsweep.topology.proxies import Backend, check_settings, haproxy, proxy, proxysql

FIXTURES = Path(__file__).parent / "fixtures"
USER, DATABASE = "sbuser", "sbtest"
PASSWORD = secrets.token_urlsafe(12)
MARIADB = family("innodb")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def own_tmp() -> Path:
    """A 0755 folder under /tmp: mysql and haproxy cannot enter pytest's 0700 tmp_path folders."""
    path = Path(tempfile.mkdtemp(prefix="dbsweep-proxy-", dir="/tmp"))
    path.chmod(0o755)
    return path


def connect(port: int, password: str = PASSWORD):
    return pymysql.connect(host="127.0.0.1", port=port, user=USER, password=password, database=DATABASE,
                           autocommit=True, connect_timeout=5, read_timeout=10)


def backend_port(port: int) -> int:
    """The port of the server a new connection to port ends up on (SELECT @@port)."""
    with connect(port) as db, db.cursor() as cursor:
        cursor.execute("SELECT @@port")
        return cursor.fetchone()[0]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def assert_nothing_left(pid: int, rundir: Path, port: int) -> None:
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert [p.pid for p in psutil.process_iter(["cwd"]) if p.info["cwd"] == str(rundir)] == []
    assert [path.name for path in rundir.iterdir() if stat.S_ISSOCK(path.lstat().st_mode)] == []
    assert not listening(port)


def haproxy_pid(rundir: Path) -> int:
    found = [p.pid for p in psutil.process_iter(["name", "cwd"])
             if p.info["name"] == "haproxy" and p.info["cwd"] == str(rundir)]
    assert len(found) == 1, found
    return found[0]


def settled(handle, key: str | tuple, value: float, within_s: float = 3) -> dict:
    """stats() once key (or the sum of several keys) has reached value: haproxy counts a closed session a
    moment after the client closed, and a backend's session a moment after the frontend's."""
    keys = (key,) if isinstance(key, str) else key
    deadline = time.monotonic() + within_s
    while sum((numbers := handle.stats())[k] for k in keys) != value:
        assert time.monotonic() < deadline, f"{' + '.join(keys)} stayed {sum(numbers[k] for k in keys)}, not {value}"
        time.sleep(0.02)
    return numbers


# --- no server ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind, settings, message", [
    ("nginx", {}, "proxy: 'nginx' is not one of haproxy, proxysql"),
    ("haproxy", {"balance": "random"}, "proxies.haproxy.balance: 'random' is not one of roundrobin, first, leastconn"),
    ("haproxy", {"balanse": "first"}, "proxies.haproxy.balanse: 'first' is not a setting of haproxy"),
    ("haproxy", {"check_interval_ms": 0}, "proxies.haproxy.check_interval_ms: 0 is not a whole number from 50"),
    ("haproxy", {"maxconn": "many"}, "proxies.haproxy.maxconn: 'many' is not a whole number"),
    ("haproxy", {"timeout_s": True}, "proxies.haproxy.timeout_s: True is not a whole number"),
    ("haproxy", ["first"], "proxies.haproxy: ['first'] is not a mapping of settings"),
    ("proxysql", {}, "proxies.proxysql.path: None: ProxySQL is not packaged here"),
    ("proxysql", {"path": "bin/proxysql"}, "proxies.proxysql.path: 'bin/proxysql' is not an absolute path"),
    ("proxysql", {"path": "/nonexistent/proxysql"}, "proxies.proxysql.path: '/nonexistent/proxysql': no such file"),
    ("proxysql", {"path": "NOEXEC"}, "proxies.proxysql.path: 'NOEXEC' is not executable"),
    ("proxysql", {"path": "/bin/true", "balance": "leastconn"}, "proxies.proxysql.balance: 'leastconn' is not one"),
])
def test_bad_settings_are_refused_in_one_line(kind, settings, message, tmp_path):
    if isinstance(settings, dict) and settings.get("path") == "NOEXEC":  # a plain file, mode 0644
        (tmp_path / "proxysql").write_text("not a program\n")
        settings = {"path": str(tmp_path / "proxysql")}
        message = message.replace("NOEXEC", settings["path"])
    with pytest.raises(ConfigError) as error:
        check_settings(kind, settings)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_good_settings_pass_and_every_kind_declares_its_contract():
    check_settings("haproxy", {})
    check_settings("haproxy", {"balance": "first", "check_interval_ms": 200, "timeout_s": 600, "maxconn": 1024})
    check_settings("proxysql", {"path": "/bin/true", "balance": "first"})
    for kind in proxies.KINDS:
        module = proxies.adapter(kind)
        assert kind == module.KIND and callable(module.run) and callable(module.CUMULATIVE)


def test_bad_settings_stop_before_anything_starts(tmp_path):
    with pytest.raises(ConfigError, match="balance"):
        with proxy("haproxy", {"balance": "source"}, ("127.0.0.1", free_port()), [Backend("primary", "127.0.0.1", 1)],
                   tmp_path / "run", open(tmp_path / "log", "w")):
            pass
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="not a plain name"):
        with proxy("haproxy", {}, ("127.0.0.1", free_port()), [Backend("a b", "127.0.0.1", 1)], tmp_path / "run",
                   open(tmp_path / "log", "w")):
            pass


def test_haproxy_config_text():
    text = haproxy.config_text({**haproxy.SETTINGS, "balance": "first", "check_interval_ms": 300},
                               ("10.1.0.5", 6033),
                               [Backend("node1", "10.1.0.2", 3306), Backend("node2", "10.1.0.3", 3307)],
                               Path("/run/x/stats.sock"))
    assert "    bind 10.1.0.5:6033\n" in text
    assert "    balance first\n" in text
    assert "    server node1 10.1.0.2:3306\n    server node2 10.1.0.3:3307\n" in text
    assert "check inter 300ms" in text and "on-marked-down shutdown-sessions" in text
    assert "mode tcp" in text and "maxconn 4096" in text and "timeout client 3600s" in text


def test_show_stat_parsing_on_captured_output():
    """A real "show stat" answer of haproxy 2.6 (two servers, one killed, after 20 sessions)."""
    numbers = haproxy.parse_stat((FIXTURES / "haproxy_show_stat.csv").read_text(),
                                 {"primary", "replica1"})
    assert numbers["frontend.sessions_total"] == 20 and numbers["frontend.up"] == 1
    assert numbers["server.primary.up"] == 0 and numbers["server.replica1.up"] == 1
    assert numbers["server.primary.sessions_total"] + numbers["server.replica1.sessions_total"] == 20
    assert numbers["backend.up"] == 1 and numbers["backend.sessions_total"] == 20
    assert numbers["frontend.bytes_in"] > 0 and numbers["server.replica1.bytes_out"] > 0
    assert haproxy.CUMULATIVE("server.primary.sessions_total") and haproxy.CUMULATIVE("frontend.bytes_in")
    assert not haproxy.CUMULATIVE("server.primary.up") and not haproxy.CUMULATIVE("backend.queue")
    assert not haproxy.CUMULATIVE("frontend.sessions_current")


def test_proxysql_config_text_holds_servers_users_and_weights():
    settings = {**proxysql.SETTINGS, "path": "/bin/true", "balance": "first"}
    text = proxysql.config_text(settings, ("10.1.0.5", 6033),
                                [Backend("node1", "10.1.0.2", 3306), Backend("node2", "10.1.0.3", 3306)],
                                Path("/run/p"), ("sbuser", 'pa"ss'), "adminpw")
    assert 'interfaces="10.1.0.5:6033"' in text
    assert '{ address="10.1.0.2", port=3306, hostgroup=0, weight=10000000' in text
    assert '{ address="10.1.0.3", port=3306, hostgroup=0, weight=1,' in text
    assert '{ username="sbuser", password="pa\\"ss", default_hostgroup=0, active=1 }' in text
    assert 'mysql_ifaces="/run/p/admin.sock"' in text and 'admin_credentials="dbsweep:adminpw"' in text
    settings["balance"] = "roundrobin"
    text = proxysql.config_text(settings, ("10.1.0.5", 6033), [Backend("node1", "10.1.0.2", 3306)], Path("/run/p"),
                                ("sbuser", "x"), "adminpw")
    assert "weight=10000000" not in text
    with pytest.raises(ConfigError, match="line break"):
        proxysql.config_text(settings, ("10.1.0.5", 6033), [Backend("node1", "10.1.0.2", 3306)], Path("/run/p"),
                             ("sbuser", "x\ny"), "adminpw")


def test_proxysql_stats_numbers():
    pool = [("10.1.0.2", "3306", "ONLINE", "3", "40", "1", "900", "5000", "7000"),
            ("10.1.0.3", "3306", "SHUNNED", "0", "2", "5", "0", "0", "0")]
    numbers = proxysql.parse_stats(pool, [("Client_Connections_created", "42"), ("Uptime", "3")],
                                   {("10.1.0.2", 3306): "node1", ("10.1.0.3", 3306): "node2"})
    assert numbers["server.node1.up"] == 1 and numbers["server.node2.up"] == 0
    assert numbers["server.node1.sessions_current"] == 3 and numbers["server.node2.connection_errors"] == 5
    assert numbers["frontend.sessions_total"] == 42 and "frontend.Uptime" not in numbers


# --- real haproxy, real servers --------------------------------------------------------------

@pytest.fixture(scope="module")
def workdir():
    path = own_tmp()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def image(workdir) -> Path:
    """An initialized datadir with the benchmark user, to copy for each server."""
    datadir = workdir / "image"
    with open(workdir / "initialize.log", "w") as log:
        MARIADB.initialize(datadir, log)
        config = MARIADB.config_text("innodb", "64M", {}, datadir, workdir / "run-image", free_port())
        with MARIADB.server("innodb", datadir, workdir / "run-image", config, log) as handle:
            MARIADB.create_user(handle, USER, PASSWORD, DATABASE)
    return datadir


@contextmanager
def mariadb(workdir: Path, image: Path, name: str, netns: str | None = None):
    """A MariaDB server on its own copy of image, on 127.0.0.1 (of netns, when given) and a port of its own."""
    datadir = workdir / name / "data"
    shutil.rmtree(workdir / name, ignore_errors=True)
    (workdir / name).mkdir(mode=0o755)
    shutil.copytree(image, datadir, symlinks=True)
    chown_tree(datadir, MARIADB.SERVICE_USER)
    config = MARIADB.config_text("innodb", "64M", {}, datadir, workdir / name / "run", free_port())
    with open(workdir / name / "server.log", "a") as log:
        with MARIADB.server("innodb", datadir, workdir / name / "run", config, log, netns=netns) as handle:
            yield handle


@pytest.fixture(scope="module")
def servers(workdir, image):
    with ExitStack() as stack:
        yield [stack.enter_context(mariadb(workdir, image, name)) for name in ("primary", "replica1")]


def backends(handles, names=("primary", "replica1")) -> list[Backend]:
    return [Backend(name, "127.0.0.1", handle.port) for name, handle in zip(names, handles, strict=False)]


@contextmanager
def running(workdir: Path, settings: dict, backend_list: list[Backend], netns: str | None = None):
    rundir = workdir / f"proxy-{secrets.token_hex(3)}"
    port = free_port()
    with open(workdir / "proxy.log", "a") as log:
        with proxy("haproxy", settings, ("127.0.0.1", port), backend_list, rundir, log, netns) as handle:
            yield handle


@contextmanager
def namespace():
    """A network namespace of this test's own with its loopback up; always removed."""
    name = f"dbsweep-proxytest-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)


@pytest.mark.workflow
def test_a_query_through_haproxy_reaches_a_backend_and_stats_grow(workdir, servers):
    with running(workdir, {}, backends(servers[:1])) as handle:
        assert handle.facts["version"].startswith("HAProxy version 2.")
        assert handle.facts["balance"] == "roundrobin"
        config = Path(handle.facts["config"])
        assert config.stat().st_mode & 0o777 == 0o644 and PASSWORD not in config.read_text()
        pid = haproxy_pid(config.parent)
        assert handle.pid == pid and psutil.Process(pid).username() == "haproxy"
        before = handle.stats()
        assert before["server.primary.up"] == 1 and before["frontend.sessions_total"] == 0
        for _ in range(5):
            assert backend_port(handle.port) == servers[0].port
        with connect(handle.port) as db, db.cursor() as cursor:
            cursor.execute("SELECT REPEAT('x', 100000)")
            cursor.fetchone()
            during = handle.stats()
        after = settled(handle, "frontend.sessions_current", 0)
    assert during["frontend.sessions_current"] == 1 and during["server.primary.sessions_current"] == 1
    assert after["frontend.sessions_total"] == 6 and after["server.primary.sessions_total"] == 6
    assert after["backend.sessions_total"] == 6 and after["frontend.sessions_current"] == 0
    assert after["frontend.bytes_out"] > 100000 and after["server.primary.bytes_in"] > before["server.primary.bytes_in"]
    assert_nothing_left(pid, config.parent, handle.port)


@pytest.mark.workflow
def test_roundrobin_alternates_backends(workdir, servers):
    with running(workdir, {"balance": "roundrobin"}, backends(servers)) as handle:
        seen = [backend_port(handle.port) for _ in range(6)]
        numbers = handle.stats()
    first, second = servers[0].port, servers[1].port
    assert seen in ([first, second] * 3, [second, first] * 3)
    assert numbers["server.primary.sessions_total"] == 3 and numbers["server.replica1.sessions_total"] == 3


@pytest.mark.workflow
def test_leastconn_sends_to_the_idle_backend(workdir, servers):
    with running(workdir, {"balance": "leastconn"}, backends(servers)) as handle:
        with connect(handle.port) as held, held.cursor() as cursor:
            cursor.execute("SELECT @@port")
            busy = cursor.fetchone()[0]
            seen = set()
            for _ in range(3):  # each closed before the next starts: haproxy counts it gone a moment later
                seen.add(backend_port(handle.port))
                settled(handle, ("server.primary.sessions_current", "server.replica1.sessions_current"), 1)
            assert seen == {servers[0].port, servers[1].port} - {busy}


@pytest.mark.workflow
def test_first_sends_to_the_first_and_fails_over_when_it_is_killed(workdir, image, servers):
    """A single writer: every connection to the first node; SIGKILL it (as a timed event will) and haproxy
    takes it out within about 2 check intervals; new connections go to the next node at once."""
    with pytest.raises(RuntimeError, match="exited .* while the run was using it"):
        with mariadb(workdir, image, "writer") as writer:
            pair = backends([writer, servers[1]], ("writer", "replica1"))
            with running(workdir, {"balance": "first"}, pair) as handle:
                assert [backend_port(handle.port) for _ in range(4)] == [writer.port] * 4
                held = connect(handle.port)
                writer_process = psutil.Process(writer.pid)
                writer_process.send_signal(signal.SIGKILL)
                writer_process.wait(10)
                killed = time.monotonic()
                assert backend_port(handle.port) == servers[1].port  # refused by the dead node: redispatched
                while handle.stats()["server.writer.up"] == 1:
                    assert time.monotonic() - killed < 3, "haproxy did not take the killed node out within 3 s"
                    time.sleep(0.05)
                taken_out = time.monotonic() - killed
                with pytest.raises(pymysql.err.OperationalError):  # a session on the dead node is cut
                    with held.cursor() as cursor:
                        cursor.execute("SELECT 1")
                assert [backend_port(handle.port) for _ in range(3)] == [servers[1].port] * 3
                numbers = handle.stats()
                assert numbers["backend.up"] == 1 and numbers["server.replica1.up"] == 1
    print(f"killed node taken out after {taken_out:.2f} s")


@pytest.mark.workflow
def test_nothing_left_after_an_error_in_the_body(workdir, servers):
    with pytest.raises(KeyError, match="the body failed"), running(workdir, {}, backends(servers)) as handle:
        rundir = Path(handle.facts["config"]).parent
        pid = haproxy_pid(rundir)
        assert backend_port(handle.port) in (servers[0].port, servers[1].port)
        raise KeyError("the body failed")
    assert_nothing_left(pid, rundir, handle.port)


@pytest.mark.workflow
def test_a_port_in_use_fails_with_haproxys_message(workdir, servers):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(Exception, match="(?s)haproxy exited .* cannot bind socket"):
            with open(workdir / "proxy.log", "a") as log:
                with proxy("haproxy", {}, ("127.0.0.1", port), backends(servers), workdir / "proxy-taken", log):
                    pass
    assert [p.pid for p in psutil.process_iter(["cwd"]) if p.info["cwd"] == str(workdir / "proxy-taken")] == []


@pytest.mark.workflow
def test_haproxy_in_a_namespace_runs_there_as_haproxy(workdir, image):
    """With netns, haproxy runs inside that namespace (ip netns exec, then setpriv to haproxy): a client
    in the namespace reaches the node through it; the host's loopback has nothing on its port."""
    with namespace() as netns, mariadb(workdir, image, "in-netns", netns) as node:
        with running(workdir, {}, [Backend("primary", "127.0.0.1", node.port)], netns) as handle:
            pid = haproxy_pid(Path(handle.facts["config"]).parent)
            assert psutil.Process(pid).username() == "haproxy"
            assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{netns}").st_ino
            assert not listening(handle.port)
            client = ("import sys, pymysql\n"
                      f"db = pymysql.connect(host='127.0.0.1', port={handle.port}, user='{USER}', "
                      f"password=sys.stdin.read(), database='{DATABASE}')\n"
                      "cursor = db.cursor(); cursor.execute('SELECT @@port'); print(cursor.fetchone()[0])\n")
            done = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", client], input=PASSWORD,
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            assert int(done.stdout) == node.port
            assert handle.stats()["frontend.sessions_total"] == 1
    assert not psutil.pid_exists(pid)


@pytest.mark.workflow
def test_haproxy_holds_300_client_connections_at_once(workdir, servers):
    """256 benchmark threads and more: haproxy's maxconn and file limits take 300 sessions without a
    warning (raw TCP clients that only connect; the server sends its greeting and waits)."""
    with running(workdir, {}, backends(servers)) as handle, ExitStack() as stack:
        for _ in range(300):
            stack.enter_context(socket.create_connection(("127.0.0.1", handle.port), timeout=5))
        numbers = settled(handle, "frontend.sessions_total", 300)
        # totals: a server closes a client that never logs in after its connect_timeout (10 s), which a
        # loaded host can reach before the 300th connection; a backend counts its session a moment after
        # the frontend did (the assertion fails with the backends' sum if they never reach 300)
        numbers = settled(handle, ("server.primary.sessions_total", "server.replica1.sessions_total"), 300, 10)
        assert numbers["frontend.sessions_total"] == 300
        said = (Path(handle.facts["config"]).parent / "server.log").read_text()
    assert "maxconn" not in said and "FD limit" not in said, said


def test_proxysql_without_the_login_refuses_before_starting(tmp_path):
    with pytest.raises(RuntimeError, match="needs the benchmark login"):
        with proxy("proxysql", {"path": "/bin/true"}, ("127.0.0.1", free_port()), [Backend("primary", "127.0.0.1", 1)],
                   tmp_path / "run", open(tmp_path / "log", "w")):
            pass
    assert not (tmp_path / "run").exists()
