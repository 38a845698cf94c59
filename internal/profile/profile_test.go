package profile

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// chartKeys are the top-level keys of NVIDIA's gpu-operator chart
// (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0). A profile key outside this
// list is a typo NVIDIA's chart would silently ignore.
var chartKeys = []string{
	"platform", "nfd", "psa", "cdi", "sandboxWorkloads", "hostPaths", "daemonsets", "validator",
	"operator", "mig", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
	"nodeStatusExporter", "gds", "gdrcopy", "vgpuManager", "vgpuDeviceManager", "vfioManager",
	"sandboxDevicePlugin", "kataSandboxDevicePlugin", "ccManager", "kataManager", "clusterPolicy",
	"gpuCluster", "draDriver", "extraObjects",
}

// nfdChartKeys are the top-level keys of the upstream NFD chart
// (kubernetes-sigs/node-feature-discovery, tag v0.19.0).
var nfdChartKeys = []string{
	"image", "imagePullSecrets", "nameOverride", "fullnameOverride", "namespaceOverride", "featureGates",
	"priorityClassName", "master", "worker", "topologyUpdater", "gc", "prometheus", "postDeleteCleanup",
}

func TestEveryEmbeddedProfile(t *testing.T) {
	all, err := List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var names []string
	for _, p := range all {
		names = append(names, p.Name)
	}
	want := []string{"aks", "eks", "gke", "k0s", "k3s", "kubeadm", "microk8s", "openshift", "rke2", "tkgs"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("profiles = %v, want %v", names, want)
	}

	for _, p := range all {
		t.Run(p.Name+" parses with a description and a separate NFD section", func(t *testing.T) {
			if p.Description == "" || strings.Contains(p.Description, "\n") {
				t.Errorf("description = %q, want one non-empty line", p.Description)
			}
			if _, ok := p.Values[nfdKey]; ok {
				t.Errorf("Values still holds %q; it must be split into NFD", nfdKey)
			}
			if p.NFD == nil {
				t.Errorf("NFD is nil")
			}
			if len(p.Values) == 0 {
				t.Errorf("Values is empty")
			}
			if len(p.Source) == 0 {
				t.Errorf("Source is empty")
			}
		})
		t.Run(p.Name+" uses only the gpu-operator chart's own keys", func(t *testing.T) {
			for k := range p.Values {
				if !contains(chartKeys, k) {
					t.Errorf("unknown gpu-operator chart key %q", k)
				}
			}
			for k := range p.NFD {
				if !contains(nfdChartKeys, k) {
					t.Errorf("unknown NFD chart key %q", k)
				}
			}
		})
		t.Run(p.Name+" comments every setting", func(t *testing.T) {
			// Every top-level setting must be preceded by a comment line saying why.
			lines := strings.Split(string(p.Source), "\n")
			for i, l := range lines {
				if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, " ") {
					continue
				}
				if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") && !nextIsComment(lines, i) {
					t.Errorf("line %d %q has no comment before it or on its first child", i+1, l)
				}
			}
		})
	}
}

// nextIsComment reports whether the first line under a top-level key is a comment.
func nextIsComment(lines []string, i int) bool {
	return i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "#")
}

func TestProfilesCarryTheirPlatformFacts(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T, p Profile)
	}{
		{"kubeadm keeps NVIDIA's containerd defaults and sets no runtime paths", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, true, "driver", "enabled")
			wantValue(t, p.Values, true, "toolkit", "enabled")
			wantValue(t, p.Values, true, "cdi", "enabled")
			if env := lookup(p.Values, "toolkit", "env"); env != nil {
				t.Errorf("toolkit.env = %v, want unset so the operator's containerd/CRI-O defaults apply", env)
			}
		}},
		{"gke points driver and toolkit at /home/kubernetes/bin/nvidia and admits system-node-critical pods", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, false, "driver", "enabled")
			wantValue(t, p.Values, "/home/kubernetes/bin/nvidia", "hostPaths", "driverInstallDir")
			wantValue(t, p.Values, "/home/kubernetes/bin/nvidia", "toolkit", "installDir")
			wantValue(t, p.Values, true, "cdi", "enabled")
			wantEnv(t, p.Values, "RUNTIME_CONFIG_SOURCE", "file", "toolkit", "env")
			wantEnv(t, p.Values, "WITH_REBOOT", "true", "migManager", "env")
			objs := p.Objects()
			if len(objs) != 1 {
				t.Fatalf("Objects() = %d objects, want the ResourceQuota", len(objs))
			}
			q := objs[0]
			wantValue(t, q, "ResourceQuota", "kind")
			wantValue(t, q, "gpu-operator-quota", "metadata", "name")
			if ns := lookup(q, "metadata", "namespace"); ns != nil {
				t.Errorf("ResourceQuota namespace = %v, want unset (the release namespace)", ns)
			}
			exprs, _ := lookup(q, "spec", "scopeSelector", "matchExpressions").([]any)
			if len(exprs) != 1 {
				t.Fatalf("matchExpressions = %v", exprs)
			}
			e := exprs[0].(map[string]any)
			wantValue(t, e, "PriorityClass", "scopeName")
			wantValue(t, e, "In", "operator")
			if got := strings.Join(toStrings(e["values"]), ","); got != "system-node-critical,system-cluster-critical" {
				t.Errorf("priority classes = %s", got)
			}
			wantValue(t, p.NFD, "system-node-critical", "priorityClassName")
		}},
		{"rke2 sets only the k3s containerd socket and never the config.toml.tmpl path", onlyTheK3sSocket},
		{"k3s sets only the k3s containerd socket and never the config.toml.tmpl path", onlyTheK3sSocket},
		{"eks leaves driver and toolkit to the accelerated AMI", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, false, "driver", "enabled")
			wantValue(t, p.Values, false, "toolkit", "enabled")
			if env := lookup(p.Values, "toolkit", "env"); env != nil {
				t.Errorf("toolkit.env = %v, want unset: the toolkit does not run", env)
			}
			wantValue(t, p.NFD, "system-node-critical", "priorityClassName")
		}},
		{"aks leaves driver and toolkit to the AKS image and uses its nvidia-container-runtime handler", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, false, "driver", "enabled")
			wantValue(t, p.Values, false, "toolkit", "enabled")
			wantValue(t, p.Values, "nvidia-container-runtime", "operator", "runtimeClass")
			// Only read on --gpu-driver none pools, where the toolkit runs (NVIDIA/aicr#1688).
			wantEnv(t, p.Values, "RUNTIME_CONFIG_SOURCE", "file", "toolkit", "env")
			for _, note := range []string{"--gpu-driver none", "managed GPU node pools"} {
				if !strings.Contains(string(p.Source), note) {
					t.Errorf("the comments do not mention %q (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/microsoft-aks.html)", note)
				}
			}
		}},
		{"microk8s points the toolkit at the snap's containerd under /var/snap/microk8s", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, true, "driver", "enabled")
			wantValue(t, p.Values, true, "toolkit", "enabled")
			wantEnv(t, p.Values, "CONTAINERD_CONFIG", "/var/snap/microk8s/current/args/containerd-template.toml", "toolkit", "env")
			wantEnv(t, p.Values, "CONTAINERD_SOCKET", "/var/snap/microk8s/common/run/containerd.sock", "toolkit", "env")
			wantEnv(t, p.Values, "RUNTIME_CONFIG_SOURCE", "file=/var/snap/microk8s/current/args/containerd.toml", "toolkit", "env")
			env, _ := lookup(p.Values, "toolkit", "env").([]any)
			if len(env) != 3 {
				t.Errorf("toolkit.env = %v, want exactly NVIDIA's three MicroK8s settings (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html)", env)
			}
			for _, e := range env {
				v, _ := e.(map[string]any)["value"].(string)
				if !strings.Contains(v, "/var/snap/microk8s/") {
					t.Errorf("toolkit.env %v points outside /var/snap/microk8s", e)
				}
			}
		}},
		{"k0s points the toolkit at k0s's containerd socket and a containerd.d drop-in, read from files", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, true, "toolkit", "enabled")
			wantEnv(t, p.Values, "CONTAINERD_CONFIG", "/etc/k0s/containerd.d/nvidia.toml", "toolkit", "env")
			wantEnv(t, p.Values, "CONTAINERD_SOCKET", "/run/k0s/containerd.sock", "toolkit", "env")
			wantEnv(t, p.Values, "RUNTIME_CONFIG_SOURCE", "file", "toolkit", "env")
			if body := string(stripComments(p.Source)); strings.Contains(body, "/etc/k0s/containerd.toml") {
				t.Errorf("profile points the toolkit at containerd.toml, which k0s generates and owns")
			}
			if !strings.Contains(string(p.Source), "Uncertain") {
				t.Errorf("the comments do not flag what is unverified about k0s (k0s#6547)")
			}
		}},
		{"tkgs pulls the vGPU guest driver from NVAIE with the NLS licensing Secret", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, "nvcr.io/nvaie", "driver", "repository")
			wantValue(t, p.Values, "vgpu-guest-driver", "driver", "image")
			if v, _ := lookup(p.Values, "driver", "version").(string); v == "" {
				t.Errorf("driver.version unset: the chart's default driver does not exist in nvcr.io/nvaie")
			}
			if got := toStrings(lookup(p.Values, "driver", "imagePullSecrets")); !reflect.DeepEqual(got, []string{"ngc-secret"}) {
				t.Errorf("driver.imagePullSecrets = %v, want [ngc-secret]", got)
			}
			wantValue(t, p.Values, "licensing-config", "driver", "licensingConfig", "secretName")
			wantValue(t, p.Values, true, "driver", "licensingConfig", "nlsEnabled")
			if v := lookup(p.Values, "driver", "licensingConfig", "configMapName"); v != nil {
				t.Errorf("licensingConfig.configMapName = %v: deprecated since v25.10.0, use secretName", v)
			}
			wantValue(t, p.Values, true, "psa", "enabled")
			wantValue(t, p.Values, true, "operator", "upgradeCRD")
		}},
		{"openshift carries the OLM ClusterPolicy example's settings and leaves NFD to Red Hat's operator", func(t *testing.T, p Profile) {
			wantValue(t, p.Values, true, "platform", "openshift")
			wantValue(t, p.Values, false, "nfd", "enabled")
			wantValue(t, p.Values, true, "operator", "use_ocp_driver_toolkit")
			wantValue(t, p.Values, true, "dcgm", "enabled")
			wantValue(t, p.Values, true, "nodeStatusExporter", "enabled")
			wantValue(t, p.Values, true, "cdi", "enabled")
			wantEnv(t, p.Values, "WITH_WORKLOAD", "false", "validator", "plugin", "env")
			if len(p.NFD) != 0 {
				t.Errorf("NFD = %v, want empty: the NFD chart is not used on OpenShift", p.NFD)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Get(strings.Fields(tc.name)[0])
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			tc.check(t, p)
		})
	}
}

func TestNFDSectionsLabelGPUsTheWayTheOperatorExpects(t *testing.T) {
	for _, name := range []string{"kubeadm", "gke", "rke2", "tkgs", "eks", "aks", "microk8s", "k3s", "k0s"} {
		t.Run(name+" tolerates the GPU taint and labels NVIDIA devices by vendor", func(t *testing.T) {
			p, err := Get(name)
			if err != nil {
				t.Fatal(err)
			}
			tols, _ := lookup(p.NFD, "worker", "tolerations").([]any)
			found := false
			for _, x := range tols {
				m := x.(map[string]any)
				if m["key"] == "nvidia.com/gpu" && m["operator"] == "Exists" && m["effect"] == "NoSchedule" {
					found = true
				}
			}
			if !found {
				t.Errorf("worker.tolerations = %v, want nvidia.com/gpu Exists NoSchedule (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0)", tols)
			}
			if got := toStrings(lookup(p.NFD, "worker", "config", "sources", "pci", "deviceLabelFields")); !reflect.DeepEqual(got, []string{"vendor"}) {
				t.Errorf("deviceLabelFields = %v, want [vendor] (pci-10de labels, NVIDIA/gpu-operator deployments/gpu-operator/values.yaml@v26.7.0)", got)
			}
			classes := toStrings(lookup(p.NFD, "worker", "config", "sources", "pci", "deviceClassWhitelist"))
			if !contains(classes, "0300") || !contains(classes, "0302") {
				t.Errorf("deviceClassWhitelist = %v, want the display classes 0300 and 0302", classes)
			}
		})
	}
}

func TestGet(t *testing.T) {
	t.Run("an unknown name is an error listing the valid ones", func(t *testing.T) {
		_, err := Get("talos")
		if err == nil {
			t.Fatal("Get(talos) succeeded")
		}
		for _, n := range []string{"aks", "eks", "gke", "k0s", "k3s", "kubeadm", "microk8s", "openshift", "rke2", "tkgs"} {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("error %q does not list %s", err, n)
			}
		}
	})
	t.Run("a path is not a profile name", func(t *testing.T) {
		if _, err := Get("../profiles/gke"); err == nil {
			t.Fatal("Get with a path succeeded")
		}
	})
	t.Run("the default profile exists", func(t *testing.T) {
		if _, err := Get(Default); err != nil {
			t.Fatal(err)
		}
	})
}

func TestForDistribution(t *testing.T) {
	tests := []struct {
		distro    string
		wantName  string
		wantExact bool
	}{
		{"gke", "gke", true},
		{"tkgs", "tkgs", true},
		{"rke2", "rke2", true},
		{"k3s", "k3s", true},
		{"openshift", "openshift", true},
		{"kubeadm", "kubeadm", true},
		{"eks", "eks", true},
		{"aks", "aks", true},
		{"microk8s", "microk8s", true},
		{"k0s", "k0s", true},
		{"talos", "kubeadm", false},
		{"", "kubeadm", false},
	}
	for _, tc := range tests {
		name := tc.distro
		if name == "" {
			name = "an unknown distribution"
		}
		t.Run(name+" maps to "+tc.wantName, func(t *testing.T) {
			got, exact := ForDistribution(tc.distro)
			if got != tc.wantName || exact != tc.wantExact {
				t.Errorf("ForDistribution(%q) = %q, %v; want %q, %v", tc.distro, got, exact, tc.wantName, tc.wantExact)
			}
			if _, err := Get(got); err != nil {
				t.Errorf("mapped profile does not exist: %v", err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		wantErr string
		wantNFD int
	}{
		{name: "a file without a description header is rejected", src: "driver:\n  enabled: true\n", wantErr: "description"},
		{name: "a description after the first setting does not count", src: "driver: {}\n# description: late\n", wantErr: "description"},
		{name: "a non-mapping NFD section is rejected", src: "# description: x\nnode-feature-discovery: [1]\n", wantErr: "mapping"},
		{name: "invalid YAML is rejected", src: "# description: x\ndriver: [\n", wantErr: "parse YAML"},
		{name: "an empty NFD section gives an empty map", src: "# description: x\ndriver: {}\nnode-feature-discovery:\n", wantNFD: 0},
		{name: "the NFD section is split out", src: "# description: x\ndriver: {}\nnode-feature-discovery:\n  gc:\n    enable: true\n", wantNFD: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parse("t", []byte(tc.src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.NFD) != tc.wantNFD || p.NFD == nil {
				t.Errorf("NFD = %v, want %d keys", p.NFD, tc.wantNFD)
			}
			if _, ok := p.Values[nfdKey]; ok {
				t.Errorf("Values kept the NFD section")
			}
		})
	}
}

// onlyTheK3sSocket is the RKE2 and K3s rule: the toolkit gets the k3s containerd socket and nothing
// else; in particular no config path, since writing config.toml.tmpl breaks RKE2 after a reboot and
// can drop K3s's CNI config (NVIDIA/gpu-operator#992, NVIDIA/gpu-operator#473).
func onlyTheK3sSocket(t *testing.T, p Profile) {
	t.Helper()
	env, _ := lookup(p.Values, "toolkit", "env").([]any)
	if len(env) != 1 {
		t.Fatalf("toolkit.env = %v, want exactly CONTAINERD_SOCKET", env)
	}
	wantEnv(t, p.Values, "CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock", "toolkit", "env")
	body := string(stripComments(p.Source))
	for _, bad := range []string{"config.toml.tmpl", "CONTAINERD_CONFIG", "CONTAINERD_SET_AS_DEFAULT"} {
		if strings.Contains(body, bad) {
			t.Errorf("profile sets %s (NVIDIA/gpu-operator#992: breaks RKE2 after reboot)", bad)
		}
	}
}

func lookup(m map[string]any, path ...string) any {
	var cur any = m
	for _, k := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func wantValue(t *testing.T, m map[string]any, want any, path ...string) {
	t.Helper()
	if got := lookup(m, path...); !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", strings.Join(path, "."), got, want)
	}
}

func wantEnv(t *testing.T, m map[string]any, name, value string, path ...string) {
	t.Helper()
	env, _ := lookup(m, path...).([]any)
	for _, e := range env {
		if em, ok := e.(map[string]any); ok && em["name"] == name {
			if em["value"] != value {
				t.Errorf("%s %s = %#v, want %q", strings.Join(path, "."), name, em["value"], value)
			}
			return
		}
	}
	t.Errorf("%s has no %s (got %v)", strings.Join(path, "."), name, env)
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// stripComments drops YAML comments, so a test can look at what a profile sets rather than what
// its comments explain.
func stripComments(src []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(src), "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}
