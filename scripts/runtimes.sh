#!/usr/bin/env bash
# Prepares this machine for the container runtimes beside Docker's runc
# (the runtimes study: gVisor, crun, Podman rootful and rootless, LXC).
# setup.sh runs it; every change it makes to the host is said as it is made.
#
#   runtimes.sh host         register runsc and crun with dockerd, mount a
#                            hybrid layout's v2 controllers on v1, make the
#                            rootless user, open /dev/net/tun
#   runtimes.sh images REF   copy the workload image REF into Podman's
#                            storage, rootful and rootless (nearnative would
#                            do it at a run's first Podman trial otherwise)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

# The dedicated unprivileged user rootless Podman runs as
# (internal/platforms/podman; NEARNATIVE_ROOTLESS_USER names another).
ROOTLESS_USER=${NEARNATIVE_ROOTLESS_USER:-nearnative-rootless}

host() {
  # Docker: runsc and crun must be registered with dockerd (Docker 20.10
  # runs only registered runtimes). register-runtimes adds them to the
  # "runtimes" of dockerd's configuration file, keeping every other setting
  # (and a backup of the file), and says what it changed; dockerd reloads
  # "runtimes" on SIGHUP, so no container stops.
  if out=$(go run ./scripts/register-runtimes); then
    say "docker runtimes: $out"
    if ! grep -q "nothing changed" <<<"$out"; then
      if [ -d /run/systemd/system ] && systemctl is-active --quiet docker; then
        systemctl reload docker
        say "reloaded docker.service (SIGHUP) so that dockerd reads its new runtimes"
      elif pid=$(cat /var/run/docker.pid 2>/dev/null) && [ -n "$pid" ]; then
        # The daemon of the default socket (its pidfile): other dockerds
        # (a test bed host's) have pidfiles of their own.
        kill -HUP "$pid"
        say "sent dockerd (pid $pid) SIGHUP so that it reads its new runtimes"
      fi
      for _ in $(seq 1 20); do
        docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' && break
        sleep 0.5
      done
    fi
    docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' || say "warning: dockerd does not list runsc after the reload: see its log"
  else
    say "warning: the docker-runsc-* and docker-crun-* platforms stay unavailable until runsc and crun are registered (see above and docs/runtimes.md)"
  fi

  # crun (Docker's docker-crun-* and Podman's default runtime) refuses a
  # hybrid cgroup layout whose v2 mount holds controllers: each is mounted
  # on a v1 hierarchy of its own instead (not kept across a reboot; setup
  # mounts it again). The file is read, not tested with -s: cgroupfs files
  # report a size of 0, so `[ -s ]` never held and nothing was mounted.
  v2ctl=""
  if [ ! -f /sys/fs/cgroup/cgroup.controllers ] && [ -f /sys/fs/cgroup/unified/cgroup.controllers ]; then
    v2ctl=$(cat /sys/fs/cgroup/unified/cgroup.controllers)
  fi
  if [ -n "$v2ctl" ]; then
    for c in $v2ctl; do
      mkdir -p "/sys/fs/cgroup/$c"
      if mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"; then
        say "mounted the cgroup controller $c on v1 at /sys/fs/cgroup/$c (crun refuses it on the hybrid layout's v2 mount)"
      else
        say "warning: could not move the cgroup controller $c to v1; crun (docker-crun-*, podman) will refuse to start containers"
      fi
    done
  fi

  # Rootless Podman: a dedicated unprivileged user with subordinate uid and
  # gid ranges, Podman's overlay storage in its home, its runtime directory
  # under /run/user.
  if ! id "$ROOTLESS_USER" >/dev/null 2>&1; then
    useradd --create-home --shell /usr/sbin/nologin --comment "nearnative rootless Podman" "$ROOTLESS_USER"
    say "made the user $ROOTLESS_USER (no login shell) for rootless Podman"
  fi
  for f in subuid subgid; do
    if ! grep -q "^$ROOTLESS_USER:" "/etc/$f" 2>/dev/null; then
      # The first free range of 65536 ids above every range in the file.
      start=$(awk -F: 'BEGIN{m=100000} {e=$2+$3; if (e>m) m=e} END{print m}' "/etc/$f" 2>/dev/null || echo 100000)
      if [ "$f" = subuid ]; then usermod --add-subuids "$start-$((start + 65535))" "$ROOTLESS_USER"; else usermod --add-subgids "$start-$((start + 65535))" "$ROOTLESS_USER"; fi
      say "gave $ROOTLESS_USER the subordinate ${f#sub} range $start-$((start + 65535)) in /etc/$f"
    fi
  done
  uid=$(id -u "$ROOTLESS_USER")
  home=$(getent passwd "$ROOTLESS_USER" | cut -d: -f6)
  conf="$home/.config/containers/storage.conf"
  if [ ! -f "$conf" ]; then
    install -d -o "$ROOTLESS_USER" -g "$ROOTLESS_USER" "$home/.config" "$home/.config/containers"
    printf '[storage]\ndriver = "overlay"\nrunroot = "/run/user/%s/containers"\n' "$uid" >"$conf"
    chown "$ROOTLESS_USER:" "$conf"
    say "wrote $conf: the kernel's overlay storage driver (Podman would pick vfs, a full copy per container) and its runtime root"
  fi
  install -d -m 0700 -o "$ROOTLESS_USER" -g "$ROOTLESS_USER" "/run/user/$uid"
  # slirp4netns opens /dev/net/tun as the rootless user: 0666 is the mode
  # udev gives it on most distributions.
  if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
    was=$(stat -c %a /dev/net/tun)
    chmod 0666 /dev/net/tun
    say "chmod 0666 /dev/net/tun (was $was), so that rootless Podman's slirp4netns can open it"
  fi
}

images() {
  local ref=$1 id uid
  [ -n "$ref" ] || die "runtimes.sh images: which image?"
  id=$(docker image inspect -f '{{.Id}}' "$ref")
  if ! podman image exists "$id" 2>/dev/null; then
    say "copying $ref into Podman's storage (rootful)"
    docker save "$ref" | podman load -q >/dev/null
  fi
  uid=$(id -u "$ROOTLESS_USER")
  as_user() { (cd / && runuser -u "$ROOTLESS_USER" -- env HOME="$(getent passwd "$ROOTLESS_USER" | cut -d: -f6)" XDG_RUNTIME_DIR="/run/user/$uid" "$@"); }
  if ! as_user podman image exists "$id" 2>/dev/null; then
    say "copying $ref into $ROOTLESS_USER's Podman storage (rootless)"
    docker save "$ref" | as_user podman load -q >/dev/null
  fi
  # The podman commands above leave the user's pause process (it holds
  # rootless Podman's user namespace); nearnative's runs make their own.
  # It goes only when nothing else of the user runs (a run's service).
  if pid=$(cat "/run/user/$uid/libpod/tmp/pause.pid" 2>/dev/null) &&
    [ "$(ps -o pid= -u "$ROOTLESS_USER" | grep -vc "^ *$pid\$")" = 0 ]; then
    kill "$pid" 2>/dev/null || true
  fi
  say "Podman holds the workload image $id (rootful and rootless)"
}

case "${1:-}" in
  host) host ;;
  images) images "${2:-}" ;;
  *) die "usage: runtimes.sh host | runtimes.sh images REF" ;;
esac
