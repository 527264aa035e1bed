#!/bin/bash
# The sysroot of a cross build (`make deps ARCH=arm64`): Debian's -dev
# packages of the target architecture and their whole closure (C library
# included), unpacked into DIR/sysroot rather than installed, so the
# machine's dpkg never learns a foreign architecture and its own -dev
# packages are never moved to the target's versions (multiarch requires
# both architectures of a library at one version); and the BTF of one of
# the target's kernels, DIR/vmlinux.btf, which the build turns into the BPF
# programs' vmlinux.h.
#
#   tools/cross_sysroot.sh ARCH DIR KERNEL_PACKAGE=VERSION PACKAGE...
#
# Idempotent: nothing is fetched again while the closure's versions and the
# kernel stay the same. The kernel's .deb goes where the kernel matrix keeps
# its own (KT_CACHE, tests/kernels/run.sh), which boots the same kernel.
set -euo pipefail

[ $# -ge 4 ] || { echo "usage: $0 ARCH DIR KERNEL_PACKAGE=VERSION PACKAGE..." >&2; exit 2; }
arch=$1 dir=$(realpath -m "$2") kernel=$3
shift 3
here=$(dirname "$0")
# shellcheck source=tools/debian_apt.sh
. "$here/debian_apt.sh"
die() { echo "cross_sysroot: $*" >&2; exit 1; }

mkdir -p "$dir/debs"
debian_apt "$dir/apt" "$arch"

# The closure, as "package=version" lines: what installing the packages on
# an empty root would install.
closure() {
  apt-get -s --no-install-recommends "${DEBIAN_APT[@]}" install "$@" 2> /dev/null |
    awk '/^Inst / { gsub(/[()]/, "", $3); print $2 "=" $3 }' | sort
}
want=$(closure "$@")
[ -n "$want" ] || { debian_apt_update; want=$(closure "$@"); }
[ -n "$want" ] || die "apt resolves none of $* for $arch"
if [ "$(cat "$dir/sysroot/.closure" 2> /dev/null)" = "$want
$kernel" ] && [ -s "$dir/vmlinux.btf" ]; then
  exit 0
fi

fetch() { (cd "$1" && apt-get -qq "${DEBIAN_APT[@]}" download "${@:2}"); }
echo "cross_sysroot: $(wc -l <<< "$want") $arch packages into $dir/sysroot"
rm -f "$dir"/debs/*.deb
# Indexes older than the mirror name versions it no longer has (a security
# update since): fetched again, the closure is resolved again.
# shellcheck disable=SC2086 # one word per package=version
fetch "$dir/debs" $want || { debian_apt_update && want=$(closure "$@") && fetch "$dir/debs" $want; } ||
  die "cannot download the $arch packages (apt-get download failed)"
stamp="$want
$kernel"
rm -rf "$dir/sysroot.tmp"
for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/sysroot.tmp"; done
# The -dev packages' links to their libraries are absolute
# (libz.so -> /lib/aarch64-linux-gnu/libz.so.1): inside the sysroot they
# would name the machine's own. Relative, they stay inside it.
(cd "$dir/sysroot.tmp" && find . -type l -lname '/*' | while read -r link; do
  target=$(readlink "$link")
  ln -sfn "$(realpath -ms --relative-to="$(dirname "$link")" ".$target")" "$link"
done)

# The kernel: its Image carries the BTF the build needs.
cache=${KT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ringside/kernels}
kdeb=$(debian_deb "$cache/debs" "${kernel%%=*}" "${kernel#*=}" "$arch" "$dir/apt") ||
  die "$kernel is not in the archive any more: pin the suite's current version"
rm -rf "$dir/kernel.tmp" && mkdir -p "$dir/kernel.tmp"
dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$dir/kernel.tmp" --wildcards './boot/vmlinuz-*'
python3 "$here/image_btf.py" "$dir/kernel.tmp"/boot/vmlinuz-* "$dir/vmlinux.btf.tmp"
mv "$dir/vmlinux.btf.tmp" "$dir/vmlinux.btf"
rm -rf "$dir/kernel.tmp" "$dir/sysroot"
echo "$stamp" > "$dir/sysroot.tmp/.closure"
mv "$dir/sysroot.tmp" "$dir/sysroot"
rm -f "$dir"/debs/*.deb
