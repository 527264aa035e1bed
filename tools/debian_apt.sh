# A private apt configuration for Debian's archive (sourced, bash): the
# kernel matrix's pinned kernels (tests/kernels/run.sh) and a cross build's
# sysroot (tools/cross_sysroot.sh) download .debs with it. The machine's
# own sources, preferences, dpkg status and architectures are never read or
# changed: everything apt keeps is under the directory given.
#
#   debian_apt DIR ARCH     sets DEBIAN_APT (apt-get's options) for ARCH's
#                           packages, its state in DIR; refreshes the indexes
#                           when DIR has none or its suites changed
#   debian_apt_update       fetches the indexes again (a download that 404s
#                           after the mirror moved on)
#   debian_deb DEBS PACKAGE VERSION ARCH APT_DIR
#                           prints the path of PACKAGE's .deb at VERSION in
#                           DEBS, downloaded there unless it already is
#
# The suites: bullseye, bookworm with its updates and security fixes (so
# that a library's version is the one an up-to-date bookworm machine has),
# and bookworm-backports, whose packages apt takes only when asked for by
# version. The dpkg status is an empty file of DIR's: an install simulated
# with these options lists a package's whole closure, as on an empty root.

# shellcheck shell=bash
DEBIAN_APT=()

debian_apt() {
  local dir arch=$2 key=/usr/share/keyrings/debian-archive-keyring.gpg
  dir=$(realpath -m "$1")
  mkdir -p "$dir/state/lists/partial" "$dir/cache/archives/partial" "$dir/parts"
  [ -e "$dir/status" ] || : > "$dir/status"
  local m=http://deb.debian.org/debian s=http://deb.debian.org/debian-security sources
  sources="deb [arch=$arch signed-by=$key] $m bullseye main
deb [arch=$arch signed-by=$key] $m bookworm main
deb [arch=$arch signed-by=$key] $m bookworm-updates main
deb [arch=$arch signed-by=$key] $s bookworm-security main
deb [arch=$arch signed-by=$key] $m bookworm-backports main"
  # The parts directories are an empty one of DIR's, and the preferences a
  # file DIR never has: apt would read the machine's otherwise. As root, apt
  # downloads as root into DIR, which its _apt user may not reach (and says
  # so unless told); it needs no root.
  DEBIAN_APT=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::Etc::sourceparts=$dir/parts"
    -o "Dir::Etc::preferences=$dir/preferences" -o "Dir::Etc::preferencesparts=$dir/parts"
    -o "Dir::State=$dir/state"
    -o "Dir::State::status=$dir/status" -o "Dir::Cache=$dir/cache"
    -o "APT::Architecture=$arch" -o "APT::Architectures=$arch" -o "APT::Sandbox::User=root"
    -o "Acquire::Languages=none")
  if [ "$(cat "$dir/sources.list" 2> /dev/null)" != "$sources" ] ||
    ! compgen -G "$dir/state/lists/*Packages*" > /dev/null; then
    echo "$sources" > "$dir/sources.list"
    debian_apt_update
  fi
}

debian_apt_update() {
  apt-get -qq "${DEBIAN_APT[@]}" update
}

# Downloads with debian_apt APT_DIR ARCH unless DEBIAN_APT is set already;
# fetches the indexes again once should the download fail. Fails when the
# archive no longer has that version.
debian_deb() {
  local debs=$1 pkg=$2 version=$3 arch=$4 deb
  deb="$debs/${pkg}_${version//:/%3a}_$arch.deb"
  if [ ! -f "$deb" ]; then
    [ ${#DEBIAN_APT[@]} -gt 0 ] || debian_apt "$5" "$arch" >&2
    mkdir -p "$debs"
    local get=(apt-get -qq "${DEBIAN_APT[@]}" download "$pkg=$version")
    (cd "$debs" && "${get[@]}") >&2 || { debian_apt_update >&2 && (cd "$debs" && "${get[@]}") >&2; } ||
      return 1
  fi
  echo "$deb"
}
