#!/usr/bin/env bash
# Installs what dbsweep needs and is missing: Debian packages (workflow/envs/debian.txt)
# and a pinned Python venv in .venv (workflow/envs/python.txt). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
envs=workflow/envs

missing=()
while read -r pkg cmd; do
  [[ -z $pkg || $pkg == \#* ]] && continue
  if [[ -n $cmd ]]; then
    command -v "$cmd" >/dev/null || missing+=("$pkg")
  else
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  fi
done < "$envs/debian.txt"
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "dbsweep needs Debian packages; as root run: apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  apt=(apt-get -o DPkg::Lock::Timeout=600)  # wait for another apt-get rather than fail
  "${apt[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # dbsweep starts its own servers on its own datadirs; the packages' system services only add noise.
  if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
    systemctl disable --now mariadb postgresql >/dev/null 2>&1 || true
  fi
fi

# The venv is .venv-<hash of python.txt>, and .venv a symlink to it. A new pin list builds a new venv
# beside the old one and then swaps the link, so a snakemake already running keeps its packages and a
# failed install leaves the old venv in place.
venv=.venv-$(sha256sum "$envs/python.txt" | cut -c1-16)
if [[ ! -e $venv/installed ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$envs/python.txt"
  touch "$venv/installed"
fi
if [[ $(readlink .venv 2>/dev/null) != "$venv" ]]; then
  [[ -L .venv || ! -e .venv ]] || rm -rf .venv  # a plain venv of an earlier dbsweep
  ln -sfn "$venv" .venv.link && mv -T .venv.link .venv
fi
