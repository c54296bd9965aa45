#!/usr/bin/env bash
# The Debian base the images build FROM (`make base-image`): debian:bookworm-slim as a normal
# Docker host pulls it; where no registry answers (CI's machines), the same name made here:
# debootstrap from the Debian mirror apt uses, with the packages the Dockerfiles would install
# already in (their containers cannot reach the mirror), then `docker import`. The root file
# system's tarball is kept in the cache directory, so a second run only imports it.
set -euo pipefail
IMAGE=debian:bookworm-slim
CACHE=${CDC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cdc}
# What deploy/docker/*.Dockerfile apt-get install (keep the lists equal).
PACKAGES=mariadb-server,mariadb-client,python3,python3-venv,ca-certificates,procps
# Files no container of ours reads (docs, manuals, translations, MariaDB's offline table tools):
# the engine CI runs copies an image's whole tree for each container it starts (vfs), so every
# megabyte here is paid again at each start.
STRIP="usr/share/doc usr/share/man usr/share/info usr/share/locale usr/share/i18n usr/share/zoneinfo
  usr/bin/aria_* usr/bin/myisam* usr/bin/mariadb-slap usr/bin/mariadb-import usr/bin/mariadb-show
  usr/bin/mariadb-check usr/bin/mariadb-upgrade usr/bin/mariadb-conv usr/bin/mariadb-tzinfo-to-sql
  usr/bin/innochecksum usr/bin/perror usr/bin/mariadb-plugin usr/bin/mariadb-embedded
  usr/bin/mariadb-test* usr/bin/mysql_embedded usr/lib/python3.11/test usr/share/mysql/mroonga
  usr/lib/mysql/plugin/ha_mroonga.so usr/lib/mysql/plugin/ha_spider.so usr/lib/mysql/plugin/ha_connect.so"
TARBALL=$CACHE/debian-bookworm-cdc-$(echo "$PACKAGES $STRIP" | md5sum | cut -c1-8).tar

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
	exit 0
fi
if timeout 60 docker pull -q "$IMAGE" >/dev/null 2>&1; then
	echo "base-image: pulled $IMAGE"
	exit 0
fi
if [ ! -s "$TARBALL" ]; then
	command -v debootstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
	# The mirror of apt's first bookworm source (deb822 `URIs:` or a one-line `deb` entry).
	mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null \
		| grep -oE '^(URIs:|deb) +https?://[^ ]+' | grep -v security | head -1 | awk '{print $2}' || true)
	mirror=${mirror:-http://deb.debian.org/debian}
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	echo "base-image: no registry; debootstrap bookworm from $mirror (about a minute or two)"
	debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$mirror" >"$root.log" 2>&1 \
		|| { tail -20 "$root.log" >&2; exit 1; }
	rm -f "$root.log"
	# What a slim image leaves out: the package lists and caches.
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
	for path in $STRIP; do rm -rf "$root"/$path; done
	chmod 755 "$root" # (mktemp's 700 would be the image's /: no other user could reach a file)
	mkdir -p "$CACHE"
	tar -C "$root" -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
fi
docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'CMD ["bash"]' "$TARBALL" "$IMAGE" >/dev/null
echo "base-image: $IMAGE imported from $TARBALL"
