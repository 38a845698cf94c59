// Package support builds the support bundle of `gpuctl diagnose`: a tar.gz of what a support engineer
// needs to act on a GPU stack (objects, events, container logs, nodes, versions), with a manifest.json
// that lists every file, what was redacted where, and what could not be read and why.
//
// It collects from the cluster with plain reads (one LIST per kind and namespace, a bounded log read
// per container), each collector on its own: a forbidden or failing read is noted in the manifest and
// the rest goes on. Every file passes through the Redactor before it is stored, so nothing that looks
// like a credential (NGC keys, bearer tokens, JWTs such as NLS client tokens, PEM private keys, Docker
// registry auths, values under keys named like password/token/secret/apiKey) reaches the archive.
//
// It deliberately never reads a Secret's data: Secrets are listed by name and type only.
//
// Package engine (Support) calls it and adds what only the engine knows (the install record, Helm
// history, gpuctl status and check --pre); of gpuctl's packages it imports only internal/kube, for
// kube.EventTime.
package support
