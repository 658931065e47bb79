#!/bin/sh
# A base image for the Dockerfile made without a registry, for machines that cannot pull
# node:20-bookworm-slim (docs/deploy.md, "Check the image"): a Debian bookworm root file system
# from apt (debootstrap), this machine's Node 20 and npm, and a `node` user (uid 1000), imported
# into the container engine as $BASE_TAG. Needs root, debootstrap and Node 20 on a glibc host.
#
#   sh scripts/container-base.sh    # then: BASE_IMAGE=localhost/prefixmesh-base:node20-bookworm
set -eu

TAG=${BASE_TAG:-localhost/prefixmesh-base:node20-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
die() { echo "container-base: $*" >&2; exit 1; }

if [ -n "${CONTAINER_ENGINE:-}" ]; then ENGINE=$CONTAINER_ENGINE
elif command -v podman >/dev/null 2>&1; then ENGINE=podman
elif command -v docker >/dev/null 2>&1; then ENGINE=docker
else die "no container engine (podman or docker) to import the image into"; fi
[ "$(id -u)" = 0 ] || die "debootstrap needs root"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing (apt-get install debootstrap)"
NODE=$(command -v node) || die "node is missing"
case "$("$NODE" --version)" in v20.*) ;; *) die "node on PATH is $("$NODE" --version), not 20";; esac
NPM_DIR=$("$NODE" -e 'console.log(require("path").resolve(process.execPath, "../../lib/node_modules/npm"))')
[ -f "$NPM_DIR/bin/npm-cli.js" ] || die "npm not found next to node (looked in $NPM_DIR)"

ROOT=$(mktemp -d /tmp/prefixmesh-base.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
echo "container-base: debootstrap bookworm (minbase) from $MIRROR into $ROOT"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 \
  || { tail -20 "$ROOT.log" >&2; die "debootstrap failed (log: $ROOT.log)"; }
rm -f "$ROOT.log"
cp "$NODE" "$ROOT/usr/local/bin/node"
mkdir -p "$ROOT/usr/local/lib/node_modules"
cp -a "$NPM_DIR" "$ROOT/usr/local/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$ROOT/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$ROOT/usr/local/bin/npx"
chroot "$ROOT" /usr/local/bin/node --version >/dev/null || die "node does not run in the new root"
chroot "$ROOT" groupadd -g 1000 node
chroot "$ROOT" useradd -u 1000 -g node -m -s /bin/sh node
chroot "$ROOT" apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/*

# npm in the build must trust what npm here trusts (e.g. an egress proxy's CA): a certificate, no key.
set -- --change 'CMD ["node"]'
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  mkdir -p "$ROOT/usr/local/share/prefixmesh-base"
  cp "$NODE_EXTRA_CA_CERTS" "$ROOT/usr/local/share/prefixmesh-base/extra-ca.crt"
  set -- "$@" --change 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/prefixmesh-base/extra-ca.crt'
fi
tar -C "$ROOT" -c . | "$ENGINE" import "$@" - "$TAG" >/dev/null
echo "container-base: imported $TAG into $ENGINE ($("$NODE" --version), uid 1000 node)"
