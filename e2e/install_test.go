package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	"github.com/gpuctl/gpuctl/e2e/sandbox"
	docschema "github.com/gpuctl/gpuctl/e2e/schema"
	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/cli"
	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/release"
)

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestInstallWithNoFlags is the tool's main job on every platform gpuctl installs with Helm: detect, install NFD then the
// operator, and end with the real operator's ClusterPolicy Reconciled and every GPU node validated.
func TestInstallWithNoFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		distro, profile string
	}{
		{"gke", "gke"},
		{"rke2", "rke2"},
		{"tkgs", "tkgs"},
		{"kubeadm", "kubeadm"},
		{"k3s", "k3s"},
		{"eks", "eks"},
		{"aks", "aks"},
		{"microk8s", "microk8s"},
		{"openshift", "openshift"},
	} {
		t.Run(tc.distro, func(t *testing.T) {
			c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: tc.distro, GPUNodes: 2, CPUNodes: 1}})
			ctx := t.Context()
			gpuNodes := simulatedGPUNodes(c)
			before := taintsByNode(t, c)
			var env map[string]string
			if tc.distro == "tkgs" {
				env = nvaieInputs(t)
			}

			code, stdout, stderr := gpuctlEnv(t, c, env, "install", "-o", "json")
			if code != 0 {
				t.Fatalf("gpuctl install exited %d:\n%s", code, stderr)
			}
			var res engine.InstallResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("install -o json: %v\n%s", err, stdout)
			}

			t.Run("its -o json documents match their schemas in docs/schemas", func(t *testing.T) {
				docs := map[string]string{"install": stdout}
				for _, args := range [][]string{{"detect", "-o", "json"}, {"check", "--pre", "-o", "json"}, {"install", "--dry-run", "-o", "json"}} {
					_, out, _ := gpuctlEnv(t, c, env, args...)
					docs[strings.Join(args, " ")] = out
				}
				for name, doc := range docs {
					if kind, err := docschema.Validate([]byte(doc)); err != nil {
						t.Errorf("%s (%s): %v", name, kind, err)
					}
				}
			})

			t.Run("it detects the distribution and picks its profile", func(t *testing.T) {
				if res.Detection.Distribution.Name != tc.distro {
					t.Errorf("detected %s, want %s", res.Detection.Distribution.Name, tc.distro)
				}
				if res.Plan.Profile != tc.profile {
					t.Errorf("profile %s, want %s", res.Plan.Profile, tc.profile)
				}
			})

			t.Run("detection reads every node with one streaming request", func(t *testing.T) {
				var mu sync.Mutex
				var requests []*url.URL
				flags := genericclioptions.NewConfigFlags(true)
				flags.KubeConfig = &c.Kubeconfig
				flags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
					cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
						return roundTripFunc(func(r *http.Request) (*http.Response, error) {
							mu.Lock()
							requests = append(requests, r.URL)
							mu.Unlock()
							return rt.RoundTrip(r)
						})
					})
					return cfg
				}
				clients, err := kube.NewClients(flags, "")
				if err != nil {
					t.Fatal(err)
				}
				det, err := detect.Run(ctx, detect.From(clients))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, n := range det.GPUNodes {
					got = append(got, n.Name)
				}
				sort.Strings(got)
				if !slices.Equal(got, gpuNodes) {
					t.Errorf("GPU nodes %v, want %v", got, gpuNodes)
				}
				// A plain LIST holds the whole body, its envelope and the decoded list at once (2,000
				// labelled nodes: 12 MB of body); a watch that sends the initial events lets detection keep
				// each node's trimmed copy as it arrives (docs/performance.md).
				var nodeRequests []*url.URL
				mu.Lock()
				defer mu.Unlock()
				for _, u := range requests {
					if u.Path == "/api/v1/nodes" || strings.HasPrefix(u.Path, "/api/v1/nodes/") {
						nodeRequests = append(nodeRequests, u)
					}
				}
				if len(nodeRequests) != 1 {
					t.Fatalf("detection sent %d node requests, want 1: %v", len(nodeRequests), nodeRequests)
				}
				if q := nodeRequests[0].Query(); q.Get("watch") != "true" || q.Get("sendInitialEvents") != "true" {
					t.Errorf("node request %s is not a watch that sends the initial events", nodeRequests[0].RequestURI())
				}
			})

			t.Run("NFD is installed before the operator, and every step succeeded", func(t *testing.T) {
				var order []string
				for _, s := range res.Steps {
					if s.Outcome == event.StepFailed {
						t.Errorf("step %s failed: %s", s.ID, s.Message)
					}
					order = append(order, s.ID)
				}
				nfd, op := slices.Index(order, "release-node-feature-discovery"), slices.Index(order, "release-gpu-operator")
				if tc.distro == "openshift" {
					nfd, op = slices.Index(order, "release-nfd-operator"), slices.Index(order, "release-gpu-operator-certified")
				}
				if nfd < 0 || op < 0 || nfd > op {
					t.Errorf("step order %v", order)
				}
			})

			t.Run("every GPU node is validated", func(t *testing.T) {
				if !slices.Equal(res.GPUNodes, gpuNodes) {
					t.Errorf("validated %v, want %v", res.GPUNodes, gpuNodes)
				}
				pods, err := c.Kube.CoreV1().Pods(res.Plan.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=nvidia-operator-validator"})
				if err != nil {
					t.Fatal(err)
				}
				var ready []string
				for _, p := range pods.Items {
					for _, cond := range p.Status.Conditions {
						if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
							ready = append(ready, p.Spec.NodeName)
						}
					}
				}
				sort.Strings(ready)
				if !slices.Equal(ready, gpuNodes) {
					t.Errorf("Ready validators on %v, want %v", ready, gpuNodes)
				}
			})

			t.Run("every GPU node's NFD labels are nfd-master's, the manager uninstall takes them back by", func(t *testing.T) {
				assertNFDLabels(t, c, gpuNodes, tc.distro != "openshift")
			})

			t.Run("NVIDIA's GFD labels every GPU node, and a pod gets a GPU from NVIDIA's device plugin", func(t *testing.T) {
				if real, why := c.NVIDIAsDevicePluginServes(gpuNodes[0]); !real {
					t.Skip(why)
				}
				assertGFDLabels(t, c, res.Plan.Namespace, gpuNodes)
				ids, answer := allocate(t, c, gpuNodes[0], "nvidia.com/gpu", 1)
				// The GPU operator turns CDI on: the plugin names the device as a CDI device
				// (k8s.device-plugin.nvidia.com/gpu=<UUID>), not in NVIDIA_VISIBLE_DEVICES.
				if len(ids) != 1 || !strings.HasPrefix(ids[0], "GPU-") || !strings.Contains(answer, "="+ids[0]) {
					t.Errorf("the plugin handed out %v answering %s, want one GPU UUID (GPU-…) the answer names", ids, answer)
				}
			})

			t.Run("the real operator reports the ClusterPolicy ready and Reconciled", func(t *testing.T) {
				assertReconciled(t, c, res.Plan.Step("wait-clusterpolicy").Target)
			})

			t.Run("the controller that reconciled it is NVIDIA's of the default release, and it never exited", func(t *testing.T) {
				assertRealController(t, c, bundle.Default().Version)
			})

			t.Run("Helm lists both releases with the values gpuctl chose", func(t *testing.T) {
				flags := genericclioptions.NewConfigFlags(false)
				flags.KubeConfig = &c.Kubeconfig
				for _, step := range res.Plan.Steps {
					if step.Release == nil || step.Skip != "" {
						continue
					}
					name := step.Release.Name
					rc, err := release.New(flags, step.Release.Namespace, nil)
					if err != nil {
						t.Fatal(err)
					}
					rel, err := rc.Last(name)
					if err != nil || rel == nil {
						t.Fatalf("release %s: %v", name, err)
					}
					if rel.Status != "deployed" || rel.Revision != 1 {
						t.Errorf("release %s: %s revision %d", name, rel.Status, rel.Revision)
					}
					// The release holds the plan's values, plus what the engine resolved at run time
					// (an OLM channel): every planned value is there as planned.
					got := normalize(t, rel.Values)
					for k, v := range normalize(t, step.Release.Values) {
						if !reflect.DeepEqual(got[k], v) {
							t.Errorf("release %s value %s = %v, plan chose %v", name, k, got[k], v)
						}
					}
				}
			})

			if tc.distro == "gke" {
				t.Run("GKE nodes without a GKE-installed driver get Google's installer", func(t *testing.T) {
					if res.Plan.Step("release-gke-driver-installer-cos") == nil {
						t.Fatalf("no installer step in %v", res.Steps)
					}
					dss, err := c.Kube.AppsV1().DaemonSets("gpu-operator").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=gke-driver-installer-cos"})
					if err != nil || len(dss.Items) != 1 {
						t.Fatalf("installer DaemonSet: %v, %d found", err, len(dss.Items))
					}
				})
			}
			if tc.distro == "tkgs" {
				t.Run("the NVAIE secrets exist and the NGC key is nowhere else", func(t *testing.T) {
					assertNVAIESecrets(t, c, env, stdout+stderr)
				})
			}

			t.Run("a second install changes nothing", func(t *testing.T) {
				again := assertRerunChangesNothing(t, c, env)
				for _, r := range again.Releases {
					if r.Revision != 1 {
						t.Errorf("release %s is at revision %d after a no-op install", r.Name, r.Revision)
					}
				}
			})

			t.Run("untaint restores every node's original taints exactly", func(t *testing.T) {
				if code, _, stderr := gpuctl(t, c, "untaint"); code != 0 {
					t.Fatalf("untaint exited %d: %s", code, stderr)
				}
				after := taintsByNode(t, c)
				if !reflect.DeepEqual(before, after) {
					t.Errorf("taints before install:\n%v\nafter untaint:\n%v", before, after)
				}
			})
		})
	}
}

// When the GPU stack does not come up, gpuctl says what is stuck and why, and exits with
// ExitNotReady. Here the operator's pod runs but no controller does (the sandbox's follower is off),
// so no node is ever labelled nvidia.com/gpu.present and no validator appears.
func TestInstallThatTimesOutSaysWhatIsStuck(t *testing.T) {
	t.Parallel()
	c := sandbox.StartT(t, sandbox.Options{Scenario: sandbox.Scenario{Distro: "kubeadm", GPUNodes: 2, CPUNodes: 1}, NoOperator: true})
	// The timeout is the whole install's: long enough for every step before the wait on a loaded
	// machine, so that the wait is the step that fails.
	code, _, stderr := gpuctl(t, c, "install", "--timeout", "2m")
	if code != cli.ExitNotReady {
		t.Fatalf("exit %d, want %d (not ready)", code, cli.ExitNotReady)
	}
	for _, want := range []string{
		"FAILED Wait for the validator on every GPU node",
		"not ready",
		"ClusterPolicy cluster-policy: no status: the operator has not reconciled it",
		"hint: the GPU operator has labelled no node nvidia.com/gpu.present=true",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}

func assertNVAIESecrets(t *testing.T, c *sandbox.Cluster, env map[string]string, output string) {
	t.Helper()
	ctx := t.Context()
	lic, err := c.Kube.CoreV1().Secrets("gpu-operator").Get(ctx, "licensing-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(lic.Data["client_configuration_token.tok"]) != "nls-token-e2e" {
		t.Errorf("licensing-config token = %q", lic.Data["client_configuration_token.tok"])
	}
	if _, ok := lic.Data["gridd.conf"]; !ok {
		t.Error("licensing-config has no gridd.conf")
	}
	pull, err := c.Kube.CoreV1().Secrets("gpu-operator").Get(ctx, "ngc-secret", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Auths map[string]struct{ Username, Password string } `json:"auths"`
	}
	if err := json.Unmarshal(pull.Data[".dockerconfigjson"], &cfg); err != nil {
		t.Fatal(err)
	}
	if a := cfg.Auths["nvcr.io/nvaie"]; a.Username != "$oauthtoken" || a.Password != testNGCKey {
		t.Errorf("ngc-secret auths %+v", cfg.Auths)
	}
	if strings.Contains(output, testNGCKey) {
		t.Error("the NGC key appears in gpuctl's output")
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.Kubeconfig
	rc, err := release.New(flags, "gpu-operator", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gpu-operator", "node-feature-discovery"} {
		hist, err := rc.History(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			b, _ := json.Marshal(r.Values)
			if strings.Contains(string(b), testNGCKey) || strings.Contains(string(b), "nls-token-e2e") {
				t.Errorf("release %s revision %d holds secret material in its values", name, r.Revision)
			}
		}
	}
}
