package uninstall

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/record"
)

// purge reads what --purge decides over: the objects, CRDs and namespaces the record says gpuctl
// created that are still there, each with its UID now; the custom resources of each such CRD and
// the contents of each such namespace (only where it is the one gpuctl created: another is kept
// whatever it holds); and the CSVs OLM installed for the releases' Subscriptions.
func (r *reader) purge(ctx context.Context, s *Snapshot) (*PurgeSnapshot, error) {
	ps := &PurgeSnapshot{}
	for _, o := range s.Record.Objects {
		if !o.Created {
			continue
		}
		uid, err := record.UIDNow(ctx, r.clients, o)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", describe(o.Kind, o.Namespace, o.Name), err)
		}
		if uid != "" { // else gone, or its kind is no longer served
			ps.Objects = append(ps.Objects, Found{Recorded: o, UID: uid})
		}
	}
	for _, o := range s.Record.CRDs {
		if !o.Created {
			continue
		}
		crd, err := r.crd(ctx, o)
		if err != nil {
			return nil, err
		}
		if crd != nil {
			ps.CRDs = append(ps.CRDs, *crd)
		}
	}
	ps.CSVs = r.csvs(ctx, s.Releases)
	for _, o := range s.Record.Namespaces {
		if !o.Created {
			continue
		}
		ns, err := r.namespace(ctx, o)
		if err != nil {
			return nil, err
		}
		if ns != nil {
			ps.Namespaces = append(ps.Namespaces, *ns)
		}
	}
	return ps, nil
}

// crd reads the CRD o names (nil when it is gone) and, when it is the one gpuctl created and serves a
// version, every custom resource of it in every namespace.
func (r *reader) crd(ctx context.Context, o record.Object) (*FoundCRD, error) {
	crd, err := r.clients.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read CRD %s: %w", o.Name, err)
	}
	f := &FoundCRD{Found: Found{Recorded: o, UID: crd.UID}, Kind: crd.Spec.Names.Kind}
	if !isRecorded(o, crd.UID) {
		return f, nil
	}
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && (version == "" || v.Storage) {
			version = v.Name
		}
	}
	if version == "" {
		return f, nil // nothing served: nothing to list, nor to lose but the stored objects' CRD
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
	list, err := r.clients.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	if kube.Absent(err) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the %s of CRD %s: %w", crd.Spec.Names.Plural, o.Name, err)
	}
	f.Resources = list.Items
	return f, nil
}

// csvs are the UIDs of the ClusterServiceVersions the Subscriptions in the releases' namespaces
// installed (on OpenShift the operator runs from them); one that cannot be read is left out.
func (r *reader) csvs(ctx context.Context, rels []InstalledRelease) []types.UID {
	var namespaces []string
	for _, rel := range rels {
		if !slices.Contains(namespaces, rel.Namespace) {
			namespaces = append(namespaces, rel.Namespace)
		}
	}
	var out []types.UID
	for _, ns := range namespaces {
		for _, csv := range installedCSVs(ctx, r.clients.Dynamic, ns) {
			if obj, err := r.clients.Dynamic.Resource(kube.CSVsGVR).Namespace(ns).Get(ctx, csv, metav1.GetOptions{}); err == nil {
				out = append(out, obj.GetUID())
			}
		}
	}
	return out
}

// namespace reads the namespace o names (nil when it is gone) and, when it is the one gpuctl
// created, what it holds.
func (r *reader) namespace(ctx context.Context, o record.Object) (*FoundNamespace, error) {
	ns, err := r.clients.Kube.CoreV1().Namespaces().Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read namespace %s: %w", o.Name, err)
	}
	f := &FoundNamespace{Found: Found{Recorded: o, UID: ns.UID}}
	if isRecorded(o, ns.UID) {
		if f.Contents, err = listNamespace(ctx, r.clients, o.Name); err != nil {
			return nil, err
		}
	}
	return f, nil
}
