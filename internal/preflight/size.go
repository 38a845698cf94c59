package preflight

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxReleaseSize is the most a Helm release record may take: Helm's Secret driver stores the encoded
// release as the Secret's one data value, and Kubernetes refuses Secret data over MaxSecretSize
// (k8s.io/api/core/v1 v0.37.2).
const MaxReleaseSize = corev1.MaxSecretSize

// ReleaseSize is how large a release of the Plan would be in Helm's storage.
type ReleaseSize struct {
	Name string `json:"name"`
	// Bytes is the length of the encoded release (EncodeRelease).
	Bytes int `json:"bytes"`
}

// EncodedSize is the length of a release record as Helm v4.3.1 stores it: JSON, gzip at
// BestCompression, standard base64 (helm.sh/helm/v4 pkg/storage/driver/util.go encodeRelease at
// v4.3.1). rel is the release (helm.sh/helm/v4/pkg/release/v1 Release) or anything that marshals like
// it.
func EncodedSize(rel any) (int, error) {
	b, err := json.Marshal(rel)
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return 0, err
	}
	if _, err := w.Write(b); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return base64.StdEncoding.EncodedLen(buf.Len()), nil
}

// checkReleaseSize refuses a Plan whose release would not fit in Helm's storage: without it the
// install fails halfway, at the release's step ("Request entity too large"), after the steps before
// it changed the cluster. It is a mistake in the user's values, so it is an input check.
func checkReleaseSize(_ context.Context, env *Env) Result {
	if r, ok := needPlan(env); !ok {
		return r
	}
	var over, sizes []string
	for _, s := range env.ReleaseSizes {
		sizes = append(sizes, fmt.Sprintf("%s %s", s.Name, kib(s.Bytes)))
		if s.Bytes > MaxReleaseSize {
			over = append(over, fmt.Sprintf("release %s would be stored in %s (its JSON, gzipped and base64-encoded, as Helm stores it); a Secret holds at most %s", s.Name, kib(s.Bytes), kib(MaxReleaseSize)))
		}
	}
	if len(over) > 0 {
		return fail(strings.Join(over, "\n"), "the values (-f files, --set) are too large for a Helm release: leave out what the chart does not need")
	}
	if len(sizes) == 0 {
		return skip("no release was rendered")
	}
	return pass(strings.Join(sizes, ", "))
}

func kib(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}
