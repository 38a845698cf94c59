package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestVersionOutput: gpuctl version -o json|yaml is one document, shaped as kubectl version -o json:
// clientVersion always, serverVersion when the API server was asked and answered.
func TestVersionOutput(t *testing.T) {
	apiServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"33","gitVersion":"v1.33.1","platform":"linux/amd64"}`))
	}))
	t.Cleanup(apiServer.Close)
	answering := writeKubeconfig(t, apiServer.URL)
	refused := refusingServer(t)
	unreachable := writeKubeconfig(t, refused)

	type doc struct {
		APIVersion    string         `json:"apiVersion"`
		Kind          string         `json:"kind"`
		ClientVersion ClientVersion  `json:"clientVersion"`
		ServerVersion map[string]any `json:"serverVersion"`
	}
	parse := func(t *testing.T, format, out string) doc {
		t.Helper()
		b := []byte(out)
		if format == "yaml" {
			var err error
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatalf("not YAML: %v\n%s", err, out)
			}
		}
		var d doc
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("not one %s document: %v\n%s", format, err, out)
		}
		if d.APIVersion != APIVersion || d.Kind != "Version" {
			t.Errorf("apiVersion %q kind %q, want %s Version", d.APIVersion, d.Kind, APIVersion)
		}
		cv := d.ClientVersion
		if cv.GitVersion == "" || cv.GoVersion != runtime.Version() || cv.Platform != runtime.GOOS+"/"+runtime.GOARCH {
			t.Errorf("clientVersion %+v: want gpuctl's version, %s and %s/%s", cv, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		}
		var names []string
		for _, c := range cv.Charts {
			names = append(names, c.Name)
			if c.Version == "" || c.AppVersion == "" {
				t.Errorf("chart %+v lacks a version", c)
			}
		}
		if !reflect.DeepEqual(names, []string{"node-feature-discovery", "gpu-operator"}) {
			t.Errorf("charts %v, want node-feature-discovery and gpu-operator", names)
		}
		return d
	}

	for _, format := range []string{"json", "yaml"} {
		t.Run(format+": --client asks no server", func(t *testing.T) {
			code, out, errOut := run(t, nil, "--kubeconfig", unreachable, "version", "--client", "-o", format)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if d := parse(t, format, out); d.ServerVersion != nil {
				t.Errorf("serverVersion %v with --client", d.ServerVersion)
			}
		})
		t.Run(format+": the server's version when it answers", func(t *testing.T) {
			code, out, errOut := run(t, nil, "--kubeconfig", answering, "version", "-o", format)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if d := parse(t, format, out); d.ServerVersion["gitVersion"] != "v1.33.1" || d.ServerVersion["platform"] != "linux/amd64" {
				t.Errorf("serverVersion %v, want the server's answer", d.ServerVersion)
			}
		})
		t.Run(format+": an unreachable server still gets gpuctl's own version, and exit 9", func(t *testing.T) {
			code, out, errOut := run(t, nil, "--kubeconfig", unreachable, "version", "-o", format)
			if code != ExitUnreachable {
				t.Errorf("exit %d, want %d", code, ExitUnreachable)
			}
			if want := "gpuctl: cannot reach the Kubernetes API server at " + refused + ": connection refused\n"; errOut != want {
				t.Errorf("stderr %q, want %q", errOut, want)
			}
			if d := parse(t, format, out); d.ServerVersion != nil {
				t.Errorf("serverVersion %v from an unreachable server", d.ServerVersion)
			}
		})
	}

	t.Run("text: gpuctl, its charts, then the server", func(t *testing.T) {
		code, out, _ := run(t, nil, "--kubeconfig", answering, "version")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || !strings.HasPrefix(lines[0], "gpuctl ") || !strings.Contains(out, "\nchart gpu-operator ") || lines[len(lines)-1] != "server Kubernetes v1.33.1" {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("an unknown format is a usage error", func(t *testing.T) {
		if code, _, _ := run(t, nil, "version", "--client", "-o", "xml"); code != ExitUsage {
			t.Errorf("exit %d, want %d", code, ExitUsage)
		}
	})
}
