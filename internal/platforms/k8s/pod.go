package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nearnative/nearnative/internal/platform"
)

// DefaultGuaranteedMemory is the memory request and limit of each server of
// a Guaranteed pod when the platform sets no memory option.
const DefaultGuaranteedMemory = "2Gi"

// member is one server of a pod.
type member struct {
	spec   platform.Spec
	listen platform.Listen
	argv   []string
	entry  bool
	// instance is the topology instance (-1 for a single server).
	instance int
	// role is the server's role: its topology role, or its name alone.
	role string
}

// container is the name of a member's container.
func (m member) container() string { return dnsLabel(m.spec.Name) }

// podName is a DNS label for trial and group, unique even when shortened.
func podName(trial, group string) string {
	raw := dnsLabel(trial + "-" + group)
	full := strings.ToLower(trial + "-" + group)
	if raw == full || len(full) <= 63 {
		return raw
	}
	sum := sha256.Sum256([]byte(full))
	return strings.Trim(raw[:54], "-") + "-" + hex.EncodeToString(sum[:4])
}

// listenDir is where a member's files go: the container directory for a
// pod of one server, a directory of its own when servers share a pod.
func listenDir(spec platform.Spec, shared bool) string {
	if shared {
		return platform.ContainerDir + "/" + spec.Name
	}
	return platform.ContainerDir
}

// resources are a container's requests and limits on this platform.
func (p *platformImpl) resources() (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	if p.kind == Guaranteed {
		cpus := int64(math.Ceil(p.opt.CPUs))
		if cpus < 1 {
			cpus = 1
		}
		mem := DefaultGuaranteedMemory
		if p.opt.Memory != "" {
			mem = strconv.FormatInt(p.opt.MemoryBytes(), 10)
		}
		q, err := resource.ParseQuantity(mem)
		if err != nil {
			return r, fmt.Errorf("memory %s: %w", mem, err)
		}
		l := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI), corev1.ResourceMemory: q}
		return corev1.ResourceRequirements{Requests: l, Limits: l}, nil
	}
	l := corev1.ResourceList{}
	if p.opt.CPUs > 0 {
		l[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Round(p.opt.CPUs*1000)), resource.DecimalSI)
	}
	if m := p.opt.MemoryBytes(); m > 0 {
		l[corev1.ResourceMemory] = *resource.NewQuantity(m, resource.BinarySI)
	}
	if len(l) > 0 {
		r.Limits = l
	}
	return r, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// asUser wraps argv so that it runs as user (a name or uid as the image
// knows it): Kubernetes only takes numeric IDs, and system users' IDs in
// the image may differ from the host's.
func asUser(user string, argv []string) []string {
	if user == "" {
		return argv
	}
	script := `u="$1"; shift; exec setpriv --reuid="$u" --regid="` + "`id -g \"$u\"`" + `" --init-groups -- "$@"`
	return append([]string{"sh", "-c", script, "sh", user}, argv...)
}

// buildPod makes the pod of a group of members and the ConfigMap holding
// their files (nil without files).
func (p *platformImpl) buildPod(ns, name, trial, group string, members []member, node string) (*corev1.Pod, *corev1.ConfigMap, error) {
	labels := map[string]string{LabelRun: string(p.env.Run), LabelTrial: dnsLabel(trial), LabelPod: name,
		LabelGroup: dnsLabel(group), LabelPlatform: dnsLabel(p.name)}
	if len(members) > 0 && members[0].instance >= 0 {
		labels[LabelInstance] = strconv.Itoa(members[0].instance)
	}
	res, err := p.resources()
	if err != nil {
		return nil, nil, err
	}
	grace := int64(stopGrace)
	no, yes := false, true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			EnableServiceLinks:            &no,
			AutomountServiceAccountToken:  &no,
			HostNetwork:                   p.kind == HostNet,
			// The sandbox's pause is PID 1 and reaps, as docker --init: a server
			// that ignores SIGTERM as PID 1 (sockperf) still stops at once.
			ShareProcessNamespace: &yes,
			DNSPolicy:             corev1.DNSDefault,
			Volumes:               []corev1.Volume{{Name: "nn-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if node != "" {
		pod.Spec.Affinity = nodeAffinity(node)
	}
	var cm *corev1.ConfigMap
	var script []string
	seenHost := map[string]string{}
	for i, m := range members {
		c := p.memberContainer(m, res)
		for j, v := range m.spec.Volumes {
			vname, ok := seenHost[v.HostPath]
			if !ok {
				vname = fmt.Sprintf("host-%d-%d", i, j)
				seenHost[v.HostPath] = vname
				dirType := corev1.HostPathDirectoryOrCreate
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vname,
					VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: v.HostPath, Type: &dirType}}})
			}
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vname, MountPath: v.Path})
			if v.Own && m.spec.User != "" {
				script = append(script, "chown -R "+shellQuote(m.spec.User+":")+" "+shellQuote(v.Path))
			}
		}
		files := m.spec.FilesFor(m.listen)
		script = append(script, "mkdir -p "+shellQuote(m.listen.Dir))
		for j, f := range files {
			if cm == nil {
				cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-files", Namespace: ns, Labels: labels}, BinaryData: map[string][]byte{}}
			}
			key := fmt.Sprintf("m%d-f%d", i, j)
			cm.BinaryData[key] = f.Content
			mode := f.Mode
			if mode == 0 {
				mode = 0o644
			}
			script = append(script, fmt.Sprintf("install -D -m %o /nn-files/%s %s", mode, key, shellQuote(m.listen.Dir+"/"+f.Path)))
		}
		if m.spec.User != "" {
			script = append(script, "chown -R "+shellQuote(m.spec.User+":")+" "+shellQuote(m.listen.Dir))
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	pod.Spec.InitContainers = []corev1.Container{p.initContainer(pod, cm, script, res)}
	return pod, cm, nil
}

// memberContainer is the container of one member of a pod: its command as
// its user, its environment (sorted), its ports and the pod's shared
// directory.
func (p *platformImpl) memberContainer(m member, res corev1.ResourceRequirements) corev1.Container {
	c := corev1.Container{
		Name:            m.container(),
		Image:           p.env.Image,
		ImagePullPolicy: p.conn.pullPolicy(),
		Command:         asUser(m.spec.User, m.argv),
		WorkingDir:      m.listen.Dir,
		Resources:       res,
		VolumeMounts:    []corev1.VolumeMount{{Name: "nn-dir", MountPath: platform.ContainerDir}},
	}
	var keys []string
	for k := range m.spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: m.spec.Env[k]})
	}
	for _, pn := range m.spec.Ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: portName(pn), ContainerPort: int32(m.listen.Ports[pn]), Protocol: corev1.ProtocolTCP})
	}
	return c
}

// initContainer runs script before the members start: it writes the files
// (from cm, when there are any, whose volume it adds to the pod) and hands
// directories to the servers' users.
func (p *platformImpl) initContainer(pod *corev1.Pod, cm *corev1.ConfigMap, script []string, res corev1.ResourceRequirements) corev1.Container {
	// The init container writes the files and hands directories to the
	// servers' users; it carries the same resources so that a Guaranteed
	// pod stays Guaranteed.
	init := corev1.Container{
		Name: "nn-files", Image: p.env.Image, ImagePullPolicy: p.conn.pullPolicy(),
		Command:      []string{"sh", "-ec", strings.Join(script, "\n")},
		Resources:    res,
		VolumeMounts: []corev1.VolumeMount{{Name: "nn-dir", MountPath: platform.ContainerDir}},
	}
	for _, c := range pod.Spec.Containers {
		for _, vm := range c.VolumeMounts {
			if strings.HasPrefix(vm.Name, "host-") && !hasMount(init.VolumeMounts, vm.Name) {
				init.VolumeMounts = append(init.VolumeMounts, vm)
			}
		}
	}
	if cm != nil {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "nn-files",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}})
		init.VolumeMounts = append(init.VolumeMounts, corev1.VolumeMount{Name: "nn-files", MountPath: "/nn-files", ReadOnly: true})
	}
	return init
}

func hasMount(ms []corev1.VolumeMount, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

// portName makes a port name valid for Kubernetes (IANA_SVC_NAME: at most
// 15 characters, letters, digits and '-').
func portName(s string) string {
	n := dnsLabel(s)
	if len(n) > 15 {
		n = strings.Trim(n[:15], "-")
	}
	return n
}

// pod is one created pod of a group of servers.
type pod struct {
	p       *platformImpl
	ns      string
	name    string
	trial   string
	members []member
	node    string

	mu       sync.Mutex
	uid      string
	ip       string
	hostIP   string
	qos      corev1.PodQOSClass
	nodeName string
	cids     map[string]string // container name -> runtime ID
	services map[string]*corev1.Service
	cm       bool
	deleted  bool
	delErr   error
}

// create creates the pod (with its ConfigMap and Services) and waits until
// its containers run. On failure it deletes what it made; the error names
// the cause, with the pod's events and its containers' last log lines.
func (p *platformImpl) createPod(ctx context.Context, trial, group string, members []member, services bool) (_ *pod, err error) {
	ns, err := p.namespace(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.conn.ensureImage(ctx, p.env.Image, p.env.Logf); err != nil {
		return nil, err
	}
	f, err := p.conn.Facts(ctx)
	if err != nil {
		return nil, err
	}
	node, err := p.nodeFor(members, f)
	if err != nil {
		return nil, err
	}
	name := podName(trial, group)
	spec, cm, err := p.buildPod(ns, name, trial, group, members, node)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	pd := &pod{p: p, ns: ns, name: name, trial: trial, members: members, node: node, services: map[string]*corev1.Service{}}
	defer func() {
		if err != nil {
			pd.delete(context.WithoutCancel(ctx))
		}
	}()
	cs := p.conn.cs
	if cm != nil {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("%s: creating ConfigMap %s/%s: %w", p.name, ns, cm.Name, err)
		}
		pd.cm = true
	}
	if services {
		for _, m := range members {
			if err := pd.createService(ctx, m); err != nil {
				return nil, err
			}
		}
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: creating pod %s/%s: %w", p.name, ns, name, err)
	}
	pd.uid = string(created.UID)
	if err := pd.waitRunning(ctx); err != nil {
		return nil, err
	}
	if err := pd.waitServices(ctx); err != nil {
		return nil, err
	}
	if err := pd.routeClient(ctx); err != nil {
		return nil, err
	}
	return pd, nil
}

// routeClient routes the platform's client host to every address it may
// be given for the pod: the pod IP (k8s-pod, k8s-guaranteed, and peers'
// paths), each Service's ClusterIP (kube-proxy's DNAT in PREROUTING serves
// packets this machine forwards as it serves its own), and on k8s-nodeport
// the node's address. A hostNetwork pod listens on the client host's own
// server address: nothing to route.
func (pd *pod) routeClient(ctx context.Context) error {
	pd.mu.Lock()
	var addrs []string
	if pd.p.kind != HostNet {
		addrs = append(addrs, pd.ip)
	}
	for _, svc := range pd.services {
		addrs = append(addrs, svc.Spec.ClusterIP)
	}
	if pd.p.kind == NodePort {
		addrs = append(addrs, pd.hostIP)
	}
	pd.mu.Unlock()
	c := pd.p.env.ClientHost()
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || !ip.Is4() {
			continue // none (a hostNetwork pod's), or IPv6
		}
		if err := c.Route(ctx, netip.PrefixFrom(ip, 32)); err != nil {
			return fmt.Errorf("%s: routing the client host to %s: %w", pd.p.name, ip, err)
		}
	}
	return nil
}

// serviceTimeout bounds waiting for kube-proxy to route a new Service.
const serviceTimeout = 30 * time.Second

// waitServices waits until every Service of the pod has the pod as a ready
// endpoint and, on the local node, until kube-proxy's rules send the
// ClusterIP to it. Until then a connection to the ClusterIP is refused (a
// Service without endpoints) or, before kube-proxy has seen the Service at
// all, leaves by the default route, where some networks accept any TCP
// connection (the development machines do). A client that is its own
// readiness probe (iperf3, which serves one client at a time) was caught
// that way or half-way by the rules' arrival, and stalled after a few
// hundred kilobytes.
func (pd *pod) waitServices(ctx context.Context) error {
	pd.mu.Lock()
	svcs := make([]*corev1.Service, 0, len(pd.services))
	for _, s := range pd.services {
		svcs = append(svcs, s)
	}
	pd.mu.Unlock()
	for _, svc := range svcs {
		err := poll(ctx, serviceTimeout, func(ctx context.Context) error {
			if err := pd.endpointReady(ctx, svc.Name); err != nil {
				return err
			}
			if pd.p.conn.local != nil {
				return kubeProxyRoutes(ctx, svc.Spec.ClusterIP)
			}
			return nil
		})
		if err != nil {
			return pd.failure(ctx, fmt.Errorf("Service %s: %w", svc.Name, err))
		}
	}
	return nil
}

// endpointReady returns nil once an EndpointSlice of the Service lists the
// pod's address as ready.
func (pd *pod) endpointReady(ctx context.Context, svc string) error {
	l, err := pd.p.conn.cs.DiscoveryV1().EndpointSlices(pd.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return err
	}
	for _, sl := range l.Items {
		for _, ep := range sl.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			for _, a := range ep.Addresses {
				if ready && (a == pd.ip || pd.p.kind == HostNet) {
					return nil
				}
			}
		}
	}
	return errors.New("the pod is not a ready endpoint yet")
}

// kubeProxyRoutes returns nil once the node's nat table sends clusterIP to
// a Service chain (kube-proxy in iptables mode; other modes are not
// checked).
func kubeProxyRoutes(ctx context.Context, clusterIP string) error {
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").Output()
	if err != nil {
		return nil // no iptables here, or another proxy mode: nothing to wait for
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "-d "+clusterIP+"/32") && strings.Contains(line, "-j KUBE-SVC-") {
			return nil
		}
	}
	return fmt.Errorf("kube-proxy has no rule for %s yet", clusterIP)
}

// poll calls check until it returns nil or timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not routed within %v: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createService makes the Service of a member: NodePort for entry servers
// on k8s-nodeport, ClusterIP otherwise.
func (pd *pod) createService(ctx context.Context, m member) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: podName(pd.trial, m.spec.Name), Namespace: pd.ns,
			Labels: map[string]string{LabelRun: string(pd.p.env.Run), LabelTrial: dnsLabel(pd.trial)}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{LabelPod: pd.name}, Type: corev1.ServiceTypeClusterIP},
	}
	if pd.p.kind == NodePort && m.entry {
		svc.Spec.Type = corev1.ServiceTypeNodePort
	}
	for _, pn := range m.spec.Ports {
		n := int32(m.listen.Ports[pn])
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: portName(pn), Port: n, TargetPort: intstr.FromInt32(n), Protocol: corev1.ProtocolTCP})
	}
	if len(svc.Spec.Ports) == 0 {
		return nil
	}
	created, err := pd.p.conn.cs.CoreV1().Services(pd.ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: creating Service %s/%s: %w", pd.p.name, pd.ns, svc.Name, err)
	}
	pd.mu.Lock()
	pd.services[m.spec.Name] = created
	pd.mu.Unlock()
	return nil
}

// badWaiting are container waiting reasons that do not resolve by waiting.
var badWaiting = map[string]bool{
	"ErrImageNeverPull": true, "ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CrashLoopBackOff": true, "CreateContainerError": true, "CreateContainerConfigError": true,
	"RunContainerError": true, "PreCreateHookError": true, "PostStartHookError": true,
}

// waitRunning polls the pod until its containers run.
func (pd *pod) waitRunning(ctx context.Context) error {
	ctx2, cancel := context.WithTimeout(ctx, podReadyTimeout)
	defer cancel()
	var unschedSince time.Time
	for {
		po, err := pd.p.conn.cs.CoreV1().Pods(pd.ns).Get(ctx2, pd.name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if ctx2.Err() != nil {
				return pd.failure(ctx, fmt.Errorf("not running within %v", podReadyTimeout))
			}
			return fmt.Errorf("%s: reading pod %s/%s: %w", pd.p.name, pd.ns, pd.name, err)
		}
		done, err := pd.judge(po, &unschedSince)
		if err != nil {
			return pd.failure(ctx, err)
		}
		if done {
			pd.mu.Lock()
			pd.ip, pd.hostIP, pd.qos, pd.nodeName = po.Status.PodIP, po.Status.HostIP, po.Status.QOSClass, po.Spec.NodeName
			pd.cids = map[string]string{}
			for _, st := range po.Status.ContainerStatuses {
				_, id, _ := strings.Cut(st.ContainerID, "://")
				pd.cids[st.Name] = id
			}
			pd.mu.Unlock()
			return nil
		}
		select {
		case <-ctx2.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return pd.failure(ctx, fmt.Errorf("not running within %v (phase %s)", podReadyTimeout, po.Status.Phase))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// judge says whether the pod runs (true), is still coming (false, nil) or
// failed (an error naming why).
func (pd *pod) judge(po *corev1.Pod, unschedSince *time.Time) (bool, error) {
	switch po.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		msg := fmt.Sprintf("ended in phase %s", po.Status.Phase)
		if po.Status.Reason != "" {
			msg += ": " + po.Status.Reason + " " + po.Status.Message
		}
		return false, errors.New(msg)
	}
	for _, cond := range po.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			if unschedSince.IsZero() {
				*unschedSince = time.Now()
			} else if time.Since(*unschedSince) > 20*time.Second {
				return false, fmt.Errorf("cannot be scheduled: %s", cond.Message)
			}
		}
	}
	for _, st := range append(append([]corev1.ContainerStatus{}, po.Status.InitContainerStatuses...), po.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && badWaiting[w.Reason] {
			return false, fmt.Errorf("container %s: %s: %s", st.Name, w.Reason, w.Message)
		}
		if t := st.State.Terminated; t != nil && (t.ExitCode != 0 || !isInit(po, st.Name)) {
			return false, fmt.Errorf("container %s exited with code %d (%s)", st.Name, t.ExitCode, t.Reason)
		}
	}
	if po.Status.Phase != corev1.PodRunning || len(po.Status.ContainerStatuses) < len(pd.members) {
		return false, nil
	}
	for _, st := range po.Status.ContainerStatuses {
		if st.State.Running == nil {
			return false, nil
		}
	}
	if po.Status.PodIP == "" && !po.Spec.HostNetwork {
		return false, nil
	}
	return true, nil
}

func isInit(po *corev1.Pod, name string) bool {
	for _, c := range po.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// failure is err with the pod's events and its containers' last log lines.
func (pd *pod) failure(ctx context.Context, err error) error {
	ctx = context.WithoutCancel(ctx)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: pod %s/%s: %v", pd.p.name, pd.ns, pd.name, err)
	if ev := pd.events(ctx); ev != "" {
		b.WriteString("\n  events:\n    " + strings.ReplaceAll(ev, "\n", "\n    "))
	}
	for _, c := range append([]string{"nn-files"}, pd.containerNames()...) {
		if t := pd.logs(ctx, c, 15); strings.TrimSpace(t) != "" {
			b.WriteString("\n  last log lines of " + c + ":\n    " + strings.ReplaceAll(strings.TrimRight(t, "\n"), "\n", "\n    "))
		}
	}
	return errors.New(b.String())
}

func (pd *pod) containerNames() []string {
	var out []string
	for _, m := range pd.members {
		out = append(out, m.container())
	}
	return out
}

// events lists the pod's events, oldest first.
func (pd *pod) events(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	evs, err := pd.p.conn.cs.CoreV1().Events(pd.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pd.name})
	if err != nil {
		return "(events unavailable: " + oneLine(err.Error()) + ")"
	}
	items := evs.Items
	sort.SliceStable(items, func(i, j int) bool { return items[i].LastTimestamp.Before(&items[j].LastTimestamp) })
	var lines []string
	for _, e := range items {
		lines = append(lines, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, oneLine(e.Message)))
	}
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	return strings.Join(lines, "\n")
}

// logs returns the last n lines of a container's output ("" when none).
func (pd *pod) logs(ctx context.Context, container string, n int) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := &corev1.PodLogOptions{Container: container}
	if n > 0 {
		t := int64(n)
		opts.TailLines = &t
	}
	b, err := pd.p.conn.cs.CoreV1().Pods(pd.ns).GetLogs(pd.name, opts).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(b)
}

// delete saves the containers' logs to the run's log directory, then
// deletes the pod, its Services and ConfigMap and waits until the pod is
// gone (its exclusive CPUs and ports are free again). It runs once.
func (pd *pod) delete(ctx context.Context) error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.deleted {
		return pd.delErr
	}
	pd.deleted = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	var errs []error
	if dir := pd.p.env.LogDir; dir != "" {
		for _, m := range pd.members {
			if out := pd.logs(ctx, m.container(), 0); out != "" {
				path := filepath.Join(dir, logName(pd.trial, m.spec.Name))
				os.MkdirAll(dir, 0o755)
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	cs := pd.p.conn.cs
	grace := int64(stopGrace)
	for _, svc := range pd.services {
		if err := cs.CoreV1().Services(pd.ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Service %s/%s: %w", pd.ns, svc.Name, err))
		}
	}
	if err := cs.CoreV1().Pods(pd.ns).Delete(ctx, pd.name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", pd.ns, pd.name, err))
	} else if err := waitGone(ctx, func(ctx context.Context) error {
		_, err := cs.CoreV1().Pods(pd.ns).Get(ctx, pd.name, metav1.GetOptions{})
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("pod %s/%s: %w", pd.ns, pd.name, err))
	}
	if pd.cm {
		if err := cs.CoreV1().ConfigMaps(pd.ns).Delete(ctx, pd.name+"-files", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting ConfigMap %s/%s-files: %w", pd.ns, pd.name, err))
		}
	}
	pd.delErr = errors.Join(errs...)
	return pd.delErr
}

// waitGone polls get until it says NotFound.
func waitGone(ctx context.Context, get func(context.Context) error) error {
	for {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still there after the deletion: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var unsafeFile = strings.NewReplacer("/", "_", " ", "_", ":", "_")

func logName(trial, server string) string { return unsafeFile.Replace(trial+"-"+server) + ".log" }

// DeleteNamespace deletes ns and waits until it is gone; gone already is no
// error.
func DeleteNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	if err := waitGone(ctx, func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}
