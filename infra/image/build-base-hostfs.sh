#!/usr/bin/env bash
# Build the offline base image from the host's own files (no registry, no pull):
#   - the host's `node` and every library `ldd` lists (so a native addon built on this host,
#     better-sqlite3, loads unchanged in the container);
#   - busybox-static (sh, cat, awk, grep, nc, ... via `apt-get download`, never installed);
#   - ip (iproute2), nft (nftables) and iptables (xtables-nft-multi + extensions) for the NAT
#     router containers of the integration tests; taken from the host when installed, else
#     from their Debian packages (`apt-get download`, extracted here, the host is not changed);
#   - a minimal /etc (passwd, group, nsswitch.conf, CA bundle, protocols, services).
# The root filesystem is streamed into `docker import`.
#
#   infra/image/build-base-hostfs.sh [--force]
#
# Fast when cached: the inputs (this script + path, size and mtime of every copied file) are
# hashed into the image label org.hermes-mesh.base.inputs; a matching image is reused.
# Environment: HERMES_BASE_IMAGE (default hermes-mesh/base:hostfs).
set -euo pipefail

say() { printf '[build-base] %s\n' "$*" >&2; }
die() { printf '[build-base] ERROR: %s\n' "$*" >&2; exit 1; }

script_path=$(readlink -f "$0")
repo=$(cd "$(dirname "$script_path")/../.." && pwd)
tag=${HERMES_BASE_IMAGE:-hermes-mesh/base:hostfs}
work=$repo/infra/build/base
debs=$repo/infra/build/debs
extract=$debs/root
rootfs=$work/rootfs
manifest=$work/manifest.tsv
force=false
[ "${1:-}" = "--force" ] && force=true

[ "$(uname -s)" = Linux ] || die "the hostfs base needs a Linux host (it copies the host's node and glibc); use infra/Dockerfile elsewhere"
command -v docker >/dev/null || die "docker CLI not found; run scripts/ensure-docker.sh"
node_bin=$(command -v node) || die "node not found on PATH"
node_bin=$(readlink -f "$node_bin")

mkdir -p "$work" "$debs"
: >"$manifest"

# ---------------------------------------------------------------------------------------------
# Collect (source, destination) pairs; nothing is copied until we know the image is stale.

add() { printf '%s\t%s\n' "$1" "$2" >>"$manifest"; }

# add_libs_of LD_LIBRARY_PATH FILE...: every library the loader resolves for the files (one ldd call).
add_libs_of() {
  local ldpath=$1 out lib
  shift
  out=$(LD_LIBRARY_PATH=$ldpath ldd "$@" 2>&1) || true
  if grep -q 'not found' <<<"$out"; then
    die "$* need libraries this host lacks: $(grep 'not found' <<<"$out" | awk '{print $1}' | sort -u | tr '\n' ' ')(install the packages that provide them)"
  fi
  while read -r lib; do
    [ -n "$lib" ] || continue
    if [[ $lib == "$extract"/* ]]; then add "$lib" "${lib#"$extract"}"; else add "$lib" "$lib"; fi
  done < <(awk '/=> \// {print $3} /^[[:space:]]*\/.*\(0x/ {print $1}' <<<"$out")
}

# add_with_libs SRC DEST [LD_LIBRARY_PATH]: the file plus the libraries it needs.
add_with_libs() {
  add "$1" "$2"
  add_libs_of "${3:-}" "$1"
}

# fetch_debs PKG...: download (cached in infra/build/debs) and extract into infra/build/debs/root.
fetch_debs() {
  local pkg deb marker
  for pkg in "$@"; do
    if ! compgen -G "$debs/${pkg}_*.deb" >/dev/null; then
      say "apt-get download $pkg"
      if ! (cd "$debs" && apt-get download "$pkg" >/dev/null 2>&1); then
        if [ "$(id -u)" = 0 ]; then
          say "apt-get update (package lists missing or stale)"
          apt-get update >/dev/null 2>&1 || die "apt-get update failed"
          (cd "$debs" && apt-get download "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
        else
          die "apt-get download $pkg failed; run 'apt-get update' as root, or install $pkg on this host"
        fi
      fi
    fi
    deb=$(compgen -G "$debs/${pkg}_*.deb" | head -n1)
    marker=$extract/.extracted/$pkg
    if [ "$(cat "$marker" 2>/dev/null)" != "$deb" ]; then
      dpkg-deb -x "$deb" "$extract"
      mkdir -p "$extract/.extracted" && printf '%s\n' "$deb" >"$marker"
    fi
  done
}

# tool PATH PKG...: a binary from the host when present, else from the listed Debian packages.
tool() {
  local path=$1
  shift
  if [ -x "$path" ]; then
    add_with_libs "$(readlink -f "$path")" "$path"
  else
    fetch_debs "$@"
    [ -x "$extract$path" ] || die "$path not found in packages: $*"
    add_with_libs "$extract$path" "$path" "$extract/usr/lib/$multiarch:$extract/lib/$multiarch"
  fi
}

libc=$(ldd "$node_bin" | awk '/libc\.so/ {print $3}')
[ -n "$libc" ] || die "cannot find libc in 'ldd $node_bin'"
multiarch=$(basename "$(dirname "$libc")")

add_with_libs "$node_bin" /usr/local/bin/node
tool /usr/sbin/ip iproute2
tool /usr/sbin/nft nftables libnftables1
tool /usr/sbin/xtables-nft-multi iptables libip4tc2 libip6tc2 libxtables12
xt_dir=/usr/lib/$multiarch/xtables
if [ -d "$xt_dir" ]; then xt_src=$xt_dir; else xt_src=$extract$xt_dir; fi
[ -d "$xt_src" ] || die "iptables extensions ($xt_dir) not found"
for so in "$xt_src"/*.so; do add "$so" "$xt_dir/$(basename "$so")"; done
add_libs_of "$extract/usr/lib/$multiarch" "$xt_src"/*.so
fetch_debs busybox-static
add "$extract/bin/busybox" /usr/bin/busybox
for f in /etc/ssl/certs/ca-certificates.crt /etc/protocols /etc/services; do
  [ -f "$f" ] && add "$f" "$f"
done

sort -u -o "$manifest" "$manifest"

# ---------------------------------------------------------------------------------------------
# Cache check.

key=$({
  sha256sum "$script_path"
  cut -f2 "$manifest"
  cut -f1 "$manifest" | xargs -d '\n' stat -L -c '%n %s %Y'
} | sha256sum | cut -c1-32)

current=$(docker image inspect --format '{{ index .Config.Labels "org.hermes-mesh.base.inputs" }}' "$tag" 2>/dev/null || true)
if [ "$force" = false ] && [ "$current" = "$key" ]; then
  say "$tag is up to date (inputs $key)"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# Assemble the root filesystem. Debian 12 is merged-/usr: keep that shape so the paths ldd
# printed (/lib/x86_64-linux-gnu/..., /lib64/ld-linux-x86-64.so.2) resolve inside the image.

say "assembling root filesystem ($(wc -l <"$manifest") files)"
rm -rf "$rootfs"
mkdir -p "$rootfs"/usr/{bin,sbin,lib,lib64,local/bin} "$rootfs"/{etc,root,run,home,var} "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
chmod 700 "$rootfs/root"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$rootfs/$d"; done
ln -s ../run "$rootfs/var/run"
mkdir -p "$rootfs/var/tmp" && chmod 1777 "$rootfs/var/tmp"

while IFS=$'\t' read -r src dest; do
  mkdir -p "$rootfs$(dirname "$dest")"
  cp -L --preserve=mode "$src" "$rootfs$dest"
done <"$manifest"

for name in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore \
  iptables-nft iptables-nft-save iptables-nft-restore; do
  ln -sf xtables-nft-multi "$rootfs/usr/sbin/$name"
done

# busybox applets, where no real tool of the same name was copied (busybox's own `ip` would
# shadow iproute2's otherwise).
while read -r applet; do
  dest="$rootfs/usr/${applet#usr/}"
  [ -e "$dest" ] || [ -L "$dest" ] && continue
  mkdir -p "$(dirname "$dest")"
  ln -s /usr/bin/busybox "$dest"
done < <("$extract/bin/busybox" --list-full)

cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
printf 'hosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n' >"$rootfs/etc/nsswitch.conf"
printf '%s\n' "$key" >"$rootfs/etc/hermes-base-inputs"

previous=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
say "importing $tag ($(du -sh "$rootfs" | cut -f1))"
tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL org.hermes-mesh.base.inputs=$key" \
    --change 'WORKDIR /' \
    --change 'CMD ["node"]' \
    --message "hermes-mesh base from host files ($(node --version))" \
    - "$tag" >/dev/null
# The replaced image is now untagged; drop it unless something still uses it.
[ -n "$previous" ] && docker image rm "$previous" >/dev/null 2>&1 || true
say "built $tag (inputs $key)"
