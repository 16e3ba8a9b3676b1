// Command register-runtimes registers gVisor's runsc and crun with the
// dockerd of this machine, openly: scripts/setup.sh runs it and then
// reloads dockerd with SIGHUP (dockerd 20.10 reloads its "runtimes" on
// SIGHUP). It adds the two runtimes to the "runtimes" of dockerd's
// configuration file (its --config-file, else /etc/docker/daemon.json),
// keeping every other setting and any runtime already registered under
// those names, saves the file it replaces as *.nearnative-backup, and says
// what it changed. runsc gets gVisor's ptrace platform (it runs anywhere;
// kvm needs a KVM nested hypervisors often refuse) and, where the packaged
// runsc refuses gVisor's own network stack on this kernel, --network=host.
//
// Exit codes: 0 registered or already there, 1 an error, 3 dockerd
// registers runtimes on its command line (--add-runtime), which cannot be
// combined with the file: register them there yourself.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/nearnative/nearnative/internal/platforms/docker"
)

func main() {
	os.Exit(run())
}

func run() int {
	path, flags, _ := docker.DaemonConfigPath("/proc")
	rts := map[string]docker.RuntimeEntry{}
	var notes []string
	if p, err := exec.LookPath("runsc"); err == nil {
		args := []string{"--platform=ptrace"}
		if docker.NetstackRefused() {
			args = append(args, "--network=host")
			notes = append(notes, "runsc with --network=host: this runsc takes every network namespace of this kernel for the host's and refuses gVisor's own network stack")
		}
		rts[docker.RuntimeRunsc] = docker.RuntimeEntry{Path: p, Args: args}
	}
	if p, err := exec.LookPath("crun"); err == nil {
		rts[docker.RuntimeCrun] = docker.RuntimeEntry{Path: p}
	}
	if len(rts) == 0 {
		fmt.Println("neither runsc nor crun is installed: nothing to register")
		return 0
	}
	if flags {
		fmt.Fprintf(os.Stderr, "dockerd registers runtimes on its command line (--add-runtime), which it does not combine with %s: add %s there yourself (docs/runtimes.md)\n", path, describe(rts))
		return 3
	}
	conf, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, added, kept, err := docker.MergeRuntimes(conf, rts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 1
	}
	for _, k := range kept {
		fmt.Printf("kept the runtime %s that %s already registers (nearnative reads its settings from dockerd)\n", k, path)
	}
	if len(added) == 0 {
		fmt.Printf("runtimes already registered in %s: nothing changed\n", path)
		return 0
	}
	backup, err := docker.WriteDaemonConfig(path, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	msg := fmt.Sprintf("added the runtimes %s to %s, keeping its other settings", describe(pick(rts, added)), path)
	if backup != "" {
		msg += "; the file before is " + backup
	}
	fmt.Println(msg)
	for _, n := range notes {
		fmt.Println(n)
	}
	return 0
}

func pick(rts map[string]docker.RuntimeEntry, names []string) map[string]docker.RuntimeEntry {
	out := map[string]docker.RuntimeEntry{}
	for _, n := range names {
		out[n] = rts[n]
	}
	return out
}

func describe(rts map[string]docker.RuntimeEntry) string {
	var parts []string
	for _, n := range []string{docker.RuntimeRunsc, docker.RuntimeCrun} {
		if r, ok := rts[n]; ok {
			parts = append(parts, fmt.Sprintf("%s (%s)", n, strings.Join(append([]string{r.Path}, r.Args...), " ")))
		}
	}
	return strings.Join(parts, " and ")
}
