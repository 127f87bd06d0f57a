"""Build MultiforaDB's C core, multifora._core, and its C test binary.

The libraries are found with pkg-config (Intel's decimal library, which has
no .pc file, by its header and archive); a missing one stops the build with
the Debian package that provides it.  Environment switches:

  MULTIFORA_SANITIZE=1   build the extension with ASan and UBSan (load it
                         with LD_PRELOAD=$(gcc -print-file-name=libasan.so))
  MULTIFORA_WERROR=1     turn every compiler warning into an error (the test
                         command sets it, so no warning lands)
  MULTIFORA_DEBUG=1      -O0 -g

The C test binary (multifora/_ctest) is always built with ASan and UBSan
when the compiler supports them: it is a separate program, so the
sanitizers cost the extension nothing.
"""
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CSRC = ROOT / "csrc"

# pkg-config name -> Debian package that provides its .pc file and headers.
LIBRARIES = {
    "libbson-1.0": "libbson-dev",
    "liblz4": "liblz4-dev",
    "libxxhash": "libxxhash-dev",
    "libpcre2-8": "libpcre2-dev",
    # Olson time zones for the date operators (csrc/agg/expr_date.c)
    "icu-i18n": "libicu-dev",
    "icu-uc": "libicu-dev",
    # MD5, for mongod's hash of hashed index keys (csrc/bsonx/hash.c)
    "libcrypto": "libssl-dev",
    # TLS for the wire server (csrc/wire/tls.c); the same package
    "libssl": "libssl-dev",
}

# Libraries without a .pc file: (header, static library, Debian package).
# Intel's decimal floating-point library (decimal128 arithmetic, as mongod
# uses) ships only static archives; libbidgcc000 is the build with
# arguments by value and no global rounding mode or flags (bsonx/decimal.c).
STATIC_LIBRARIES = [
    ("bid_functions.h", "libbidgcc000.a", "libintelrdfpmath-dev"),
]
# C++ libraries without a .pc file: (header, shared library to link, Debian
# package).  Google's S2 geometry (2dsphere: cells, coverings, spherical
# predicates, as mongod uses it) is reached only from the C++ files of
# csrc/ (query/geo_s2.cc), which give the C core a C interface.
CXX_LIBRARIES = [
    ("s2/s2cell_id.h", "s2", "libs2-dev"),
    # what the S2 headers' inline code calls (a sanitized build keeps it)
    ("absl/base/internal/raw_logging.h", "absl_raw_logging_internal", "libabsl-dev"),
    # Snowball's stemmers (the text index, csrc/query/text.c): a C library,
    # also without a .pc file
    ("libstemmer.h", "stemmer", "libstemmer-dev"),
]
STATIC_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
               "/usr/lib", "/usr/local/lib"]
HEADER_DIRS = ["/usr/include", "/usr/local/include"]


def _env(name):
    return os.environ.get(name, "") not in ("", "0", "false", "no")


def _pkg_config(*args):
    return subprocess.run(
        ["pkg-config", *args], capture_output=True, text=True, check=False
    )


def find_libraries():
    """Return (include_dirs, library_dirs, libraries) from pkg-config."""
    if shutil.which("pkg-config") is None:
        sys.exit("error: pkg-config not found: install the Debian package 'pkg-config'")
    missing = [
        f"{name} (Debian package: {deb})"
        for name, deb in LIBRARIES.items()
        if _pkg_config("--exists", name).returncode != 0
    ]
    static_objects, static_missing = find_static_libraries()
    static_missing += find_cxx_libraries()
    missing += [f"{lib} (Debian package: {deb})" for lib, deb in static_missing]
    if missing:
        debs = " ".join(dict.fromkeys([LIBRARIES[m.split()[0]] for m in missing if m.split()[0] in LIBRARIES]
                        + [deb for _, deb in static_missing]))
        sys.exit(
            "error: missing C libraries: " + ", ".join(missing)
            + f"\n  install them with: apt-get install {debs}"
        )
    names = list(LIBRARIES)
    cflags = _pkg_config("--cflags", *names).stdout.split()
    libs = _pkg_config("--libs", *names).stdout.split()
    include_dirs = [f[2:] for f in cflags if f.startswith("-I")]
    library_dirs = [f[2:] for f in libs if f.startswith("-L")]
    libraries = ([f[2:] for f in libs if f.startswith("-l")]
                 + [lib for _, lib, _ in CXX_LIBRARIES] + ["stdc++", "m"])
    return include_dirs, library_dirs, libraries, static_objects


def find_static_libraries():
    """Return (archives found, [(library, Debian package) missing])."""
    found, missing = [], []
    for header, archive, deb in STATIC_LIBRARIES:
        has_header = any(Path(d, header).exists() for d in HEADER_DIRS)
        paths = [Path(d, archive) for d in STATIC_DIRS if Path(d, archive).exists()]
        if has_header and paths:
            found.append(str(paths[0]))
        else:
            missing.append((archive, deb))
    return found, missing


def find_cxx_libraries():
    """Return [(library, Debian package) missing] of CXX_LIBRARIES."""
    missing = []
    for header, lib, deb in CXX_LIBRARIES:
        has_header = any(Path(d, header).exists() for d in HEADER_DIRS)
        has_lib = any(Path(d, f"lib{lib}.so").exists() for d in STATIC_DIRS)
        if not (has_header and has_lib):
            missing.append((f"lib{lib}", deb))
    return missing


def cxx_sources():
    """Every .cc file under csrc/ (the C++ shims over C++ libraries), in
    the extension and the test binary alike."""
    return [str(p.relative_to(ROOT)) for p in sorted(CSRC.rglob("*.cc"))]


def cxx_compiler():
    """The C++ compiler command (a list): $CXX, else g++."""
    return (os.environ.get("CXX") or "g++").split()


def cxx_flags(sanitize):
    """C++ flags matching compile_flags: hidden symbols, the same warnings
    that apply to C++, -Werror and the sanitizers as asked.  NDEBUG is
    defined: the S2 and Abseil headers' debug checks call Abseil's logging
    library, which libs2 does not link (the shims' own checks are their
    status returns, not asserts)."""
    flags = ["-std=c++17", "-fPIC", "-fvisibility=hidden", "-D_GNU_SOURCE", "-DNDEBUG",
             "-Wall", "-Wextra", "-Wshadow", "-Wno-missing-field-initializers"]
    flags += ["-O0", "-g"] if _env("MULTIFORA_DEBUG") else ["-O2", "-g"]
    if _env("MULTIFORA_WERROR"):
        flags.append("-Werror")
    if sanitize:
        flags += SANITIZE
    return flags


def compile_cxx(objdir, include_dirs, sanitize, macros=()):
    """Compile cxx_sources() into `objdir` (again only when a source or a
    header is newer than its object) and return the object paths.  setuptools
    would hand .cc files to the C compiler with the C flags (-std=c11), so
    they are compiled here with their own."""
    deps = [ROOT / h for h in headers()]
    newest_dep = max((p.stat().st_mtime for p in deps), default=0)
    objects = []
    for src in cxx_sources():
        obj = Path(objdir, src).with_suffix(".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        src_path = ROOT / src
        cmd = [*cxx_compiler(), *cxx_flags(sanitize), *[f"-I{d}" for d in include_dirs],
               *[f"-D{m}={v}" for m, v in macros], "-c", str(src_path), "-o", str(obj)]
        # the command beside the object: other flags rebuild it too
        cmd_file = obj.with_suffix(".cmd")
        same_cmd = cmd_file.exists() and cmd_file.read_text() == " ".join(cmd)
        if (not same_cmd or not obj.exists()
                or obj.stat().st_mtime < max(src_path.stat().st_mtime, newest_dep)):
            print(" ".join(cmd))
            subprocess.run(cmd, check=True)
            cmd_file.write_text(" ".join(cmd))
        objects.append(str(obj))
    return objects


def c_sources(with_tests):
    """Every .c file under csrc/, the py/ layer only in the extension and
    the test/ folder only in the test binary."""
    out = []
    for path in sorted(CSRC.rglob("*.c")):
        layer = path.relative_to(CSRC).parts[0]
        if layer == "py" and with_tests:
            continue
        if layer == "test" and not with_tests:
            continue
        out.append(str(path.relative_to(ROOT)))
    return out


WARNINGS = ["-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wno-missing-field-initializers"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
            "-fno-sanitize-recover=undefined"]


def compile_flags(sanitize):
    flags = ["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden", *WARNINGS]
    flags += ["-O0", "-g"] if _env("MULTIFORA_DEBUG") else ["-O2", "-g"]
    if _env("MULTIFORA_WERROR"):
        flags.append("-Werror")
    if sanitize:
        flags += SANITIZE
    return flags


def compiler_supports_sanitizers(cc):
    """Whether the compiler command `cc` (a list: "ccache gcc" is two words)
    links a sanitized program."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "t.c")
        src.write_text("int main(void) { return 0; }\n")
        r = subprocess.run([*cc, *SANITIZE, str(src), "-o", str(Path(d, "t"))],
                           capture_output=True, check=False)
        return r.returncode == 0


class BuildExt(build_ext):
    """build_ext that also builds the C test binary beside the extension."""

    def build_extensions(self):
        # Python's own CFLAGS may carry -O3/-DNDEBUG; ours come after and win
        # where they conflict, and asserts stay on (they are the spec).
        include_dirs = find_libraries()[0]
        for ext in self.extensions:
            ext.undef_macros = ["NDEBUG"]
            ext.extra_objects = compile_cxx(os.path.join(self.build_temp, "cxx"), include_dirs,
                                            _env("MULTIFORA_SANITIZE")) + ext.extra_objects
        super().build_extensions()
        self.build_ctest()

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        built = Path(self.build_lib, "multifora", "_ctest")
        if built.exists():
            shutil.copy2(built, ROOT / "multifora" / "_ctest")

    def get_outputs(self):
        return super().get_outputs() + [str(Path(self.build_lib, "multifora", "_ctest"))]

    def build_ctest(self):
        include_dirs, library_dirs, libraries, static_objects = find_libraries()
        # the whole command up to its first option: "ccache gcc" stays whole
        cc = list(itertools.takewhile(lambda w: not w.startswith("-"),
                                      self.compiler.compiler_so))
        sanitize = compiler_supports_sanitizers(cc)
        flags = compile_flags(sanitize)
        objdir = os.path.join(self.build_temp, "ctest")
        objects = self.compiler.compile(
            c_sources(with_tests=True), output_dir=objdir,
            include_dirs=include_dirs, extra_postargs=flags,
            macros=[("MF_TEST_BUILD", "1")], depends=headers(),
        )
        objects += compile_cxx(os.path.join(self.build_temp, "ctest_cxx"), include_dirs,
                               sanitize, macros=[("MF_TEST_BUILD", "1")])
        ext_path = Path(self.get_ext_fullpath("multifora._core"))
        out_dir = str(ext_path.parent)
        link = ["-pthread"] + (SANITIZE if sanitize else [])
        # link_executable uses the linker_exe (cc), not the shared-object linker.
        self.compiler.link_executable(
            objects + static_objects, "_ctest", output_dir=out_dir, libraries=libraries,
            library_dirs=library_dirs, extra_postargs=link,
        )


def headers():
    return [str(p.relative_to(ROOT)) for pat in ("*.h", "*.def", "*.map") for p in CSRC.rglob(pat)]


def extension():
    include_dirs, library_dirs, libraries, static_objects = find_libraries()
    sanitize = _env("MULTIFORA_SANITIZE")
    return Extension(
        "multifora._core",
        sources=c_sources(with_tests=False),
        depends=headers() + cxx_sources(),
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        libraries=libraries,
        extra_objects=static_objects,
        extra_compile_args=compile_flags(sanitize),
        # the static decimal library's symbols stay inside, and so do the C++
        # template instances: one export (csrc/py/exports.map)
        extra_link_args=["-pthread", "-Wl,--exclude-libs,ALL",
                         f"-Wl,--version-script={CSRC / 'py' / 'exports.map'}"]
                        + (SANITIZE if sanitize else []),
    )


setup(ext_modules=[extension()], cmdclass={"build_ext": BuildExt})
