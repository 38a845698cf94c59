package profile

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/distro"
	"github.com/gpuctl/gpuctl/profiles"
)

// Default is the profile used when a cluster's distribution has no profile of its own: NVIDIA's
// defaults, containerd and CRI-O in their standard places.
const Default = "kubeadm"

// nfdKey is the top-level section holding the NFD chart's values. It is also the key of the NFD
// subchart in NVIDIA's gpu-operator chart, so a profile file works with that chart unchanged.
const nfdKey = "node-feature-discovery"

// descriptionPrefix starts the header comment line the loader reads.
const descriptionPrefix = "# description:"

// Profile is one values profile.
type Profile struct {
	// Name is the file name without .yaml.
	Name string
	// Description is the one line from the "# description:" header.
	Description string
	// Values are the gpu-operator chart values, without the node-feature-discovery section.
	Values map[string]any
	// NFD is the node-feature-discovery section: values for the NFD chart. Never nil.
	NFD map[string]any
	// Source is the file as embedded, comments included.
	Source []byte
}

// Objects returns the profile's extraObjects (the gpu-operator chart's key for extra manifests),
// such as GKE's priority-class ResourceQuota. The planner applies them before installing NFD into
// the operator namespace: NFD's pods already need them
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
func (p Profile) Objects() []map[string]any {
	items, _ := p.Values["extraObjects"].([]any)
	var out []map[string]any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// List returns every embedded profile, sorted by name.
func List() ([]Profile, error) {
	files, err := fs.Glob(profiles.FS, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	sort.Strings(files)
	out := make([]Profile, 0, len(files))
	for _, f := range files {
		p, err := load(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Get returns the named profile. An unknown name is an error that lists the valid ones.
func Get(name string) (Profile, error) {
	file := name + ".yaml"
	if _, err := fs.Stat(profiles.FS, file); err != nil || strings.ContainsAny(name, "/*?[") {
		names, lerr := Names()
		if lerr != nil {
			return Profile{}, lerr
		}
		return Profile{}, fmt.Errorf("unknown profile %q: valid profiles are %s", name, strings.Join(names, ", "))
	}
	return load(file)
}

// Names returns the embedded profile names, sorted.
func Names() ([]string, error) {
	files, err := fs.Glob(profiles.FS, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, strings.TrimSuffix(f, ".yaml"))
	}
	sort.Strings(names)
	return names, nil
}

// ForDistribution names the profile for a distribution as package detect names it. exact is false
// when the distribution has no profile of its own and gets the default.
//
// Every distribution package distro knows has a profile (distro.Distribution.Profile; a test keeps
// profiles/ and the registry in step): k3s has its own although it carries RKE2's one setting
// (https://docs.rke2.io/add-ons/gpu_operators; NVIDIA/gpu-operator#992), so `gpuctl profiles` and
// the plan name the platform that was found. Only names distro does not know fall back to Default.
func ForDistribution(name string) (profile string, exact bool) {
	if d := distro.Get(name); d.Profile != "" {
		return d.Profile, true
	}
	return Default, false
}

func load(file string) (Profile, error) {
	src, err := fs.ReadFile(profiles.FS, file)
	if err != nil {
		return Profile{}, fmt.Errorf("read profile %s: %w", file, err)
	}
	return parse(strings.TrimSuffix(path.Base(file), ".yaml"), src)
}

// parse splits a profile file into its description, operator values and NFD values.
func parse(name string, src []byte) (Profile, error) {
	p := Profile{Name: name, Source: src}
	desc, err := description(src)
	if err != nil {
		return Profile{}, fmt.Errorf("profile %s: %w", name, err)
	}
	p.Description = desc

	values := map[string]any{}
	if err := yaml.Unmarshal(src, &values); err != nil {
		return Profile{}, fmt.Errorf("profile %s: parse YAML: %w", name, err)
	}
	if values == nil {
		values = map[string]any{}
	}
	p.NFD = map[string]any{}
	if raw, ok := values[nfdKey]; ok {
		switch nfd := raw.(type) {
		case map[string]any:
			p.NFD = nfd
		case nil:
		default:
			return Profile{}, fmt.Errorf("profile %s: %s must be a mapping, not %T", name, nfdKey, raw)
		}
		delete(values, nfdKey)
	}
	p.Values = values
	return p, nil
}

// description reads "# description: <text>" from the comment block that opens the file.
func description(src []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		if strings.HasPrefix(line, descriptionPrefix) {
			if d := strings.TrimSpace(strings.TrimPrefix(line, descriptionPrefix)); d != "" {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("no %q line in the header comment", descriptionPrefix+" <one line>")
}
