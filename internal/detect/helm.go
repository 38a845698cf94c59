package detect

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// Helm's storage, as written by helm.sh/helm/v4 pkg/storage/driver (secrets.go, cfgmaps.go,
// util.go @v4.3.1): one Secret (or ConfigMap) per revision, named sh.helm.release.v1.<name>.v<rev>,
// labelled owner=helm, name=<release>, status=<status>, version=<revision>, with key "release"
// holding base64(gzip(JSON release)).
const (
	helmOwnerSelector = "owner=helm"
	helmPayloadKey    = "release"
	// maxHelmPayload bounds how much of one decompressed release we are willing to read: a
	// release embeds its chart, and the GPU operator chart carries a ~152 KB CRD (NVIDIA/gpu-operator
	// deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml@v26.7.0).
	maxHelmPayload = 32 << 20
)

// helmRecord is one revision as listed: its labels and, lazily, its payload.
type helmRecord struct {
	namespace string
	labels    map[string]string
	storage   string
	payload   func() string
}

// newestReleases keeps the newest revision of each release (by the version label) and decodes
// only that revision's payload, and only for its chart metadata.
//
// Why decode at all: the release name is chosen by the user, and only the payload names the chart.
// Why not decode more: the labels already give name, status and revision, and older revisions say
// nothing detection needs. A payload that does not decode is reported with an empty Chart and a
// warning; Analyze still links a release to a workload through the meta.helm.sh/release-name
// annotation Helm puts on everything it installs.
func newestReleases(records []helmRecord) (releases []HelmRelease, warnings []string) {
	type key struct{ ns, name string }
	newest := map[key]helmRecord{}
	revision := map[key]int{}
	for _, r := range records {
		name := r.labels["name"]
		if name == "" {
			continue
		}
		rev, err := strconv.Atoi(r.labels["version"])
		if err != nil {
			continue
		}
		k := key{r.namespace, name}
		if cur, ok := revision[k]; !ok || rev > cur {
			newest[k], revision[k] = r, rev
		}
	}
	for k, r := range newest {
		rel := HelmRelease{
			Name:      k.name,
			Namespace: k.ns,
			Revision:  revision[k],
			Status:    r.labels["status"],
			Storage:   r.storage,
			Gpuctl:    r.labels[ManagedReleaseLabel] == "true",
		}
		meta, err := decodeChartMetadata(r.payload())
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("helm release %s/%s revision %d: cannot read chart name: %v", k.ns, k.name, rel.Revision, err))
		} else {
			rel.Chart, rel.ChartVersion, rel.AppVersion = meta.Name, meta.Version, meta.AppVersion
		}
		releases = append(releases, rel)
	}
	sort.Slice(releases, func(i, j int) bool {
		if releases[i].Namespace != releases[j].Namespace {
			return releases[i].Namespace < releases[j].Namespace
		}
		return releases[i].Name < releases[j].Name
	})
	sort.Strings(warnings)
	return releases, warnings
}

type chartMetadata struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

// decodeChartMetadata reads chart.metadata from a stored release: base64, then gzip if the gzip
// magic is there (Helm skips compression for very old releases), then JSON. Only the chart
// metadata is unmarshalled; templates, values and manifest are skipped.
func decodeChartMetadata(data string) (chartMetadata, error) {
	if data == "" {
		return chartMetadata{}, fmt.Errorf("no %q key", helmPayloadKey)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return chartMetadata{}, fmt.Errorf("decode base64: %w", err)
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b, 0x08}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return chartMetadata{}, fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		raw, err = io.ReadAll(io.LimitReader(zr, maxHelmPayload))
		if err != nil {
			return chartMetadata{}, fmt.Errorf("gunzip: %w", err)
		}
	}
	var rel struct {
		Chart struct {
			Metadata chartMetadata `json:"metadata"`
		} `json:"chart"`
	}
	if err := json.Unmarshal(raw, &rel); err != nil {
		return chartMetadata{}, fmt.Errorf("decode release: %w", err)
	}
	if rel.Chart.Metadata.Name == "" {
		return chartMetadata{}, fmt.Errorf("release has no chart metadata")
	}
	return rel.Chart.Metadata, nil
}
