// Package record is gpuctl's install record: the ConfigMap kube-system/gpuctl-install that says what
// gpuctl resolved and created when it last installed or upgraded (its inputs, releases, CRDs,
// namespaces, objects with their UIDs, and each node's labels and taints before the install). Status,
// upgrade and uninstall read it; uninstall deletes only what it names. What of a Plan the record names
// is each step kind's to say (internal/step, Kind.Recorded). cluster.go reads what the record's
// objects are in the cluster now.
package record
