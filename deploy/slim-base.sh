#!/bin/sh
# Slim the base image's file system in the Dockerfile's `runtime-root` stage, with the slimmed virtualenv copied
# to VENV (its extension modules are among what the shared libraries serve). The final stage copies the result
# in one layer (docs/performance.md, "Image").
#
#   sh deploy/slim-base.sh /opt/venv
#
# 1. Removes what a running gateway never reads: documentation, manual pages, translations, apt, Perl, glibc's
#    iconv modules (Python's codecs are its own), apt's keyrings, debconf, Debian's Python packaging helpers,
#    logs and caches.
# 2. The standard library: drops the parts nothing can import here or nothing here imports (the test suite and
#    the test extension modules, lib2to3, pydoc's topic texts, ensurepip, turtle, curses, dbm.ndbm, nis,
#    ossaudiodev, crypt), then keeps it as bytecode only, like the dependencies: each module's .pyc beside where
#    its source was, so a traceback still names the file and line.
# 3. Commands: keeps Python, the POSIX shell (dash) and what the entrypoint, the image's own build steps and an
#    operator's `docker exec` / `kubectl exec` / `kubectl cp` (tar) use: KEEP_COMMANDS. The rest of /usr/bin and
#    /usr/sbin goes (bash, dpkg's and util-linux's tools, user administration, file system tools, ...);
#    /usr/local is not touched.
# 4. Shared libraries: keeps the closure of what the kept commands and every extension module (the standard
#    library's and the virtualenv's) link, listed by the dynamic loader itself (`ld.so --list`), plus what glibc
#    and OpenSSL load by name at run time (libgcc_s, the NSS modules, OpenSSL's providers and engines); deletes
#    the rest of the multiarch library directory and rebuilds the loader's cache.
#
# dpkg's database keeps what image scanners read: the status file (every package and its version), each
# package's file list and checksums, conffiles and maintainer scripts. Dropped from it: the shared libraries'
# symbol and shlibs files (only dpkg-shlibdeps reads them, building packages) and debconf's templates, scripts
# and cache (debconf is Perl, and Perl is gone). A package whose files were removed here is still listed: a
# scanner may report an advisory for a file that is not in the image, never miss one for a file that is.
set -eu

venv="${1:?usage: slim-base.sh VENV}"
[ -d "$venv" ] || { echo "slim-base: no virtualenv at $venv" >&2; exit 1; }
python="$(readlink -f "$(command -v python3)")"  # Debian's /usr/bin/python3.11, or python:*-slim's /usr/local/bin
multiarch="$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH"))')"
stdlib="$("$python" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
libdir="/usr/lib/$multiarch"
loader="$(readlink -f "$libdir"/ld-linux*.so.* | head -n 1)"
[ -x "$loader" ] || { echo "slim-base: no dynamic loader in $libdir" >&2; exit 1; }
keep="$(mktemp)"  # absolute paths (commands, libraries) that stay, one a line

# ---------------------------------------------------------------------------------- 1. never read
rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/lintian \
    /usr/share/bash-completion /usr/share/gcc /usr/share/gdb /usr/share/bug /usr/share/keyrings \
    /var/lib/apt /var/cache/apt /var/log/* /root/.cache /etc/apt /usr/lib/apt \
    /usr/share/perl5 "$libdir/perl-base" "$libdir/gconv" /usr/share/python-wheels /usr/share/python3 \
    /var/cache/debconf /usr/share/debconf
find /var/lib/dpkg/info -type f \( -name '*.symbols' -o -name '*.shlibs' -o -name '*.templates' -o -name '*.config' \) \
    -delete

# ---------------------------------------------------------------------------------- 2. the standard library
(
    cd "$stdlib"
    rm -rf test lib2to3 pydoc_data ensurepip turtle.py turtledemo idlelib tkinter curses dbm/ndbm.py crypt.py \
        __phello__ __hello__.py
    rm -f lib-dynload/_test*.so lib-dynload/_ctypes_test.*.so lib-dynload/_xxtestfuzz.*.so lib-dynload/xxlimited*.so \
        lib-dynload/_curses*.so lib-dynload/_dbm.*.so lib-dynload/nis.*.so lib-dynload/ossaudiodev.*.so \
        lib-dynload/_crypt.*.so
)
find "$stdlib" -depth -type d -name __pycache__ -exec rm -rf {} +
"$python" -m compileall -q -b -j 0 "$stdlib"
find "$stdlib" \( -type f -o -type l \) -name '*.py' -delete

# ---------------------------------------------------------------------------------- 3. commands (which stay)
# The entrypoint: sh, find, mkdir, tr, python. The Dockerfile's last step: chmod, chown, mkdir, python. The
# image smoke: id, sh. The gateway user's shell: nologin. An operator: the rest.
KEEP_COMMANDS="python3 $(basename "$python") sh dash find mkdir tr chmod chown id nologin \
    awk mawk basename cat chgrp cp cut date df dirname du echo env expr false getent grep head hostname ln ls \
    mktemp mv nproc printenv printf pwd readlink realpath rm rmdir sed sleep sort stat tail tar tee test [ \
    timeout touch true uname uniq wc which which.debianutils whoami xargs"
for path in /usr/bin/* /usr/sbin/*; do
    case " $KEEP_COMMANDS " in
        *" $(basename "$path") "*) printf '%s\n%s\n' "$path" "$(readlink -f "$path")" >>"$keep" ;;
    esac
done

# ---------------------------------------------------------------------------------- 4. shared libraries
{
    echo "$python"
    grep -E '^/usr/s?bin/' "$keep" | sort -u
    find "$stdlib/lib-dynload" "$venv" -type f \( -name '*.so' -o -name '*.so.*' \)
    ls -d "$libdir"/libgcc_s.so.* "$libdir"/libnss_*.so.* "$libdir"/ossl-modules/* "$libdir"/engines-*/* 2>/dev/null || true
} >"$keep.roots"
while read -r root; do
    case "$root" in "$libdir"/*) echo "$root" ;; esac
    # "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)";
    # a file that is not a dynamic ELF object (a script, a static binary) lists nothing.
    "$loader" --list "$root" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' || true
done <"$keep.roots" | sort -u | while read -r lib; do
    echo "$(readlink -f "$(dirname "$lib")")/$(basename "$lib")"  # the soname link, in /usr/lib
    readlink -f "$lib"                                              # the file it names
done >>"$keep"
find "$libdir" \( -type f -o -type l \) | while read -r path; do
    grep -qxF "$path" "$keep" || rm -f "$path"
done
find "$libdir" -depth -mindepth 1 -type d -empty -delete
ldconfig

# ---------------------------------------------------------------------------------- 3. commands (the rest go)
for path in /usr/bin/* /usr/sbin/*; do
    grep -qxF "$path" "$keep" || rm -f "$path"
done
rm -f "$keep" "$keep.roots"
