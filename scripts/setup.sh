#!/usr/bin/env bash
# Installs everything nearnative needs on Debian 12 (bookworm), idempotently:
# the workload packages, the VM guest kernel (unpacked into nearnative's state
# directory, not installed: /boot is left alone), a Go toolchain new enough
# for this module, a running Docker daemon, the nearnative binary, the
# workload image (which compiles nearnative's benchmark programs) and what the
# other container runtimes need (scripts/runtimes.sh). Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }
trap 'printf "setup: failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

[ "$(id -u)" -eq 0 ] || die "run as root (sudo make setup): it installs packages and starts dockerd"
grep -q 'bookworm' /etc/os-release 2>/dev/null || say "warning: not Debian 12 (bookworm); continuing, but only bookworm is tested"

PACKAGES=(
  # servers and load generators of the built-in workloads
  redis-server redis-tools postgresql fio iperf3 sockperf
  nginx haproxy nutcracker
  # the application studies' tiers (DVD Store, CloudStone, the auction)
  apache2 libapache2-mod-php8.2 php8.2-cli php8.2-pgsql php8.2-fpm php8.2-mysql php8.2-gd
  mariadb-server mariadb-client openjdk-17-jre-headless tomcat10 rabbitmq-server
  # runtime libraries of nearnative's own benchmark programs (STREAM, LINPACK)
  libgomp1 libopenblas0-pthread
  # the JavaScript libraries the Olio site serves (copied into the site by
  # apps/olio on the host; not needed in the image)
  libjs-prototype libjs-scriptaculous
  # building the auction application (Maven), cross-checking our drivers (wrk, hey)
  openjdk-17-jdk-headless maven wrk hey
  # compiling nearnative's own benchmark programs (nearnative image build)
  gcc libc6-dev
  # platforms: containers, VMs, networks
  # (the VM guest kernel is not installed: vm-kernel.sh below unpacks it)
  docker.io qemu-system-x86 qemu-utils kmod debootstrap
  iproute2 iptables bridge-utils openvswitch-switch
  # capturing a client host's link when a latency needs explaining (BENCH.md)
  tcpdump
  # the test bed's hosts (`nearnative testbed up`): an sshd per network
  # namespace, started by nearnative with its own config, not as a service
  openssh-server
  # the local Kubernetes node (`nearnative cluster up`, not run by setup): a
  # private containerd with CRI, the CNI plugins, nft to remove empty tables
  containerd runc containernetworking-plugins nftables
  # the runtimes study's other container runtimes: gVisor (runsc) and crun
  # under Docker, Podman rootful and rootless (netavark and aardvark-dns its
  # network, slirp4netns the rootless network, uidmap's newuidmap and
  # newgidmap the rootless user namespace, catatonit its pause process and
  # --init), LXC. Podman 4.3.1 has no pasta network mode, so passt is not
  # needed.
  runsc crun podman netavark aardvark-dns slirp4netns uidmap catatonit lxc
  # what setup itself uses
  ca-certificates curl unzip git make procps util-linux e2fsprogs
  chromium  # headless browser: the HTML report test renders the report in it
)
# Services the packages start on installation: nearnative starts its own
# instances, so these are stopped and disabled (they would hold ports and
# disturb measurements).
SERVICES=(redis-server postgresql nginx haproxy nutcracker openvswitch-switch apache2 php8.2-fpm mariadb rabbitmq-server tomcat10
  lxc-net lxc)  # lxc-net: a bridge lxcbr0 and its dnsmasq; lxc: autostarted containers

# Setup installed openssh-server on a machine without an sshd: the system
# sshd it brought is stopped on every run of setup (remove this file to keep
# one you start yourself).
SSHD_MARK=/var/lib/nearnative/setup-installed-openssh-server
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${#missing[@]} package(s): ${missing[*]}"
  # Debian starts and enables sshd when openssh-server is installed: a
  # server on every address of the machine that the test bed does not need
  # (it starts its own sshd per namespace). When setup installed it, setup
  # stops it again. A machine that had an sshd before keeps it, also when
  # its openssh-server counts as missing above (held: "hold ok installed"),
  # so the test is the binary, looked at before installing.
  # The decision is written down before installing, so that a rerun after
  # an interrupted install (sshd installed and started, not yet stopped)
  # still stops it.
  if printf '%s\n' "${missing[@]}" | grep -qx openssh-server && [ ! -e /usr/sbin/sshd ]; then
    mkdir -p /var/lib/nearnative && touch "$SSHD_MARK"
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "all ${#PACKAGES[@]} packages installed"
fi
if [ -e "$SSHD_MARK" ]; then
  SERVICES+=(ssh)
fi

# Native and container must run the same binaries at the same versions. The
# image is built from the mirror's newest packages, so bring the host's copies
# of the workload packages and everything they depend on up to date too (only
# those: the rest of the machine is left as it is).
WORKLOAD_PACKAGES=(redis-server redis-tools postgresql fio iperf3 sockperf nginx haproxy nutcracker iproute2 procps
  apache2 libapache2-mod-php8.2 php8.2-pgsql php8.2-fpm php8.2-mysql php8.2-gd mariadb-server openjdk-17-jre-headless tomcat10 rabbitmq-server
  libgomp1 libopenblas0-pthread)
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${WORKLOAD_PACKAGES[@]}" 2>/dev/null | grep -E '^[a-z0-9]' | sort -u || true)
# Essential and required/important packages (bash, sed, apt, ...) are in every
# image (debootstrap installs them) but no package
# depends on them explicitly.
closure="$closure $(dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' 2>/dev/null | awk '$2 == "yes" || $3 == "required" || $3 == "important" {print $1}' || true)"
installed=$(dpkg-query -W -f='${Package}\t${Status}\n' $closure 2>/dev/null | awk -F'\t' '$2 ~ /install ok installed/ {print $1}' || true)
if [ -n "$installed" ]; then
  [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ] || apt-get update -qq
  outdated=$(apt-get -s install --only-upgrade $installed 2>/dev/null | awk '/^Inst /{print $2}' || true)
  if [ -n "$outdated" ]; then
    say "upgrading $(echo $outdated | wc -w) workload package(s) and dependencies so host and image match: $(echo $outdated)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --only-upgrade $outdated >/dev/null
  fi
fi

# The VM platforms' guest kernel: Debian's cloud kernel package unpacked into
# nearnative's state directory, never installed (nothing in /boot, no GRUB
# entry).
./scripts/vm-kernel.sh

systemd_running() { [ -d /run/systemd/system ]; }
for s in "${SERVICES[@]}"; do
  if systemd_running; then
    systemctl disable --now "$s" >/dev/null 2>&1 || true
  else
    service "$s" stop >/dev/null 2>&1 || true
    update-rc.d "$s" disable >/dev/null 2>&1 || true
  fi
done
# Stopping RabbitMQ's service runs Erlang tools, which start the system's
# Erlang port mapper (epmd) as a daemon of its own; nearnative's brokers use
# private ones, so the shared one is stopped too.
if pgrep -x epmd >/dev/null 2>&1; then
  epmd -kill >/dev/null 2>&1 || pkill -x epmd || true
fi

# Docker: leave a daemon that answers alone; start one otherwise.
if docker version >/dev/null 2>&1; then
  say "Docker daemon answers: $(docker version --format '{{.Server.Version}}')"
else
  if systemd_running; then
    say "starting docker.service"
    systemctl enable --now docker >/dev/null
  else
    say "starting dockerd (no systemd): log in /var/log/nearnative-dockerd.log"
    nohup dockerd >/var/log/nearnative-dockerd.log 2>&1 &
  fi
  for _ in $(seq 1 60); do docker version >/dev/null 2>&1 && break; sleep 0.5; done
  docker version >/dev/null 2>&1 || die "dockerd did not come up: see /var/log/nearnative-dockerd.log"
  say "Docker daemon up: $(docker version --format '{{.Server.Version}}')"
fi

# Go: this module needs the version in go.mod; Debian 12 ships 1.19. The Go
# module proxy serves the official toolchain as the module golang.org/toolchain.
need=$(awk '/^go /{print $2; exit}' go.mod)
have_ok() {
  command -v go >/dev/null 2>&1 || return 1
  local v; v=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  [ "$(printf '%s\n%s\n' "$need" "$v" | sort -V | head -1)" = "$need" ]
}
if ! have_ok; then
  dest=/usr/local/go
  say "installing Go $need from the Go module proxy into $dest"
  tmp=$(mktemp -d)
  curl -fsSL -o "$tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go${need}.linux-amd64.zip"
  unzip -q "$tmp/go.zip" -d "$tmp"
  rm -rf "$dest" && mv "$tmp/golang.org/toolchain@v0.0.1-go${need}.linux-amd64" "$dest"
  chmod +x "$dest"/bin/* "$dest"/pkg/tool/*/* 2>/dev/null || true
  rm -rf "$tmp"
  ln -sf "$dest/bin/go" /usr/local/bin/go
  ln -sf "$dest/bin/gofmt" /usr/local/bin/gofmt
fi
export PATH=/usr/local/go/bin:$PATH
say "Go $(go env GOVERSION)"

make --no-print-directory build
install -m 0755 bin/nearnative /usr/local/bin/nearnative
say "installed /usr/local/bin/nearnative ($(nearnative version))"

# The auction application server (a WAR) is built with Maven from the
# sources embedded in apps/auction; the WAR and Maven's repository are kept
# under the state directory, so a second run takes no time and no network.
war=$(go run ./apps/auction/cmd/auction-build) || die "building the auction application failed (see above)"
say "auction application: $war"

# The container runtimes beside runc (gVisor, crun, Podman, LXC): dockerd's
# runtimes, the rootless user and the rest, each change said as it is made.
./scripts/runtimes.sh host
ref=$(nearnative image build | sed -n 's/^image \([^ ]*\) .*/\1/p')
say "workload image $ref"
# Podman's copy is the last step and only its rows need it: a machine whose
# Podman cannot store images (a root file system on overlayfs, say) still
# gets everything else, and is told.
if ! ./scripts/runtimes.sh images "$ref"; then
  say "warning: Podman could not take the workload image (its error above): the runtimes study's podman rows will be refused here (\`nearnative doctor\` says why); everything else is ready"
fi
say "done: try \`nearnative doctor\` and \`nearnative run redis --quick\`"
