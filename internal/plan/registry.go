package plan

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gpuctl/gpuctl/internal/distro"
)

// RegistrySource is the Source of the --registry values layer.
func RegistrySource(mirror string) string { return "--registry " + mirror }

// ValidateRegistry judges a --registry mirror: a registry host (with an optional port) and an
// optional path, as an image reference starts ("mirror.example:5000", "harbor.corp/nvidia-mirror"). The
// host must look like one (a dot, a port or localhost): otherwise container runtimes read the first
// component as a Docker Hub namespace (the reference grammar of github.com/distribution/reference).
func ValidateRegistry(mirror string) error {
	re := regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)
	if !re.MatchString(mirror) {
		return fmt.Errorf("--registry %q: want a registry host and optional path, e.g. mirror.example:5000 or harbor.corp/nvidia (no scheme, tag or trailing slash)", mirror)
	}
	host, _, _ := strings.Cut(mirror, "/")
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return fmt.Errorf("--registry %q: %s is not a registry host (no dot, port or localhost): runtimes would read it as a Docker Hub namespace", mirror, host)
	}
	return nil
}

// MirrorRepository points an image repository at mirror, keeping its path: the registry host is
// replaced ("nvcr.io/nvidia/gpu-operator" → "MIRROR/nvidia/gpu-operator"); a Docker Hub repository
// keeps Docker Hub's path ("busybox" → "MIRROR/library/busybox"). A repository already under mirror
// is kept.
func MirrorRepository(repo, mirror string) string {
	if repo == mirror || strings.HasPrefix(repo, mirror+"/") {
		return repo
	}
	host, rest, ok := strings.Cut(repo, "/")
	switch {
	case !ok:
		rest = "library/" + repo
	case !strings.ContainsAny(host, ".:") && host != "localhost":
		rest = repo
	}
	return mirror + "/" + rest
}

// RegistryLayer returns the values that point every image of a release's values at mirror: each map
// with a non-empty "repository" (the ClusterPolicy's and NVIDIA's chart convention, and NFD's
// image.repository) gets that repository under the mirror. effective are the values the layer goes
// over — the chart's defaults with every layer below the user's — so that it rewrites what the
// release would otherwise pull. An image with imagePullPolicy/pullPolicy Never is preloaded on the
// node and never pulled, so it is left alone.
func RegistryLayer(mirror string, effective map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(m map[string]any, path []string)
	walk = func(m map[string]any, path []string) {
		if repo, ok := m["repository"].(string); ok && repo != "" && m["pullPolicy"] != "Never" && m["imagePullPolicy"] != "Never" {
			set(out, MirrorRepository(repo, mirror), append(append([]string(nil), path...), "repository")...)
		}
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(sub, append(append([]string(nil), path...), k))
			}
		}
	}
	walk(effective, nil)
	return normalized(out)
}

// BelowUser returns the release's values without the user's layers (-f files and --set): what a
// layer placed by AddDetectedLayer goes over.
func (r *Release) BelowUser() map[string]any {
	out := map[string]any{}
	for _, l := range r.Layers {
		if !userLayer(l) {
			out = merge(out, l.Values)
		}
	}
	return out
}

// addImageLayers adds the layers of --registry and --image-pull-secret to every Helm release of the
// plan, among the detected facts: above the profile and what detection found, below -f and --set, so
// the user's own image values still win and the Plan shows where each value came from. On OpenShift
// OLM deploys NVIDIA's operator and its images: the plan says so instead.
func (b *builder) addImageLayers(p *Plan) error {
	o := b.o
	if o.Registry == "" && len(o.ImagePullSecrets) == 0 {
		return nil
	}
	if distro.Get(p.Distribution).OLM {
		p.Warnings = append(p.Warnings, "--registry and --image-pull-secret: not used on OpenShift, where OLM deploys NVIDIA's operator and its images; mirror them with oc-mirror and an ImageDigestMirrorSet, and add the mirror's credentials to the cluster's global pull secret")
		return nil
	}
	for i := range p.Steps {
		r := p.Steps[i].Release
		// The gpu-monitoring chart runs no pods: it has no image to mirror or pull.
		if r == nil || p.Steps[i].Kind != KindRelease || r.Chart == MonitoringRelease {
			continue
		}
		effective := r.BelowUser()
		if b.in.ChartImages != nil {
			var err error
			if effective, err = b.in.ChartImages(r, effective); err != nil {
				return err
			}
		}
		if o.Registry != "" {
			if v := RegistryLayer(o.Registry, effective); len(v) > 0 {
				r.AddDetectedLayer(Layer{Source: RegistrySource(o.Registry), Values: v})
			}
		}
		// NVIDIA's chart names pull secrets per image; the other charts once for all their pods.
		if v := PullSecretLayer(o.ImagePullSecrets, effective, r.Chart != OperatorRelease); len(v) > 0 {
			r.AddDetectedLayer(Layer{Source: PullSecretSource(o.ImagePullSecrets), Values: v})
		}
	}
	return nil
}
