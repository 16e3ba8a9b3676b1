package cluster

import (
	"context"
	"fmt"
	"strings"
)

// ComponentStatus is one process of the cluster.
type ComponentStatus struct {
	Name string
	PID  int // 0: not running
}

// Status is what `nearnative cluster status` shows.
type Status struct {
	Components []ComponentStatus
	// NodeReady is nil when the node reports Ready.
	NodeReady error
	// Binaries says whether the pinned binaries are built ("" when they
	// are, else why not).
	Binaries string
}

// Up reports whether every component runs and the node is Ready.
func (s Status) Up() bool {
	if len(s.Components) == 0 || s.NodeReady != nil {
		return false
	}
	for _, c := range s.Components {
		if c.PID == 0 {
			return false
		}
	}
	return true
}

// Running reports whether any component runs.
func (s Status) Running() bool {
	for _, c := range s.Components {
		if c.PID != 0 {
			return true
		}
	}
	return false
}

// Status inspects the cluster.
func (c Config) Status(ctx context.Context) Status {
	var st Status
	for _, name := range append([]string{"containerd", "etcd"}, "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy") {
		st.Components = append(st.Components, ComponentStatus{Name: name, PID: c.running(name)})
	}
	switch _, ok, err := c.Cached(); {
	case err != nil:
		st.Binaries = err.Error()
	case !ok:
		st.Binaries = fmt.Sprintf("not built yet: `nearnative cluster up` builds Kubernetes %s and etcd %s once (about 15 minutes of CPU on two cores)", KubernetesVersion, EtcdVersion)
	}
	st.NodeReady = fmt.Errorf("the cluster is not running: `nearnative cluster up` (or `make cluster`)")
	if st.Running() {
		cs, err := c.Client()
		if err == nil {
			err = NodeReady(ctx, cs, c.NodeName)
		}
		st.NodeReady = err
	}
	return st
}

// String is the status as lines.
func (s Status) String() string {
	var b strings.Builder
	for _, c := range s.Components {
		state := "stopped"
		if c.PID != 0 {
			state = fmt.Sprintf("running (pid %d)", c.PID)
		}
		fmt.Fprintf(&b, "%-24s %s\n", c.Name, state)
	}
	if s.NodeReady == nil {
		b.WriteString("node                     Ready\n")
	} else {
		fmt.Fprintf(&b, "node                     %v\n", s.NodeReady)
	}
	if s.Binaries != "" {
		fmt.Fprintf(&b, "binaries                 %s\n", s.Binaries)
	}
	return b.String()
}
