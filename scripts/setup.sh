#!/usr/bin/env bash
# Idempotent set-up: .venv with the pinned environment and the package, then the default dataset.
# Re-running is cheap: the install is skipped while requirements.lock and pyproject.toml are
# unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PY=$c; break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "error: ncip needs Python 3.11 (python3.11 not found); install it or set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.ncip-installed
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing the pinned environment (requirements.lock) and ncip" >&2
  # --no-compile: pip would byte-compile file by file on one core; compiled below instead
  .venv/bin/python -m pip install --quiet --no-compile -r requirements.lock
  .venv/bin/python -m pip install --quiet --no-compile --no-deps -e '.[dev]'
  echo "$want" > "$stamp"
fi
# Byte-compile the environment and the package once, on every core (about 25 s on 2 cores).
# Python would write the caches itself on first import, but not where PYTHONDONTWRITEBYTECODE
# is set (Docker's Python images and these machines set it): there every stage, test and `dvc`
# process compiled all it imported again, 1.4-4.6 s of each stage's start-up
# (benchmarks/bench_stage_startup.py --bytecode). Files that do not compile (templates, other
# Python versions' code in some packages) are skipped, as pip skips them.
compiled=.venv/.ncip-compiled
if [ ! -f "$compiled" ] || [ "$(cat "$compiled")" != "$want" ]; then
  echo "setup: byte-compiling the environment (once)" >&2
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m compileall -q -j 0 "$site" src >/dev/null 2>&1 || true
  echo "$want" > "$compiled"
fi

# Debian's data packages: Fashion-MNIST (the default study, with --data) and the real English
# text of the text subjects and their tests (WordNet 3.0, fortunes), when they are missing.
sudo=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo="sudo -n"
apt_install() {  # apt_install WHAT PACKAGE...: one line and on where apt-get cannot run
  local what=$1; shift
  if command -v apt-get >/dev/null && { [ "$(id -u)" -eq 0 ] || $sudo true 2>/dev/null; }; then
    echo "setup: installing Debian's $*" >&2
    $sudo apt-get install -y -q "$@" >/dev/null \
      || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "$@" >/dev/null; } \
      || echo "setup: apt-get could not install $*; $what" >&2
  else
    echo "setup: apt-get is not usable here to install $*; $what" >&2
  fi
}
if [ ! -f data/raw/wordnet/data.noun ] && [ ! -f /usr/share/wordnet/data.noun ] \
   || { [ ! -f data/raw/fortunes/people ] && [ ! -f /usr/share/games/fortunes/people ]; }; then
  apt_install "put WordNet's dict/ files in data/raw/wordnet/ and the fortune files in data/raw/fortunes/ by hand (docs/datasets.md)" \
    wordnet-base fortunes fortunes-min
fi
if [ ! -f data/raw/python-doc/index.html ] && [ ! -f /usr/share/doc/python3-doc/html/index.html ]; then
  apt_install "put the CPython documentation's HTML in data/raw/python-doc/ by hand (docs/study.md \"Language models\")" \
    python3-doc
fi
# the tables of Debian's R data packages (the extended study): the data files only, no R, into
# the user's cache outside the checkout (DVC experiments run in a copy without ignored files);
# the package list is ncip.study.datasets.uci.PACKAGES (R's folder names; Debian's are lower case)
rcran="${XDG_CACHE_HOME:-$HOME/.cache}/ncip/r-cran"
rpkgs=$(.venv/bin/python -c "from ncip.study.datasets.uci import PACKAGES; print(*PACKAGES)" 2>/dev/null || echo mlbench kernlab)
for pkg in $rpkgs; do
  deb="r-cran-${pkg,,}"
  if [ ! -d "data/raw/r-cran/$pkg/data" ] && [ ! -d "$rcran/$pkg/data" ] \
     && [ ! -d "/usr/lib/R/site-library/$pkg/data" ]; then
    if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
      tmp=$(mktemp -d)
      if (cd "$tmp" && apt-get download -q "$deb" >/dev/null 2>&1) \
         || { $sudo apt-get update -q >/dev/null 2>&1 && (cd "$tmp" && apt-get download -q "$deb" >/dev/null 2>&1); }; then
        dpkg-deb -x "$tmp"/"$deb"_*.deb "$tmp/x"
        mkdir -p "$rcran/$pkg"
        cp -r "$tmp/x/usr/lib/R/site-library/$pkg/data" "$rcran/$pkg/"
        echo "setup: Debian's $deb data files in $rcran/$pkg/data" >&2
      else
        echo "setup: apt-get could not download $deb; put its data/ files in data/raw/r-cran/$pkg/data/ by hand (docs/datasets.md)" >&2
      fi
      rm -rf "$tmp"
    else
      echo "setup: no apt-get here to download $deb; put its data/ files in data/raw/r-cran/$pkg/data/ by hand (docs/datasets.md)" >&2
    fi
  fi
done
if [ "${1:-}" = "--data" ]; then
  if ! ls data/raw/fashion-mnist/train-images-idx3-ubyte* >/dev/null 2>&1 \
     && [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    apt_install "the pipeline will try torchvision's downloader (online), or put the four IDX files in data/raw/fashion-mnist/" \
      dataset-fashion-mnist
  fi
fi
