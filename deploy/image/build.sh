#!/usr/bin/env bash
# Builds the pyccm image from the Containerfile with buildah and saves it as an OCI archive
# (`make image`; deploy/image/README.md).
#
#   deploy/image/build.sh                 # on local Debian bases made here (no registry)
#   PYTHON_IMAGE=python:3.11-slim deploy/image/build.sh   # on a base pulled from a registry
#
# Environment: PYCCM_IMAGE (tag, default localhost/pyccm:0.1.0), PYCCM_IMAGE_ARCHIVE (the
# OCI archive, default build/pyccm-image.oci.tar), PYTHON_IMAGE and RUNTIME_IMAGE (the
# Containerfile's bases; unset: the local ones below, made once per recipe and kept in
# buildah's storage).
#
# Needs buildah (and mmdebstrap for the local bases): installed with apt-get when missing
# and this runs as root; otherwise it stops with one line saying what to install.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TAG="${PYCCM_IMAGE:-localhost/pyccm:0.1.0}"
ARCHIVE="${PYCCM_IMAGE_ARCHIVE:-$REPO/build/pyccm-image.oci.tar}"
SUITE=bookworm  # Debian 12: Python 3.11, as python:3.11-slim
# The builder's base needs pip (the Containerfile's first step is `pip install uv`); the
# runtime's needs python3 alone (and CA certificates, as python:3.11-slim has).
BUILD_PACKAGES="python3,python3-pip,ca-certificates"
RUN_PACKAGES="python3,ca-certificates"
BASE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf 'image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

need() {  # need COMMAND PACKAGE
    command -v "$1" >/dev/null && return
    [ "$(id -u)" = 0 ] || die "$1 is missing: apt-get install -y $2 (as root), then run again"
    say "installing $2 (apt-get)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

# A Debian root with PACKAGES, committed as image TAG unless buildah already has it. Like
# python:3.11-slim: no documentation, pip (where included) installs into the system Python
# (Debian's EXTERNALLY-MANAGED marker removed: this Python is the image's alone).
make_base() {  # make_base TAG PACKAGES [HOOK]
    local tag="$1" packages="$2" hook="${3:-true}" work ctr
    if buildah inspect --type image "$tag" >/dev/null 2>&1; then
        say "base $tag: kept"
        return
    fi
    need mmdebstrap mmdebstrap
    say "base $tag: mmdebstrap $SUITE with $packages"
    work="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    # merged-usr: /usr merged by the hook, so apt takes usr-is-merged rather than usrmerge
    # (which brings the whole of perl, 50 MB, into the root).
    mmdebstrap --quiet --variant=minbase --include="$packages" \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
        --customize-hook="$hook" \
        "$SUITE" "$work/rootfs.tar"
    ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
    local env=(--env "PATH=$BASE_PATH" --env LANG=C.UTF-8) variable
    for variable in "${BASE_ENV[@]}"; do env+=(--env "$variable"); done
    buildah config "${env[@]}" --cmd python3 \
        --label "pyccm.base.packages=$packages" "$ctr"
    buildah commit --quiet --rm "$ctr" "$tag" >/dev/null
}

need buildah buildah
if [ -z "${PYTHON_IMAGE:-}" ]; then
    # The builder reaches PyPI the way this machine does: it trusts the certificate
    # authorities this machine added to Debian's (/usr/local/share/ca-certificates: a
    # TLS-intercepting proxy's, a company's), and so do pip and uv in it (SSL_CERT_FILE).
    # The runtime base trusts Debian's alone: the image carries no machine's CA.
    LOCAL_CAS=/usr/local/share/ca-certificates
    ca_hook="if [ -d $LOCAL_CAS ]; then cp -r $LOCAL_CAS/. \"\$1\"$LOCAL_CAS/ \
        && chroot \"\$1\" update-ca-certificates >/dev/null; fi"
    cas="$(cat "$LOCAL_CAS"/*.crt 2>/dev/null | sha256sum | cut -c1-8)"
    # The tags name the recipe: a changed package list (or CA) makes a new base.
    recipe="$(printf '%s\n' "$SUITE" "$BUILD_PACKAGES" "$cas" merged-usr | sha256sum | cut -c1-8)"
    PYTHON_IMAGE="localhost/pyccm-base:$SUITE-build-$recipe"
    BASE_ENV=(SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)
    make_base "$PYTHON_IMAGE" "$BUILD_PACKAGES" "$ca_hook"
    recipe="$(printf '%s\n' "$SUITE" "$RUN_PACKAGES" merged-usr | sha256sum | cut -c1-8)"
    RUNTIME_IMAGE="${RUNTIME_IMAGE:-localhost/pyccm-base:$SUITE-run-$recipe}"
    BASE_ENV=()
    make_base "$RUNTIME_IMAGE" "$RUN_PACKAGES"
    # Bases of earlier recipes: no longer used.
    buildah images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/pyccm-base:' \
        | grep -vxF -e "$PYTHON_IMAGE" -e "$RUNTIME_IMAGE" | xargs -r buildah rmi >/dev/null || true
fi
RUNTIME_IMAGE="${RUNTIME_IMAGE:-$PYTHON_IMAGE}"

say "building $TAG (builder $PYTHON_IMAGE, runtime $RUNTIME_IMAGE)"
buildah bud --quiet --isolation chroot --layers \
    --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" \
    -f "$REPO/Containerfile" -t "$TAG" "$REPO" >/dev/null
mkdir -p "$(dirname "$ARCHIVE")"
rm -f "$ARCHIVE"
buildah push --quiet "$TAG" "oci-archive:$ARCHIVE:$TAG"
say "saved $TAG to $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1))"
