package render

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"

	"helm.sh/helm/v4/pkg/registry"
)

// PushedChart is one chart archive in an OCI registry: pushed, or in a push's plan.
type PushedChart struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Reference is where the chart is: HOST/PATH/NAME:VERSION, as `helm pull oci://…` names it.
	Reference string `json:"reference"`
	// Digest is the chart archive's ("sha256:…"): the chart layer's in the registry, and the
	// digest charts save's index.yaml lists for the same version.
	Digest string `json:"digest"`
	// Manifest is the digest of the OCI manifest the registry stored ("" in a plan).
	Manifest string `json:"manifest,omitempty"`
}

// OCIRepositoryError: a registry path gpuctl cannot push charts under (not oci://, a tag or digest in
// it). A command-line mistake, refused before any push.
type OCIRepositoryError struct{ URL, Why string }

func (e *OCIRepositoryError) Error() string { return e.URL + ": " + e.Why }

// OCIRepository checks an oci://HOST/PATH registry path and returns HOST/PATH, under which each chart
// is pushed as NAME:VERSION (as `helm push CHART oci://HOST/PATH` does).
func OCIRepository(url string) (string, error) {
	rest, ok := strings.CutPrefix(url, "oci://")
	if !ok {
		return "", &OCIRepositoryError{url, "want an oci://HOST/PATH registry path"}
	}
	rest = strings.TrimSuffix(rest, "/")
	host, path, _ := strings.Cut(rest, "/")
	switch {
	case host == "":
		return "", &OCIRepositoryError{url, "no registry host"}
	case strings.ContainsAny(rest, "@"):
		return "", &OCIRepositoryError{url, "a digest is not a path: each chart is pushed as NAME:VERSION under the path"}
	case strings.Contains(path, ":"):
		return "", &OCIRepositoryError{url, "a tag is not a path: each chart is pushed as NAME:VERSION under the path"}
	case strings.ContainsAny(rest, "?# "):
		return "", &OCIRepositoryError{url, "not a registry path"}
	}
	return rest, nil
}

// PushOptions are how Push reaches the registry.
type PushOptions struct {
	// PlainHTTP talks HTTP, not HTTPS (a lab registry).
	PlainHTTP bool
	// InsecureSkipTLSVerify accepts any certificate the registry presents.
	InsecureSkipTLSVerify bool
	// RegistryConfig is Helm's registry credentials file (`helm registry login` writes it); "" = none.
	RegistryConfig string
}

// PushPlan is what Push pushes to url (oci://HOST/PATH): every archive of Archives, with its
// reference and digest. It reads nothing but gpuctl's own charts.
func PushPlan(url string) ([]PushedChart, []Archive, error) {
	base, err := OCIRepository(url)
	if err != nil {
		return nil, nil, err
	}
	archives, err := Archives()
	if err != nil {
		return nil, nil, err
	}
	plan := make([]PushedChart, 0, len(archives))
	for _, a := range archives {
		plan = append(plan, PushedChart{Name: a.Name, Version: a.Version, Reference: chartReference(base, a), Digest: "sha256:" + a.Digest})
	}
	return plan, archives, nil
}

// chartReference is HOST/PATH/NAME:TAG; an OCI tag cannot hold SemVer's "+", which Helm writes as
// "_" (helm.sh/helm/v4 v4.3.1 pkg/pusher/ocipusher.go).
func chartReference(base string, a Archive) string {
	return base + "/" + a.Name + ":" + strings.ReplaceAll(a.Version, "+", "_")
}

// Push pushes every chart of PushPlan(url) to the registry with Helm's registry client, as `helm push`
// does, and returns them with the manifests the registry stored, in order. It stops at the first
// chart that fails; the ones before it stay pushed (a push of the same archive again is a no-op in
// content).
func Push(ctx context.Context, url string, o PushOptions) ([]PushedChart, error) {
	plan, archives, err := PushPlan(url)
	if err != nil {
		return nil, err
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard), registry.ClientOptCredentialsFile(o.RegistryConfig)}
	switch {
	case o.PlainHTTP:
		opts = append(opts, registry.ClientOptPlainHTTP())
	case o.InsecureSkipTLSVerify:
		opts = append(opts, registry.ClientOptHTTPClient(&http.Client{Transport: &http.Transport{
			Proxy:           http.ProxyFromEnvironment,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the user asked for it
		}}))
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry client: %w", err)
	}
	var pushed []PushedChart
	for i, a := range archives {
		if err := ctx.Err(); err != nil {
			return pushed, err
		}
		p := plan[i]
		res, err := client.Push(a.Data, p.Reference)
		if err != nil {
			return pushed, fmt.Errorf("push %s: %w", p.Reference, err)
		}
		if res.Chart.Digest != p.Digest {
			return pushed, fmt.Errorf("push %s: the registry stored chart layer %s, not the archive's %s", p.Reference, res.Chart.Digest, p.Digest)
		}
		p.Manifest = res.Manifest.Digest
		pushed = append(pushed, p)
	}
	return pushed, nil
}
