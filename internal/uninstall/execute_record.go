package uninstall

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuctl/gpuctl/internal/record"
	"github.com/gpuctl/gpuctl/internal/runner"
)

// updateRecord says in the install record that the stack is uninstalled: without --purge it keeps
// what gpuctl created for a later uninstall --purge; --purge deletes it, unless it kept a namespace.
func (e *execution) updateRecord(ctx context.Context, _ func(string)) (runner.Outcome, error) {
	rec := e.p.record
	switch {
	case rec == nil:
		return runner.Outcome{Skipped: true, Message: "none"}, nil
	case e.p.Purge != nil && len(e.keptNamespaces) == 0:
		if err := record.Delete(ctx, e.Clients.Kube); err != nil {
			return runner.Outcome{}, err
		}
		return runner.Outcome{Changed: true, Message: "deleted"}, nil
	case e.p.Purge != nil:
		return e.recordKeptNamespaces(ctx)
	case rec.Uninstalled:
		return runner.Outcome{Skipped: true, Message: "already says uninstalled; uninstall --purge removes what gpuctl created"}, nil
	}
	r := uninstalled(rec)
	if err := record.Write(ctx, e.Clients.Kube, r); err != nil {
		return runner.Outcome{}, err
	}
	kept := len(record.CreatedNames(r.CRDs)) + len(record.CreatedNames(r.Namespaces)) + len(record.CreatedNames(r.Objects))
	msg := "marked uninstalled"
	if kept > 0 {
		msg += fmt.Sprintf("; it keeps the %d CRDs, namespaces and other objects gpuctl created, for uninstall --purge", kept)
	}
	return runner.Outcome{Changed: true, Message: msg}, nil
}

// recordKeptNamespaces leaves in the record only the namespaces --purge kept: what it kept is still
// gpuctl's to delete once it holds nothing else, and nothing more is (the rest is gone, or was not
// the object gpuctl created).
func (e *execution) recordKeptNamespaces(ctx context.Context) (runner.Outcome, error) {
	r := uninstalled(e.p.record)
	r.CRDs, r.Objects, r.Namespaces = nil, nil, nil
	for _, o := range e.p.record.Namespaces {
		if o.Created && slices.ContainsFunc(e.keptNamespaces, func(k KeptNamespace) bool { return k.Name == o.Name }) {
			r.Namespaces = append(r.Namespaces, o)
		}
	}
	if err := record.Write(ctx, e.Clients.Kube, r); err != nil {
		return runner.Outcome{}, err
	}
	var names []string
	for _, o := range r.Namespaces {
		names = append(names, o.Name)
	}
	return runner.Outcome{Changed: true, Message: "keeps only the namespaces --purge kept (" + strings.Join(names, ", ") +
		"), for a later uninstall --purge"}, nil
}

// uninstalled is rec marked uninstalled by this run. Every release, taint and custom resource gpuctl
// created is gone (the plan deleted them by UID).
func uninstalled(rec *record.Record) *record.Record {
	r := *rec
	r.Uninstalled, r.Command, r.Result, r.Updated = true, "uninstall", "succeeded", time.Now().UTC()
	r.Releases, r.TaintedNodes, r.CustomResources, r.TracksCustomResources = nil, nil, nil, true
	return &r
}
