package docker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/nearnative/nearnative/internal/sysinfo"
)

// DefaultDaemonConfig is dockerd's configuration file when its command line
// names none.
const DefaultDaemonConfig = "/etc/docker/daemon.json"

// DaemonConfigPath returns the configuration file of the dockerd serving the
// default socket (not a test bed host's, on one of its own), running
// under procRoot (its --config-file, else DefaultDaemonConfig) and whether
// its command line registers runtimes itself (--add-runtime, which dockerd
// refuses to combine with a "runtimes" key in the file). found is false
// when no dockerd runs there.
func DaemonConfigPath(procRoot string) (path string, addRuntimeFlags, found bool) {
	for _, p := range sysinfo.Procs(procRoot, "dockerd") {
		if !servesDefaultSocket(p.Args) {
			continue // another daemon (a test bed host's), not the one docker talks to
		}
		path = DefaultDaemonConfig
		for i, a := range p.Args {
			switch {
			case strings.HasPrefix(a, "--config-file="):
				path = strings.TrimPrefix(a, "--config-file=")
			case a == "--config-file" && i+1 < len(p.Args):
				path = p.Args[i+1]
			case a == "--add-runtime" || strings.HasPrefix(a, "--add-runtime="):
				addRuntimeFlags = true
			}
		}
		return path, addRuntimeFlags, true
	}
	return DefaultDaemonConfig, false, false
}

// servesDefaultSocket says whether a dockerd with these arguments listens
// on the default socket: it names no -H/--host, or names that socket.
func servesDefaultSocket(args []string) bool {
	named := false
	for i, a := range args {
		var h string
		switch {
		case a == "-H" || a == "--host":
			if i+1 < len(args) {
				h = args[i+1]
			}
		case strings.HasPrefix(a, "-H="), strings.HasPrefix(a, "--host="):
			_, h, _ = strings.Cut(a, "=")
		default:
			continue
		}
		named = true
		if h == "unix:///var/run/docker.sock" || h == "unix:///run/docker.sock" || h == "fd://" {
			return true
		}
	}
	return !named
}

// RuntimeEntry is a runtime as daemon.json's "runtimes" holds it.
type RuntimeEntry struct {
	Path string   `json:"path"`
	Args []string `json:"runtimeArgs,omitempty"`
}

// MergeRuntimes adds the runtimes rts to the "runtimes" of dockerd's
// configuration conf (JSON; empty or missing for none), keeping every
// other setting as it is, and every runtime already registered under the
// same name (those are kept, not replaced). It returns the new text
// (conf itself when nothing was added), the names it added and the names
// it kept though they differ from rts.
func MergeRuntimes(conf []byte, rts map[string]RuntimeEntry) (out []byte, added, kept []string, err error) {
	doc := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(conf)) > 0 {
		if err := json.Unmarshal(conf, &doc); err != nil {
			return nil, nil, nil, fmt.Errorf("dockerd's configuration is not a JSON object: %w", err)
		}
	}
	have := map[string]RuntimeEntry{}
	if raw, ok := doc["runtimes"]; ok {
		if err := json.Unmarshal(raw, &have); err != nil {
			return nil, nil, nil, fmt.Errorf("dockerd's configuration: \"runtimes\" is not a map of runtimes: %w", err)
		}
	}
	names := make([]string, 0, len(rts))
	for n := range rts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h, ok := have[n]
		switch {
		case !ok:
			have[n] = rts[n]
			added = append(added, n)
		case h.Path != rts[n].Path || !slices.Equal(h.Args, rts[n].Args):
			kept = append(kept, n)
		}
	}
	if len(added) == 0 {
		return conf, nil, kept, nil
	}
	raw, err := json.Marshal(have)
	if err != nil {
		return nil, nil, nil, err
	}
	doc["runtimes"] = raw
	out, err = json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, nil, nil, err
	}
	return append(out, '\n'), added, kept, nil
}

// WriteDaemonConfig writes conf to path, keeping the file it replaces as
// path.nearnative-backup (once: an older backup stays).
func WriteDaemonConfig(path string, conf []byte) (backup string, err error) {
	if old, err := os.ReadFile(path); err == nil {
		backup = path + ".nearnative-backup"
		if _, err := os.Stat(backup); os.IsNotExist(err) {
			if err := os.WriteFile(backup, old, 0o644); err != nil {
				return "", fmt.Errorf("backing up %s: %w", path, err)
			}
		}
	}
	tmp := path + ".nearnative-tmp"
	if err := os.WriteFile(tmp, conf, 0o644); err != nil {
		return backup, err
	}
	return backup, os.Rename(tmp, path)
}
