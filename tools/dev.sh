#!/usr/bin/env bash
# MultiforaDB's two commands, with all set-up on a fresh Debian machine:
#
#   bash tools/dev.sh serve [serve options]   run the server on the default data directory
#   bash tools/dev.sh test  [pytest options]  run the whole test suite
#
# Both install what is missing first: the Debian -dev packages (apt-get),
# a virtual environment in .venv, and the package with its test extras
# (pip), which builds the C extension and the C test binary.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
DEBS=(gcc pkg-config python3-dev python3-venv libbson-dev liblz4-dev libxxhash-dev libpcre2-dev libicu-dev libintelrdfpmath-dev libssl-dev libstemmer-dev
      # 2dsphere's geometry (docs/geo.md): Google's S2, C++, reached through csrc/query/geo_s2.cc
      g++ libs2-dev
      # the fuzz targets (tests/test_rel_fuzz.py): clang and its libFuzzer runtime
      clang-14 libclang-rt-14-dev
      # the TLS tests make their certificates with the openssl command (tests/test_tls.py)
      openssl)

say() { printf '[multifora] %s\n' "$*" >&2; }

install_debs() {
    local missing=()
    for p in "${DEBS[@]}"; do
        # python3-dev/python3-venv matter only for the system Python.
        if [[ "$p" == python3-* ]] && python3 -c 'import sys; sys.exit(sys.prefix.startswith("/usr"))' 2>/dev/null; then
            continue
        fi
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        say "installing Debian packages: ${missing[*]}"
        local sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

make_venv() {
    if [[ ! -x "$VENV/bin/python" ]]; then
        say "creating $VENV"
        python3 -m venv "$VENV"
    fi
}

install_package() {
    say "building and installing multifora (C extension + C tests)"
    # The build needs setuptools and wheel in the venv itself, since it runs
    # without build isolation (no second download of them on every build).
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "setuptools>=64" wheel
    MULTIFORA_WERROR="${MULTIFORA_WERROR:-1}" \
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        --no-build-isolation "$ROOT[test]"
}

setup() {
    install_debs
    make_venv
    install_package
}

cmd="${1:-}"
shift || true
case "$cmd" in
serve)
    setup
    # Stay in the caller's directory (a relative --dbpath means what they
    # think), but keep it off sys.path: from the repository's root, the
    # source tree's multifora/ (no built extension) would shadow the
    # installed package.  -P does that on Python 3.11+; older ones run the
    # console script, which never puts the working directory on sys.path.
    if "$VENV/bin/python" -P -c pass 2>/dev/null; then
        exec "$VENV/bin/python" -P -m multifora serve "$@"
    fi
    exec "$VENV/bin/multifora" serve "$@"
    ;;
test)
    setup
    # Run from tests/ so the installed package, not the source tree, is the
    # one imported.
    cd "$ROOT/tests"
    exec "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
    ;;
*)
    echo "usage: bash tools/dev.sh serve [--dbpath DIR --port N ...] | test [pytest args]" >&2
    exit 2
    ;;
esac
