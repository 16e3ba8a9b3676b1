package cleanup

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nearnative/nearnative/internal/platforms/k8s"
	"github.com/nearnative/nearnative/internal/runid"
)

// KubeNamespaces sweeps the Kubernetes namespaces the k8s platforms make
// (label nearnative.run=RUN); deleting one deletes its pods, Services and
// ConfigMaps.
type KubeNamespaces struct {
	Client kubernetes.Interface
	// Where names the cluster in messages.
	Where string
}

// Kind implements Sweeper.
func (k KubeNamespaces) Kind() string { return "Kubernetes namespaces" }

// Runs implements Sweeper.
func (k KubeNamespaces) Runs(ctx context.Context) ([]runid.ID, error) {
	list, err := k.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelRun})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces of %s: %w", k.Where, err)
	}
	set := map[runid.ID]bool{}
	for _, ns := range list.Items {
		if id, err := runid.Parse(ns.Labels[k8s.LabelRun]); err == nil {
			set[id] = true
		}
	}
	return keys(set), nil
}

// Remove implements Sweeper: it deletes the run's namespaces and waits until
// they are gone.
func (k KubeNamespaces) Remove(ctx context.Context, run runid.ID) ([]string, error) {
	list, err := k.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelRun + "=" + string(run)})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces of %s: %w", k.Where, err)
	}
	var removed []string
	var errs []error
	for _, ns := range list.Items {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := k8s.DeleteNamespace(dctx, k.Client, ns.Name)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, fmt.Sprintf("Kubernetes namespace %s (run %s)", ns.Name, run))
	}
	return removed, errors.Join(errs...)
}
