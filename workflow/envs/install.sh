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
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # dbsweep starts its own servers on its own datadirs; the packages' system services only add noise.
  if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
    systemctl disable --now mariadb postgresql >/dev/null 2>&1 || true
  fi
fi

stamp=.venv/installed-$(sha256sum "$envs/python.txt" | cut -c1-16)
if [[ ! -e $stamp ]]; then
  rm -rf .venv
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r "$envs/python.txt"
  touch "$stamp"
fi
