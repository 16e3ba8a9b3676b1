package cleanup

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nearnative/nearnative/internal/platforms/k8s"
	"github.com/nearnative/nearnative/internal/runid"
)

func TestKubeNamespaces(t *testing.T) {
	ns := func(name, run string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if run != "" {
			n.Labels = map[string]string{k8s.LabelRun: run}
		}
		return n
	}
	a, b := runid.ID("20260101-000000-aaaa"), runid.ID("20260101-000000-bbbb")
	cs := fake.NewSimpleClientset(
		ns("nn-a-k8s-pod", string(a)), ns("nn-a-k8s-service", string(a)), ns("nn-b-k8s-pod", string(b)),
		ns("default", ""), ns("bad-label", "not-a-run"))
	sw := KubeNamespaces{Client: cs, Where: "test"}
	ctx := context.Background()
	runs, err := sw.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(runs)
	if len(runs) != 2 || runs[0] != a || runs[1] != b {
		t.Fatalf("Runs = %v, want [%s %s]", runs, a, b)
	}
	removed, err := sw.Remove(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || !strings.Contains(removed[0], "nn-a-k8s-") {
		t.Fatalf("Remove = %v", removed)
	}
	left, _ := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	var names []string
	for _, n := range left.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "bad-label,default,nn-b-k8s-pod" {
		t.Errorf("namespaces left: %v", names)
	}
}
