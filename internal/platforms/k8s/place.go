package k8s

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nearnative/nearnative/internal/platform"
)

// nodeFor is the node a pod of members goes to: the node their roles are
// placed on (options.place), else the cluster's first Ready node (f.Node).
// Members of one pod share a node, so roles of one group placed on two
// nodes are refused.
func (p *platformImpl) nodeFor(members []member, f Facts) (string, error) {
	node, by := "", ""
	for _, m := range members {
		n, ok := p.place[m.role]
		if !ok {
			continue
		}
		if node != "" && n != node {
			return "", fmt.Errorf("%s: roles %s and %s share a pod but are placed on nodes %s and %s: place them on one node", p.name, by, m.role, node, n)
		}
		node, by = n, m.role
	}
	if node == "" {
		node = f.Node
	}
	return node, nil
}

// placedNodes lists the nodes of options.place, sorted.
func (p *platformImpl) placedNodes() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range p.place {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// nodes are the nodes this platform's pods may go to: the default node
// and every placed one.
func (p *platformImpl) nodes(f Facts) []string {
	out := []string{f.Node}
	for _, n := range p.placedNodes() {
		if n != f.Node {
			out = append(out, n)
		}
	}
	return out
}

// checkPlaced refuses, before the first trial, a placement whose node
// cannot take this platform's pods: a node the cluster does not have (on
// the local cluster: any but its own), one not Ready, cordoned, tainted
// against pods without tolerations (nearnative's have none), with less
// allocatable CPU or memory than one server's requests, without the
// static CPU manager (k8s-guaranteed), or not this machine (k8s-hostnet,
// whose pods listen on the client host's link here).
func (p *platformImpl) checkPlaced(ctx context.Context, f Facts) error {
	res, err := p.resources()
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	for _, name := range p.placedNodes() {
		need := res.Requests
		if p.rolesOn(name) == platform.Driver {
			need = nil // the driver pod requests nothing
		}
		if err := p.checkNode(ctx, f, name, need); err != nil {
			return err
		}
	}
	return nil
}

func (p *platformImpl) checkNode(ctx context.Context, f Facts, name string, need corev1.ResourceList) error {
	roles := p.rolesOn(name)
	refuse := func(format string, args ...any) error {
		return platform.Unavailablef("place: %s on node %s: %s", roles, name, fmt.Sprintf(format, args...))
	}
	n, err := p.conn.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && f.LocalCluster:
		return refuse("the local cluster (`nearnative cluster up`) has one node, %s: place roles on it, or name a cluster of several nodes with --kubeconfig", f.Node)
	case apierrors.IsNotFound(err):
		return refuse("%s has no such node (nodes: %s)", p.conn.where(), strings.Join(f.Nodes, ", "))
	case err != nil:
		return fmt.Errorf("%s: reading node %s: %w", p.name, name, err)
	}
	if !nodeReady(*n) {
		return refuse("the node is not Ready (`kubectl describe node %s`)", name)
	}
	if n.Spec.Unschedulable {
		return refuse("the node is cordoned: `kubectl uncordon %s`, or place the roles elsewhere", name)
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return refuse("the node has taint %s, which nearnative's pods do not tolerate: remove it (`kubectl taint nodes %s %s-`) or place the roles elsewhere", t.ToString(), name, t.Key)
		}
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		want, ok := need[r]
		if !ok {
			continue
		}
		if have, ok := n.Status.Allocatable[r]; ok && have.Cmp(want) < 0 {
			return refuse("a server requests %s %s, the node has %s allocatable", r, want.String(), have.String())
		}
	}
	if p.rolesOn(name) == platform.Driver {
		return nil // no server there: CPU manager and address do not matter
	}
	if p.kind == Guaranteed {
		if pol := p.conn.cpuManager(ctx, name); pol != "static" {
			return refuse("%s needs the static CPU manager, but the node runs policy %q (cpuManagerPolicy: static in its kubelet configuration)", p.kind, pol)
		}
	}
	if p.kind == HostNet && !isLocalAddr(internalIP(*n)) {
		return refuse("%s reaches a hostNetwork pod on an address of this machine, and the node is not this machine", p.kind)
	}
	return nil
}

// rolesOn names the roles placed on node, sorted, for an error.
func (p *platformImpl) rolesOn(node string) string {
	var rs []string
	for r, n := range p.place {
		if n == node {
			rs = append(rs, r)
		}
	}
	sort.Strings(rs)
	return strings.Join(rs, ", ")
}

// nodeAffinity pins a pod to the node named node by its object name (the
// metadata.name field), which every cluster has, where a hostname label may
// differ from the name.
func nodeAffinity(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}
